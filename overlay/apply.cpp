// SPDX-License-Identifier: Apache-2.0
// apply / show / down: locate or create the interface, pick the backend,
// read what is there, send only the difference, configure the link.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <unordered_map>

#include "common/fault.hpp"
#include "common/fs.hpp"
#include "common/log.hpp"
#include "common/secure.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

using nlohmann::json;

namespace {

// The private key file: a regular file (opened without blocking, so a FIFO
// cannot hold the caller) readable by its owner only.
Result<Key> read_key_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd.valid()) return Error::from_errno("private_key_file: open " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Error::from_errno("private_key_file: stat " + path);
  if (!S_ISREG(st.st_mode))
    return Error{"private_key_file " + path + " is not a regular file (accepted: a file of mode 0600)", EINVAL};
  if ((st.st_mode & 077) != 0)
    return Error{"private_key_file " + path + " is readable or writable by group or others (accepted: mode 0600)",
                 EPERM};
  char buf[256];
  ssize_t n;
  do n = ::read(fd.get(), buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n < 0) return Error::from_errno("private_key_file: read " + path);
  std::string text(buf, static_cast<size_t>(n));
  secure_wipe(buf, sizeof buf);
  // Never echo the file's content: it is a secret.
  auto k = key_from_file_text(text);
  if (!k) return Error{"private_key_file " + path + ": " + k.error().message};
  return k;
}

std::unique_ptr<WgBackend> make_backend(Backend b, const std::string& uapi_dir) {
  if (b == Backend::Kernel) return make_kernel_backend();
  return make_userspace_backend(uapi_dir);
}

