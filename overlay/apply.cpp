// SPDX-License-Identifier: Apache-2.0
// apply / show / down: locate or create the interface, pick the backend,
// read what is there, send only the difference.
#include <sys/socket.h>

#include <chrono>
#include <set>
#include <unordered_set>

#include "common/fs.hpp"
#include "common/log.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

using nlohmann::json;

namespace {

Result<Key> read_key_file(const std::string& path) {
  auto text = read_text_file(path, 4096);
  if (!text) return Error{"private_key_file: " + text.error().message, text.error().sys_errno};
  auto k = key_from_file_text(*text);
  // Never echo the file's content: it is a secret.
  if (!k) return Error{"private_key_file " + path + ": " + k.error().message};
  return k;
}

// Which backend serves an existing link, and why we think so. For
// wireguard-go, conn keeps the connection that asked: the apply goes on over it.
// conn: in, a connection to the socket already open (EarlyGet), checked
// instead of a new one; out, the connection that identified the server.
Result<Backend> detect_backend(const LinkInfo& li, const std::string& ifname, const std::string& uapi_dir,
                               std::string& reason, Fd* conn = nullptr) {
  if (li.kind == "wireguard") {
    reason = "existing kernel wireguard interface adopted";
    return Backend::Kernel;
  }
  Result<Fd> fd = conn && conn->valid() ? Result<Fd>(std::move(*conn)) : uapi_connect(uapi_dir, ifname);
  if (fd) {
    if (auto srv = uapi_peer_pid(fd->get(), uapi_socket_path(uapi_dir, ifname))) {
      reason = "existing interface served by wireguard-go (pid " + std::to_string(*srv) + ") adopted";
      if (conn) *conn = std::move(*fd);
      return Backend::Userspace;
    }
  }
  return Error{"interface " + ifname + " exists (kind '" + li.kind +
                   "') but is neither a kernel wireguard link nor served by wireguard-go at " +
                   uapi_socket_path(uapi_dir, ifname) + "; refusing to touch it",
               EEXIST};
}

// New peers from which a kernel change is sent from a thread while apply()
// builds the report (WgBackend::set_device_send): the kernel's X25519 for 8
// peers is ~0.3 ms on a real CPU, ten times a thread's start.
constexpr int kOverlapNewPeers = 8;

std::unique_ptr<WgBackend> make_backend(Backend b, const std::string& uapi_dir, Fd conn = Fd(),
                                        const std::string& ifname = {}, bool get_sent = false) {
  if (b == Backend::Kernel) return make_kernel_backend();
  return make_userspace_backend(uapi_dir, std::move(conn), ifname, get_sent);
}

bool same_addr(const IpPrefix& a, const IpPrefix& b) {
  return a.family == b.family && a.addr == b.addr && a.len == b.len;
}

void link_fields(json& j, const LinkInfo& li) {
  j["address"] = nullptr;
  for (const auto& a : li.addrs)
    if (a.family == AF_INET) {
      j["address"] = a.str();
      break;
    }
  j["mtu"] = li.mtu;
  j["up"] = li.up;
}

json show_doc(const std::string& ifname, Backend b, const Device& d, const LinkInfo& li) {
  json j;
  j["interface"] = ifname;
  j["backend"] = backend_name(b);
  j["public_key"] = d.public_key ? json(key_to_base64(*d.public_key)) : json(nullptr);
  j["listen_port"] = d.listen_port.value_or(0);
  link_fields(j, li);
  // Built in a plain vector, then moved in: a 1000-peer report costs no
  // lookups of "peers" and no regrowth.
  json::array_t peers;
  peers.reserve(d.peers.size());
  for (const auto& p : d.peers) {
    json::array_t ips;
    ips.reserve(p.allowed_ips.size());
    for (const auto& a : p.allowed_ips) ips.emplace_back(a.str());
    json pj = json::object();
    auto& o = *pj.get_ptr<json::object_t*>();
    o.emplace("public_key", key_to_base64(p.public_key));
    o.emplace("endpoint", p.endpoint ? json(p.endpoint->str()) : json(nullptr));
    o.emplace("allowed_ips", std::move(ips));
    o.emplace("persistent_keepalive", p.persistent_keepalive.value_or(0));
    o.emplace("last_handshake_unix", p.last_handshake_sec);
    o.emplace("rx_bytes", p.rx_bytes);
    o.emplace("tx_bytes", p.tx_bytes);
    peers.push_back(std::move(pj));
  }
  j["peers"] = std::move(peers);
  return j;
}

struct Located {
  LinkInfo link;
  Backend backend;
  std::string reason;
  Fd conn;
};

// Must be called inside the namespace that holds the link.
Result<Located> locate(const std::string& ifname, const std::string& uapi_dir) {
  auto li = rtnl_get_link(ifname);
  if (!li) return li.take_error();
  if (!*li) return Error{"interface " + ifname + " not found", ENODEV};
  std::string reason;
  Fd conn;
  auto b = detect_backend(**li, ifname, uapi_dir, reason, &conn);
  if (!b) return b.take_error();
  return Located{**li, *b, reason, std::move(conn)};
}

}  // namespace