// Which backend serves an existing link, and why we think so.
Result<Backend> detect_backend(const LinkInfo& li, const std::string& ifname, const std::string& uapi_dir,
                               std::string& reason) {
  if (li.kind == "wireguard") {
    reason = "existing kernel wireguard interface adopted";
    return Backend::Kernel;
  }
  // A tun whose wireguard-go is still starting (it makes the tun, then its
  // socket) is given a moment: a daemon killed while it started one finds
  // that one again after a restart.
  for (int i = 0; i < (li.kind == "tun" ? 40 : 1); ++i) {
    if (auto srv = uapi_server_pid(uapi_dir, ifname)) {
      reason = "existing interface served by wireguard-go (pid " + std::to_string(*srv) + ") adopted";
      return Backend::Userspace;
    }
    if (li.kind == "tun") std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Error{"interface " + ifname + " exists (kind '" + li.kind +
                   "') but is neither a kernel wireguard link nor served by wireguard-go at " +
                   uapi_socket_path(uapi_dir, ifname) + "; refusing to touch it",
               EEXIST};
}

// Creates the interface in this namespace: a kernel link where the kernel
// has WireGuard (or the kernel backend was asked for), wireguard-go
// otherwise.
Result<Backend> create(const std::string& ifname, const ApplyOptions& opt, std::string& reason) {
  if (opt.backend != Backend::Userspace) {
    auto s = rtnl_add_wireguard(ifname);
    if (s) {
      reason = "kernel has the wireguard link type";
      return Backend::Kernel;
    }
    if (opt.backend != Backend::Auto || s.error().sys_errno != EOPNOTSUPP) return s.take_error();
    reason = "kernel has no wireguard link type (" + s.error().message + "), using " + opt.wireguard_go;
  } else {
    reason = "userspace backend requested";
  }
  if (uapi_server_pid(opt.uapi_dir, ifname))
    return Error{"a wireguard-go already serves " + uapi_socket_path(opt.uapi_dir, ifname) + " but " + ifname +
                     " is not in this namespace",
                 EEXIST};
  auto pid = start_wireguard_go(opt.wireguard_go, ifname, opt.uapi_dir, opt.state_dir);
  if (!pid) {
    // A wireguard-go started by a run killed before it recorded it may have
    // taken the name first: adopt that one once it serves its socket.
    auto li = rtnl_get_link(ifname);
    if (li && *li && (*li)->kind == "tun")
      if (auto b = detect_backend(**li, ifname, opt.uapi_dir, reason)) return *b;
    return pid.take_error();
  }
  return Backend::Userspace;
}

// Where the interface lives once located: the backend serving it, and the
// namespace it is configured in (entered for the guard's lifetime).
struct Located {
  bool absent = false;  // not found, and not created (may_create false)
  Backend backend = Backend::Auto;
  std::string reason;
  bool created = false, moved = false;
  std::optional<Fd> ns;
  std::unique_ptr<NetnsGuard> guard;
};

// Finds the interface (already in the target namespace, or here), or
// creates it here; then moves it into the target namespace (its UDP socket
// stays where it was born: WireGuard's birthplace namespace) and enters
// that namespace.
Result<Located> locate_or_create(const std::string& ifname, const std::optional<std::string>& netns,
                                 const ApplyOptions& opt, bool may_create = true) {
  Located loc;
  std::optional<LinkInfo> found;
  bool in_target = false;
  if (netns) {
    auto fd = open_netns(*netns);
    if (!fd) return Error{"netns: " + fd.error().message, fd.error().sys_errno};
    loc.ns = std::move(*fd);
    auto g = NetnsGuard::enter(loc.ns->get());
    if (!g) return g.take_error();
    auto li = rtnl_get_link(ifname);
    if (!li) return li.take_error();
    if (*li) {
      found = **li;
      in_target = true;
    }
  }
  if (!found) {
    auto li = rtnl_get_link(ifname);
    if (!li) return li.take_error();
    found = *li;
  }
  if (found) {
    auto b = detect_backend(*found, ifname, opt.uapi_dir, loc.reason);
    if (!b) return b.take_error();
    loc.backend = *b;
    if (opt.backend != Backend::Auto && opt.backend != loc.backend)
      return Error{ifname + " is served by the " + std::string(backend_name(loc.backend)) + " backend; --backend " +
                       backend_name(opt.backend) + " would mean recreating it (run `mesh down` first)",
                   EEXIST};
  } else if (!may_create) {
    loc.absent = true;
    return loc;
  } else {
    auto b = create(ifname, opt, loc.reason);
    if (!b) return b.take_error();
    loc.backend = *b;
    loc.created = true;
    fault_point("overlay: interface created, not configured");
    fa::logger("overlay")->info("{}: created with the {} backend: {}", ifname, backend_name(loc.backend),
                                loc.reason);
  }
  if (loc.ns && !in_target) {
    if (auto s = rtnl_move_to_netns(ifname, loc.ns->get()); !s) return s.take_error();
    loc.moved = true;
    fault_point("overlay: interface moved into its namespace");
    fa::logger("overlay")->info("{}: moved into netns {}", ifname, *netns);
  }
  if (loc.ns) {
    auto g = NetnsGuard::enter(loc.ns->get());
    if (!g) return g.take_error();
    loc.guard = std::move(*g);
  }
  return loc;
}

// The device `m` asks for, with its private key: the file's, else the one
// the interface has (it lives only there), else a new one.
Result<Device> wanted(const DesiredMesh& m, const Device& cur) {
  Device want;
  want.name = m.interface;
  if (m.private_key_file) {
    auto k = read_key_file(*m.private_key_file);
    if (!k) return k.take_error();
    want.private_key = *k;
  } else if (cur.private_key) {
    want.private_key = cur.private_key;
  } else {
    auto k = generate_private_key();
    if (!k) return k.take_error();
    want.private_key = *k;
    fa::logger("overlay")->info("{}: generated a private key (kept only in the interface)", m.interface);
  }
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
  return want;
}

// WireGuard never keeps a peer whose key is the device's own: say so
// instead of letting it vanish.
Status not_own_key(const std::vector<DesiredPeer>& peers, const Key& own, const std::string& list = "peers") {
  for (size_t i = 0; i < peers.size(); ++i)
    if (peers[i].public_key == own)
      return Error{list + "[" + std::to_string(i) + "].public_key: `" + key_to_base64(own) +
                       "': this is the node's own public key; a node is not its own peer",
                   EINVAL};
  return {};
}

// MTU, this node's address (any other IPv4 address on the interface is a
// leftover of an earlier desired state) and up. True when anything changed.
Result<bool> configure_link(const DesiredMesh& m) {
  auto li = rtnl_get_link(m.interface);
  if (!li) return li.take_error();
  if (!*li) return Error{m.interface + " vanished while being configured", ENODEV};
  const LinkInfo& link = **li;
  bool changed = false;
  if (m.mtu && link.mtu != *m.mtu) {
    if (auto s = rtnl_set_mtu(m.interface, *m.mtu); !s) return s.take_error();
    changed = true;
    fault_point("overlay: MTU set");
  }
  bool have = false;
  for (const auto& a : link.addrs) {
    if (a == m.address) {
      have = true;
    } else if (a.family == AF_INET) {
      if (auto s = rtnl_del_addr(link.ifindex, a); !s) return s.take_error();
      changed = true;
      fault_point("overlay: an old address removed");
    }
  }
  if (!have) {
    if (auto s = rtnl_add_addr(link.ifindex, m.address); !s) return s.take_error();
    changed = true;
    fault_point("overlay: address added, link maybe down");
  }
  if (!link.up) {
    if (auto s = rtnl_set_up(m.interface); !s) return s.take_error();
    changed = true;
  }
  return changed;
}

void count(const Device& change, size_t current_peers, ApplyResult& r) {
  // replace_peers: every current peer goes, with no remove entry of its own.
  r.peers_removed = change.replace_peers ? static_cast<int>(current_peers) : 0;
  for (const auto& p : change.peers) (p.remove ? r.peers_removed : p.update_only ? r.peers_updated : r.peers_added)++;
}

Status set(WgBackend& be, Device& change, const std::string& ifname) {
  Status s = be.set_device(change);
  if (change.private_key) wipe(*change.private_key);
  if (!s) return Error{ifname + ": configure device: " + s.error().message, s.error().sys_errno};
  return {};
}

// The calling thread in `netns` (if one is named) while this lives.
struct InNetns {
  std::optional<Fd> fd;
  std::unique_ptr<NetnsGuard> guard;
};
Result<InNetns> enter(const std::optional<std::string>& netns) {
  InNetns in;
  if (!netns) return in;
  auto fd = open_netns(*netns);
  if (!fd) return fd.take_error();
  in.fd = std::move(*fd);
  auto g = NetnsGuard::enter(in.fd->get());
  if (!g) return g.take_error();
  in.guard = std::move(*g);
  return in;
}

long long since_us(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
}

void log_change(const ApplyResult& r) {
  if (r.device_changed)
    fa::logger("overlay")->info("{}: peers +{} -{} ~{}", r.interface, r.peers_added, r.peers_removed,
                                r.peers_updated);
}

}  // namespace

Result<ApplyResult> apply(const DesiredMesh& m, const ApplyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  ApplyResult r;
  r.interface = m.interface;
  auto loc = locate_or_create(m.interface, m.netns, opt);
  if (!loc) return loc.take_error();
  r.backend = loc->backend;
  r.backend_reason = loc->reason;
  r.created = loc->created;
  r.moved = loc->moved;

  auto be = make_backend(loc->backend, opt.uapi_dir);
  auto cur = be->get_device(m.interface);
  if (!cur) return Error{m.interface + ": read device: " + cur.error().message, cur.error().sys_errno};
  auto want = wanted(m, *cur);
  if (!want) {
    if (cur->private_key) wipe(*cur->private_key);
    return want.take_error();
  }
  Device change = diff(*cur, *want);
  if (cur->private_key) wipe(*cur->private_key);
  auto pub = public_key_of(*want->private_key);
  wipe(*want->private_key);
  auto refuse = [&change](Error e) {
    if (change.private_key) wipe(*change.private_key);
    return e;
  };
  if (!pub) return refuse(pub.take_error());
  r.public_key = *pub;
  if (auto s = not_own_key(m.peers, *pub); !s) return refuse(s.take_error());
  count(change, cur->peers.size(), r);
  r.device_changed = !is_noop(change);
  if (change.replace_peers)
    fa::logger("overlay")->debug("{}: no current peer stays: the peer list is replaced in one step ({} go)",
                                 m.interface, r.peers_removed);
  if (r.device_changed) {
    if (auto s = set(*be, change, m.interface); !s) return s.take_error();
    fault_point("overlay: device set, link not configured");
  }
  log_change(r);
  auto link = configure_link(m);
  if (!link) return link.take_error();
  r.link_changed = *link;
  r.elapsed_us = since_us(t0);
  return r;
}