Result<json> apply(const DesiredMesh& m, const ApplyOptions& opt) {
  // The logger is made at the first line written: a push that logs nothing
  // (`mesh apply` adding peers to a live interface) never builds it, and a
  // debug line's arguments (the clock) are computed only when it is on.
  auto log = [] { return fa::logger("overlay"); };
  const bool debug = fa::log_enabled(spdlog::level::debug);
  const std::string& ifname = m.interface;
  auto t0 = std::chrono::steady_clock::now();

  // Everything that can be checked without touching the interface first.
  std::optional<Key> file_key;
  if (m.private_key_file) {
    auto k = read_key_file(*m.private_key_file);
    if (!k) return k.take_error();
    file_key = *k;
  }
  std::optional<Fd> ns;
  if (m.netns) {
    auto fd = open_netns(*m.netns);
    if (!fd) return Error{"netns: " + fd.error().message, fd.error().sys_errno};
    ns = std::move(*fd);
  }

  // Find the interface: already in the target namespace, or here.
  std::optional<LinkInfo> found;
  bool in_target = false;
  // (A kernel link's addresses are read with it, on the same socket; those
  // of a wireguard-go link later, while wireguard-go applies the change.)
  if (ns) {
    auto g = NetnsGuard::enter(ns->get());
    if (!g) return g.take_error();
    auto li = rtnl_get_link(ifname, LinkAddrs::No);
    if (!li) return li.take_error();
    if (*li) {
      found = **li;
      in_target = true;
    }
  }
  // What EarlyGet's thread read here while the document was parsed.
  std::unique_ptr<EarlyGet::KernelRead> pre;
  if (!ns && opt.early_get && opt.early_get->ifname() == ifname) pre = opt.early_get->take_kernel();
  if (!found && pre && pre->link) {
    found = std::move(*pre->link);
  } else if (!found) {
    auto li = rtnl_get_link(ifname, ns ? LinkAddrs::No : LinkAddrs::IfKernelWireguard);
    if (!li) return li.take_error();
    found = *li;
  }

  bool created = false, moved = false;
  Backend chosen;
  std::string reason;
  Fd conn;
  // A get sent while the document was parsed answers for this interface if
  // it lives here (no netns) and is served by that wireguard-go.
  bool early = false;
  if (opt.early_get && opt.early_get->pending() && opt.early_get->ifname() == ifname && found && !ns &&
      found->kind != "wireguard") {
    conn = opt.early_get->take();
    early = true;
  }
  if (found) {
    auto b = detect_backend(*found, ifname, opt.uapi_dir, reason, &conn);
    if (!b) return b.take_error();
    chosen = *b;
    if (opt.backend != Backend::Auto && opt.backend != chosen)
      return Error{ifname + " is served by the " + std::string(backend_name(chosen)) +
                       " backend; --backend " + backend_name(opt.backend) +
                       " would mean recreating it (run `mesh down` first)",
                   EEXIST};
  } else {
    bool try_user = opt.backend == Backend::Userspace;
    if (opt.backend != Backend::Userspace) {
      auto s = rtnl_add_wireguard(ifname);
      if (s) {
        chosen = Backend::Kernel;
        created = true;
        reason = "kernel has the wireguard link type";
      } else if (opt.backend == Backend::Auto && s.error().sys_errno == EOPNOTSUPP) {
        try_user = true;
        reason = "kernel has no wireguard link type (" + s.error().message + "), using " + opt.wireguard_go;
      } else {
        return s.take_error();
      }
    } else {
      reason = "userspace backend requested";
    }
    if (try_user) {
      if (uapi_socket_alive(opt.uapi_dir, ifname))
        return Error{"a wireguard-go already serves " + uapi_socket_path(opt.uapi_dir, ifname) + " but " +
                         ifname + " is not in this namespace" + (ns ? " nor in " + *m.netns : std::string()),
                     EEXIST};
      auto pid = start_wireguard_go(opt.wireguard_go, ifname, opt.uapi_dir, opt.state_dir);
      if (!pid) return pid.take_error();
      chosen = Backend::Userspace;
      created = true;
    }
    log()->info("{}: created with the {} backend: {}", ifname, backend_name(chosen), reason);
  }

  // Move before configuring: the UDP socket stays where the link was born
  // (WireGuard's birthplace namespace), everything else happens in the target.
  if (ns && !in_target) {
    if (auto s = rtnl_move_to_netns(ifname, ns->get()); !s) return s.take_error();
    moved = true;
    log()->info("{}: moved into netns {}", ifname, *m.netns);
  }
  std::unique_ptr<NetnsGuard> guard;
  if (ns) {
    auto g = NetnsGuard::enter(ns->get());
    if (!g) return g.take_error();
    guard = std::move(*g);
  }

  // An adopted link in this namespace was just read; a new or moved one is
  // read again where it now lives.
  LinkInfo link;
  if (found && !created && !moved && !ns) {
    link = *found;
  } else {
    auto li = rtnl_get_link(ifname, LinkAddrs::IfKernelWireguard);
    if (!li) return li.take_error();
    if (!*li) return Error{ifname + " vanished while being configured", ENODEV};
    link = **li;
  }

  auto ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  if (debug) log()->debug("{}: located at {:.2f} ms", ifname, ms());
  // The device EarlyGet's thread read, on the socket it read it with, if
  // this is the kernel link it found.
  const bool kernel_early =
      chosen == Backend::Kernel && !created && !moved && pre && pre->backend && pre->device;
  auto be = kernel_early ? std::move(pre->backend)
                         : make_backend(chosen, opt.uapi_dir, std::move(conn), ifname, early);
  auto cur = kernel_early ? Result<Device>(std::move(*pre->device)) : be->get_device(ifname);
  pre.reset();  // wipes the key's copy in the moved-from device
  if (debug)
    log()->debug("{}: device read at {:.2f} ms ({} peers{})", ifname, ms(), cur ? cur->peers.size() : 0,
                 early || kernel_early ? ", asked while the file was parsed" : "");
  if (!cur) return Error{ifname + ": read device: " + cur.error().message, cur.error().sys_errno};

  Device want;
  want.name = ifname;
  if (file_key) {
    want.private_key = file_key;
  } else if (cur->private_key) {
    want.private_key = cur->private_key;  // the key lives only in the interface
  } else {
    auto k = generate_private_key();
    if (!k) return k.take_error();
    want.private_key = *k;
  }
  // The node's public key, X25519 of the private key: at most once per
  // apply, and only when the answer matters. WireGuard never keeps a peer
  // whose key is the device's own (both the kernel and wireguard-go drop it,
  // also when the private key changes), so a peer the interface already has
  // cannot be us: the own-key check is needed only for a new private key or
  // a new peer. Otherwise it is derived only for the report, if asked.
  const bool key_changes = !cur->private_key || *cur->private_key != *want.private_key;
  bool new_peer = false;
  if (!key_changes) {
    std::unordered_set<Key, KeyHash> have;
    have.reserve(cur->peers.size());
    for (const auto& p : cur->peers) have.insert(p.public_key);
    for (const auto& dp : m.peers)
      if (!have.count(dp.public_key)) {
        new_peer = true;
        break;
      }
  }
  std::optional<Key> pub;
  if (!key_changes && cur->public_key) pub = cur->public_key;  // the kernel reports it
  if (!pub && (key_changes || new_peer || opt.report)) {
    auto derived = public_key_of(*want.private_key);
    if (!derived) return derived.take_error();
    pub = *derived;
  }
  if (pub && (key_changes || new_peer))
    for (size_t i = 0; i < m.peers.size(); ++i)
      if (m.peers[i].public_key == *pub)
        return Error{"peers[" + std::to_string(i) + "].public_key: `" + key_to_base64(*pub) +
                         "': this is the node's own public key; a node is not its own peer",
                     EINVAL};
  if (!cur->private_key && !file_key)
    log()->info("{}: generated a private key (kept only in the interface), public key {}", ifname,
                key_to_base64(*pub));
  want.listen_port = m.listen_port;
  want.peers.reserve(m.peers.size());
  for (const auto& dp : m.peers) {
    Peer p;
    p.public_key = dp.public_key;
    p.endpoint = dp.endpoint;
    p.allowed_ips = dp.allowed_ips;
    p.persistent_keepalive = dp.persistent_keepalive;
    want.peers.push_back(std::move(p));
  }
  // Nothing below reads want's peers: their allowed IPs move into the change.
  Device change = diff(*cur, std::move(want));
  if (cur->private_key) wipe(*cur->private_key);  // want holds the key from here on
  wipe(*want.private_key);
  // replace_peers: every current peer goes, with no remove entry of its own.
  int added = 0, removed = change.replace_peers ? static_cast<int>(cur->peers.size()) : 0, updated = 0;
  for (const auto& p : change.peers) (p.remove ? removed : p.update_only ? updated : added)++;
  if (debug && change.replace_peers)
    log()->debug("{}: no current peer stays: the peer list is replaced in one step ({} go)", ifname, removed);
  const bool device_changed = !is_noop(change);
  if (device_changed) {
    // Worth a thread to the kernel backend when there is work for the time
    // the kernel takes (the report, the caller's hook) and that time is
    // long: it derives a key for every new peer.
    const bool overlap = (opt.report || opt.while_waiting) && added >= kOverlapNewPeers;
    auto s = be->set_device_send(change, overlap);
    if (change.private_key) wipe(*change.private_key);
    if (!s) return Error{ifname + ": configure device: " + s.error().message, s.error().sys_errno};
  }
  // The link's addresses, for the report and the address check below: read
  // while wireguard-go works (~20 ms for 250 new peers), a failure reported
  // once it has answered; a kernel link's came with the link.
  Status addrs = link.addrs_read ? Status{} : rtnl_read_addrs(link);
  // The log line too (its code runs for the first time in a `mesh apply`
  // process: ~0.2 ms of page faults here, like the answer's below).
  std::string applied;
  // A key or port change is logged even for a caller that prints the counts.
  const bool log_change = device_changed && (opt.log_change || change.private_key || change.listen_port);
  if (log_change)
    applied = ifname + ": peers +" + std::to_string(added) + " -" + std::to_string(removed) + " ~" +
              std::to_string(updated) + (change.private_key ? ", private key set" : "") +
              (change.listen_port ? ", listen port " + std::to_string(*change.listen_port) : "");
  if (!opt.report) {
    // Without a report nothing below reads the peer lists: they are freed
    // while the backend works, not on the way out.
    want = Device{};
    change = Device{};
    *cur = Device{};
  }
  // The report is built while the backend applies the request (wireguard-go
  // takes ~20 ms for 250 new peers); it is only returned if the set succeeds.
  // What the device holds once the change lands is reported without a
  // second read, which would cost as much as the first on a 1000-peer device.
  // A caller's summary (report false) takes the place of the document.
  ApplySummary* const sum = opt.report ? nullptr : opt.summary;
  json doc;
  if (opt.report) {
    Device after = merge(std::move(*cur), change, pub ? &*pub : nullptr);
    after.public_key = pub;
    if (after.private_key) wipe(*after.private_key);
    doc = show_doc(ifname, chosen, after, link);
  } else if (!sum) {
    doc = {{"interface", ifname}, {"backend", backend_name(chosen)}};
  }
  // So is the rest of the answer; what depends on the outcome is filled in
  // below.
  if (!sum)
    doc["changes"] = {{"created", created},
                      {"moved", moved},
                      {"backend_reason", reason},
                      {"peers_added", added},
                      {"peers_removed", removed},
                      {"peers_updated", updated},
                      {"device_changed", device_changed},
                      {"link_changed", false},
                      {"elapsed_us", 0}};
  if (opt.while_waiting) opt.while_waiting();
  if (device_changed) {
    auto s = be->set_device_finish();
    if (!s) return Error{ifname + ": configure device: " + s.error().message, s.error().sys_errno};
    if (log_change) log()->info(applied);
  }
  if (!addrs) return addrs.take_error();

  if (debug) log()->debug("{}: device set at {:.2f} ms", ifname, ms());
  bool link_changed = false;
  if (m.mtu && link.mtu != *m.mtu) {
    if (auto s = rtnl_set_mtu(ifname, *m.mtu); !s) return s.take_error();
    link_changed = true;
  }
  bool have = false;
  for (const auto& a : link.addrs) {
    if (same_addr(a, m.address)) {
      have = true;
      continue;
    }
    // The interface is ours: any other IPv4 address on it is a leftover of
    // an earlier desired state (node renumbered).
    if (a.family == AF_INET) {
      if (auto s = rtnl_del_addr(link.ifindex, a); !s) return s.take_error();
      link_changed = true;
    }
  }
  if (!have) {
    if (auto s = rtnl_add_addr(link.ifindex, m.address); !s) return s.take_error();
    link_changed = true;
  }
  if (!link.up) {
    if (auto s = rtnl_set_up(ifname); !s) return s.take_error();
    link_changed = true;
  }

  if (debug) log()->debug("{}: link done at {:.2f} ms", ifname, ms());
  const long long elapsed_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  if (sum) {
    sum->interface = ifname;
    sum->backend = chosen;
    sum->backend_reason = std::move(reason);
    sum->created = created;
    sum->moved = moved;
    sum->device_changed = device_changed;
    sum->link_changed = link_changed;
    sum->peers_added = added;
    sum->peers_removed = removed;
    sum->peers_updated = updated;
    sum->elapsed_us = elapsed_us;
    return doc;
  }
  if (link_changed) {
    auto li2 = rtnl_get_link(ifname);
    if (!li2) return li2.take_error();
    if (*li2) link = **li2;
    link_fields(doc, link);
  }
  json& changes = doc["changes"];
  changes["link_changed"] = link_changed;
  changes["elapsed_us"] = elapsed_us;
  return doc;
}