Result<ApplyResult> apply_peers(const DesiredMesh& m, const PeerChanges& changes, const ApplyOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto loc = locate_or_create(m.interface, m.netns, opt, false);
  if (!loc) return loc.take_error();
  if (loc->absent) {
    // Gone (a reboot, `ip link del`): the whole mesh, as it is after the change.
    auto after = with_changes(m, changes);
    if (!after.ok()) return Error{after.errors.front().str(), EINVAL};
    return apply(*after.value, opt);
  }
  ApplyResult r;
  r.interface = m.interface;
  r.backend = loc->backend;
  r.backend_reason = loc->reason;
  if (m.private_key_file) {
    auto k = read_key_file(*m.private_key_file);
    if (!k) return k.take_error();
    auto pub = public_key_of(*k);
    wipe(*k);
    if (!pub) return pub.take_error();
    r.public_key = *pub;
    if (auto s = not_own_key(changes.peers, *pub); !s) return s.take_error();
  }
  // Each changed peer as the mesh has it now (null: new), found in one scan
  // of the mesh for the few keys of the change.
  std::unordered_map<Key, const DesiredPeer*, KeyHash> before;
  for (const auto& p : changes.peers) before.emplace(p.public_key, nullptr);
  for (const auto& k : changes.remove) before.emplace(k, nullptr);
  for (const auto& p : m.peers)
    if (auto it = before.find(p.public_key); it != before.end()) it->second = &p;
  Device change;
  change.name = m.interface;
  for (const auto& dp : changes.peers) {
    const DesiredPeer* now = before.at(dp.public_key);
    if (now && *now == dp) continue;  // as it is
    (now ? r.peers_updated : r.peers_added)++;
    // Whole, whether new or replaced: the interface holds it as asked even
    // if it drifted from what this node last sent.
    Peer p;
    p.public_key = dp.public_key;
    p.endpoint = dp.endpoint;
    p.allowed_ips = dp.allowed_ips;
    p.persistent_keepalive = dp.persistent_keepalive;
    p.replace_allowed_ips = true;
    change.peers.push_back(std::move(p));
  }
  for (const auto& k : changes.remove) {
    if (!before.at(k)) continue;
    ++r.peers_removed;
    Peer p;
    p.public_key = k;
    p.remove = true;
    change.peers.push_back(std::move(p));
  }
  r.device_changed = !is_noop(change);
  if (r.device_changed) {
    auto be = make_backend(loc->backend, opt.uapi_dir);
    if (auto s = set(*be, change, m.interface); !s) return s.take_error();
  }
  log_change(r);
  r.elapsed_us = since_us(t0);
  return r;
}

Result<Shown> show(const std::string& ifname, const ShowOptions& opt) {
  auto in = enter(opt.netns);
  if (!in) return in.take_error();
  auto li = rtnl_get_link(ifname);
  if (!li) return li.take_error();
  if (!*li) return Error{"interface " + ifname + " not found", ENODEV};
  Shown s;
  s.interface = ifname;
  std::string reason;
  auto b = detect_backend(**li, ifname, opt.uapi_dir, reason);
  if (!b) return b.take_error();
  s.backend = *b;
  auto d = make_backend(*b, opt.uapi_dir)->get_device(ifname);
  if (!d) return Error{ifname + ": read device: " + d.error().message, d.error().sys_errno};
  if (d->private_key) wipe(*d->private_key);
  d->private_key.reset();
  s.device = std::move(*d);
  for (const auto& a : (*li)->addrs)
    if (a.family == AF_INET) {
      s.address = a;
      break;
    }
  s.mtu = (*li)->mtu;
  s.up = (*li)->up;
  return s;
}