Result<json> show(const std::string& ifname, const ShowOptions& opt) {
  std::unique_ptr<NetnsGuard> guard;
  std::optional<Fd> ns;
  if (opt.netns) {
    auto fd = open_netns(*opt.netns);
    if (!fd) return fd.take_error();
    ns = std::move(*fd);
    auto g = NetnsGuard::enter(ns->get());
    if (!g) return g.take_error();
    guard = std::move(*g);
  }
  auto loc = locate(ifname, opt.uapi_dir);
  if (!loc) return loc.take_error();
  auto be = make_backend(loc->backend, opt.uapi_dir, std::move(loc->conn), ifname);
  auto d = be->get_device(ifname);
  if (!d) return Error{ifname + ": read device: " + d.error().message, d.error().sys_errno};
  if (d->private_key && !d->public_key)
    if (auto pub = public_key_of(*d->private_key)) d->public_key = *pub;
  if (d->private_key) wipe(*d->private_key);
  return show_doc(ifname, loc->backend, *d, loc->link);
}

Status down(const std::string& ifname, const DownOptions& opt) {
  auto log = fa::logger("overlay");
  // Stop our wireguard-go first: its tun goes with it, wherever it was moved.
  if (auto s = stop_wireguard_go(ifname, opt.uapi_dir, opt.state_dir); !s) return s;
  std::unique_ptr<NetnsGuard> guard;
  std::optional<Fd> ns;
  if (opt.netns) {
    auto fd = open_netns(*opt.netns);
    if (!fd) return fd.take_error();
    ns = std::move(*fd);
    auto g = NetnsGuard::enter(ns->get());
    if (!g) return g.take_error();
    guard = std::move(*g);
  }
  auto li = rtnl_get_link(ifname, LinkAddrs::No);  // only its kind matters here
  if (!li) return li.take_error();
  if (!*li) return {};
  if ((*li)->kind != "wireguard" && (*li)->kind != "tun")
    return Error{ifname + " is a '" + (*li)->kind + "' link, not WireGuard; refusing to delete it", EINVAL};
  if (auto s = rtnl_delete_link(ifname); !s && s.error().sys_errno != ENODEV) return s;
  log->info("{}: removed", ifname);
  return {};
}

}  // namespace fa::overlay