json to_json(const Shown& s) {
  json j;
  j["interface"] = s.interface;
  j["backend"] = backend_name(s.backend);
  j["public_key"] = s.device.public_key ? json(key_to_base64(*s.device.public_key)) : json(nullptr);
  j["listen_port"] = s.device.listen_port.value_or(0);
  j["address"] = s.address ? json(s.address->str()) : json(nullptr);
  j["mtu"] = s.mtu;
  j["up"] = s.up;
  json peers = json::array();
  for (const auto& p : s.device.peers) {
    json ips = json::array();
    for (const auto& a : p.allowed_ips) ips.push_back(a.str());
    peers.push_back({{"public_key", key_to_base64(p.public_key)},
                     {"endpoint", p.endpoint ? json(p.endpoint->str()) : json(nullptr)},
                     {"allowed_ips", std::move(ips)},
                     {"persistent_keepalive", p.persistent_keepalive.value_or(0)},
                     {"last_handshake_unix", p.last_handshake_sec},
                     {"rx_bytes", p.rx_bytes},
                     {"tx_bytes", p.tx_bytes}});
  }
  j["peers"] = std::move(peers);
  return j;
}

json to_json(const ApplyResult& r) {
  return {{"interface", r.interface},
          {"backend", backend_name(r.backend)},
          {"public_key", r.public_key ? json(key_to_base64(*r.public_key)) : json(nullptr)},
          {"changes",
           {{"created", r.created},
            {"moved", r.moved},
            {"backend_reason", r.backend_reason},
            {"peers_added", r.peers_added},
            {"peers_removed", r.peers_removed},
            {"peers_updated", r.peers_updated},
            {"device_changed", r.device_changed},
            {"link_changed", r.link_changed},
            {"elapsed_us", r.elapsed_us}}}};
}

std::string summary_line(const ApplyResult& r) {
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.2f", static_cast<double>(r.elapsed_us) / 1000.0);
  return r.interface + ": backend " + backend_name(r.backend) + " (" + r.backend_reason + "); " +
         (r.created ? "created" : "adopted") + "; peers +" + std::to_string(r.peers_added) + " -" +
         std::to_string(r.peers_removed) + " ~" + std::to_string(r.peers_updated) + "; " + ms + " ms";
}

Status down(const std::string& ifname, const DownOptions& opt) {
  // Stop our wireguard-go first: its tun goes with it, wherever it was moved.
  if (auto s = stop_wireguard_go(ifname, opt.uapi_dir, opt.state_dir); !s) return s;
  auto in = enter(opt.netns);
  if (!in) return in.take_error();
  auto li = rtnl_get_link(ifname);
  if (!li) return li.take_error();
  if (!*li) return {};
  if ((*li)->kind != "wireguard" && (*li)->kind != "tun")
    return Error{ifname + " is a '" + (*li)->kind + "' link, not WireGuard; refusing to delete it", EINVAL};
  if (auto s = rtnl_delete_link(ifname); !s && s.error().sys_errno != ENODEV) return s;
  fa::logger("overlay")->info("{}: removed", ifname);
  return {};
}

Result<bool> interface_exists(const std::string& ifname, int ns_fd) {
  auto g = NetnsGuard::enter(ns_fd);
  if (!g) return g.take_error();
  auto li = rtnl_get_link(ifname);
  if (!li) return li.take_error();
  return li->has_value();
}

Result<bool> move_interface(const std::string& ifname, int from_ns_fd, int to_ns_fd) {
  auto g = NetnsGuard::enter(from_ns_fd);
  if (!g) return g.take_error();
  auto li = rtnl_get_link(ifname);
  if (!li) return li.take_error();
  if (!*li) return false;
  if (auto s = rtnl_move_to_netns(ifname, to_ns_fd); !s) return s.take_error();
  return true;
}

}  // namespace fa::overlay
