// SPDX-License-Identifier: Apache-2.0
#include "agent/core.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <cstring>

#include "agent/rdma_service.hpp"
#include "common/fault.hpp"
#include "common/fs.hpp"
#include "common/log.hpp"
#include "common/random.hpp"
#include "common/secure.hpp"
#include "probes/check.hpp"

namespace fa::agent {

using nlohmann::json;

namespace {

std::string random_instance() {
  if (auto r = random_hex(6)) return *r;
  unsigned char raw[6];
  auto t = std::chrono::steady_clock::now().time_since_epoch().count();
  std::memcpy(raw, &t, sizeof raw);
  return to_hex(raw, sizeof raw);
}

// The status copy of the inspect document: counters move all the time and
// would move the generation with them; they are served by /metrics.
json without_counters(json inspect) {
  if (!inspect.is_object()) return inspect;
  inspect.erase("counters");
  if (auto h = inspect.find("hcas"); h != inspect.end() && h->is_array())
    for (auto& hca : *h)
      if (auto p = hca.find("ports"); p != hca.end() && p->is_array())
        for (auto& port : *p) {
          port.erase("counters");
          port.erase("hw_counters");
        }
  return inspect;
}

std::string endpoint_of(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

ApiFailure unavailable(const char* what) {
  return ApiFailure{503, "unavailable", std::string(what) + " is not part of this build", "", nullptr};
}

ApiFailure invalid(const std::vector<overlay::ValidationError>& errors) {
  ApiFailure f{422, "validation_failed", "", "", json::array()};
  for (const auto& e : errors) f.details.push_back({{"field", e.field}, {"value", e.value}, {"message", e.message}});
  if (!errors.empty()) {
    const auto& e = errors.front();
    f.field = e.field;
    f.message = e.str();
    if (errors.size() > 1) f.message += " (and " + std::to_string(errors.size() - 1) + " more)";
  } else {
    f.message = "the mesh document is not valid";
  }
  return f;
}

ApiFailure invalid(const std::string& field, const std::string& value, const std::string& message) {
  return invalid({overlay::ValidationError{field, value, message}});
}

// Paths the API may have the daemon open as root: a namespace is a name, a
// file under /run/netns or a process's /proc/PID/ns/net, nothing else.
bool netns_accepted(const std::string& s) {
  auto under = [&s](const char* dir) {
    size_t n = std::strlen(dir);
    return s.size() > n && s.compare(0, n, dir) == 0 && s.find('/', n) == std::string::npos && s.substr(n) != "." &&
           s.substr(n) != "..";
  };
  if (s.empty() || s[0] != '/') return true;  // a name under /run/netns (checked by the overlay)
  if (under("/run/netns/") || under("/var/run/netns/")) return true;
  if (s.compare(0, 6, "/proc/") == 0 && s.size() > 13 && s.compare(s.size() - 7, 7, "/ns/net") == 0) {
    std::string pid = s.substr(6, s.size() - 13);
    return !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos;
  }
  return false;
}

// Where a key file named over the API may live: the state directory or the
// configuration directory, never anywhere else root can read.
bool key_file_accepted(const std::string& path, const std::string& state_dir) {
  if (path.find("/../") != std::string::npos || path.find("/./") != std::string::npos) return false;
  for (std::string dir : {state_dir, std::string("/etc/fabric-agent")}) {
    if (!dir.empty() && dir.back() != '/') dir += '/';
    if (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
        path.find('/', dir.size()) == std::string::npos)
      return true;
  }
  return false;
}

json mesh_block(const StatusParts& p) {
  json m = {{"available", p.mesh_available},
            {"public_key", p.public_key.empty() ? json(nullptr) : json(p.public_key)},
            {"endpoint", p.endpoint ? json(*p.endpoint) : json(nullptr)}};
  if (!p.mesh) {
    m["interface"] = p.interface;
    m["listen_port"] = p.listen_port;
    m["state"] = "none";
    return m;
  }
  const overlay::DesiredMesh& d = *p.mesh;
  m["cluster_id"] = d.cluster_id;
  m["interface"] = d.interface;
  m["address"] = d.address.str();
  m["listen_port"] = d.listen_port;
  m["state"] = p.mesh_live ? "up" : "absent";
  if (!p.mesh_live) m["error"] = p.mesh_error;
  json peers = json::array();
  for (const auto& peer : d.peers) {
    json ips = json::array();
    for (const auto& a : peer.allowed_ips) ips.push_back(a.str());
    peers.push_back({{"public_key", overlay::key_to_base64(peer.public_key)},
                     {"endpoint", peer.endpoint ? json(peer.endpoint->str()) : json(nullptr)},
                     {"allowed_ips", std::move(ips)}});
  }
  m["peers"] = std::move(peers);
  return m;
}

}  // namespace

bool StatusParts::operator==(const StatusParts& o) const {
  const bool same_mesh = mesh == o.mesh || (mesh && o.mesh && *mesh == *o.mesh);
  return starting == o.starting && inspect == o.inspect && mesh_available == o.mesh_available && same_mesh &&
         mesh_live == o.mesh_live && mesh_error == o.mesh_error && public_key == o.public_key &&
         endpoint == o.endpoint && interface == o.interface && listen_port == o.listen_port && pods == o.pods &&
         health == o.health && scorecard == o.scorecard && warnings == o.warnings;
}

const std::string& Snapshot::body() const {
  std::call_once(rendered_, [this] {
    // The keys in the order a document would sort them.
    body_ = "{\"health\":" + parts.health + ",\"inspect\":" + parts.inspect + ",\"mesh\":" +
            (parts.starting ? std::string("null") : mesh_block(parts).dump(-1, ' ', false, json::error_handler_t::replace)) +
            ",\"pods\":" + parts.pods + ",\"scorecard\":" + parts.scorecard + ",\"warnings\":" +
            json(parts.warnings).dump(-1, ' ', false, json::error_handler_t::replace) + "}";
  });
  return body_;
}

Core::Core(Config cfg, std::unique_ptr<Discovery> discovery, std::unique_ptr<MeshOps> mesh)
    : cfg_(std::move(cfg)),
      discovery_(std::move(discovery)),
      mesh_(std::move(mesh)),
      rdma_(std::make_unique<RdmaService>([this] { return config(); }, [this] { scorecard_changed(); })),
      instance_(random_instance()),
      started_(std::chrono::system_clock::now()) {
  auto s = std::make_shared<Snapshot>();
  s->etag = "W/\"" + instance_ + "-0\"";
  snap_ = std::move(s);
  inspect_full_ = std::make_shared<json>(nullptr);
}

Core::~Core() = default;

Config Core::config() const {
  std::lock_guard lk(cfg_mu_);
  return cfg_;
}

void Core::set_config(Config c) {
  std::lock_guard lk(cfg_mu_);
  cfg_ = std::move(c);
}

void Core::reconfigure(Config c, std::unique_ptr<Discovery> discovery) {
  std::lock_guard lk(op_mu_);
  set_config(std::move(c));
  if (discovery) discovery_ = std::move(discovery);
}

void Core::set_pods(PodsHooks h) {
  std::lock_guard lk(op_mu_);
  pods_ = std::move(h);
}

json Core::run_serialized(const std::function<json()>& fn) {
  std::lock_guard lk(op_mu_);
  return fn();
}

std::optional<overlay::DesiredMesh> Core::desired_held() const {
  if (!desired_) return std::nullopt;
  return *desired_;
}

// While a pod holds the mesh interface it lives in the pod's namespace: every
// apply/show/down goes there, or a PUT would create a second one on the host.
std::optional<std::string> Core::netns_locked(const overlay::DesiredMesh& m) {
  if (pods_.interface_netns)
    if (auto ns = pods_.interface_netns()) return ns;
  return m.netns;
}

// m itself, or (while a pod holds the interface) a copy of it placed in the
// pod's namespace, kept in `copy`.
const overlay::DesiredMesh& Core::placed_locked(const overlay::DesiredMesh& m,
                                                std::optional<overlay::DesiredMesh>& copy) {
  auto ns = netns_locked(m);
  if (ns == m.netns) return m;
  copy = m;
  copy->netns = std::move(ns);
  return *copy;
}

std::string Core::key_path() const { return config().state_dir + "/wg.key"; }
std::string Core::login_path() const { return config().state_dir + "/login.json"; }

void Core::set_token(Token t) {
  std::lock_guard lk(token_mu_);
  token_ = std::move(t);
}

AuthResult Core::check_token(std::string_view authorization) const {
  std::lock_guard lk(token_mu_);
  return check_bearer(token_, authorization);
}

// An unusable state file was moved aside: adopt the live interface as it is,
// so a running mesh keeps its peers. Its private key stays in the kernel.
void Core::recover_locked(const Config& cfg) {
  auto log = fa::logger("state");
  if (!mesh_) return;
  auto live = mesh_->show(cfg.overlay.interface, std::nullopt);
  if (!live) {
    log->info("no live interface {}: starting with no mesh", cfg.overlay.interface);
    return;
  }
  if (!live->address) {
    log->warn("live interface {} has no IPv4 address: starting with no mesh", cfg.overlay.interface);
    return;
  }
  overlay::DesiredMesh m;
  m.cluster_id = "recovered";
  m.interface = cfg.overlay.interface;
  m.address = *live->address;
  m.listen_port = live->device.listen_port.value_or(cfg.overlay.listen_port);
  m.mtu = live->mtu;
  for (const auto& p : live->device.peers) {
    overlay::DesiredPeer dp;
    dp.public_key = p.public_key;
    dp.endpoint = p.endpoint;
    dp.allowed_ips = p.allowed_ips;
    dp.persistent_keepalive = p.persistent_keepalive.value_or(0);
    m.peers.push_back(std::move(dp));
  }
  // Checked as a document from the control plane would be.
  overlay::ParseOptions po;
  po.overlay_cidr = cfg.overlay.cidr;
  auto v = overlay::parse_desired(overlay::to_json(m), po);
  if (!v.ok()) {
    log->warn("live interface {} could not be adopted: {}", cfg.overlay.interface, v.errors.front().str());
    return;
  }
  desired_ = std::make_shared<overlay::DesiredMesh>(std::move(*v.value));
  log->warn("state rebuilt from live interface {}: {} peers kept", cfg.overlay.interface, desired_->peers.size());
  if (Status s = store_->save(PersistedState{*desired_, std::nullopt}); !s) log->error("state: {}", s.error().message);
}

Status Core::start(const std::function<void()>& before_first_refresh) {
  auto log = fa::logger("state");
  const Config cfg = config();
  std::optional<Removal> removing;
  {
    std::lock_guard lk(op_mu_);
    overlay::ParseOptions po;
    po.overlay_cidr = cfg.overlay.cidr;
    store_ = std::make_unique<StateStore>(cfg.state_dir, po);
    auto loaded = store_->load();
    if (!loaded) return Error{"state: " + loaded.error().message, loaded.error().sys_errno};
    if (loaded->state.mesh) desired_ = std::make_shared<overlay::DesiredMesh>(std::move(*loaded->state.mesh));
    removing = loaded->state.removing;
    if (!loaded->moved_aside.empty()) {
      log->error("state file {}/state.json is unusable ({}); moved it to {} and rebuilding from the kernel's view",
                 cfg.state_dir, loaded->problem, loaded->moved_aside);
      recover_locked(cfg);
    }
    // Login material only lives with the mesh it was given for: a file
    // left by a DELETE /v1/mesh cut short goes now.
    if (auto text = read_text_file(login_path(), 1 << 20)) {
      auto l = pods::login_from_json(json::parse(*text, nullptr, false));
      if (l && desired_ && l->cluster_id == desired_->cluster_id)
        login_ = std::move(*l);
      else if (Status s = forget_login_locked(); !s)
        log->warn("login: {}", s.error().message);
    }
    if (mesh_) {
      auto pk = mesh_->ensure_key(key_path());
      if (!pk) return Error{"wireguard key: " + pk.error().message};
      public_key_ = *pk;
    }
  }
  // Pods first: a pod that held the mesh interface across a restart is
  // adopted there, so the apply below configures it inside the pod instead
  // of creating a second one on the host.
  if (before_first_refresh) before_first_refresh();
  {
    std::lock_guard lk(op_mu_);
    if (mesh_ && !desired_ && removing) {
      // A DELETE cut short: finish it (wherever a pod may hold the interface).
      auto netns = pods_.interface_netns ? pods_.interface_netns() : std::nullopt;
      if (Status s = mesh_->down(removing->interface, netns ? netns : removing->netns); s) {
        fa::logger("mesh")->info("{}: removal finished (the mesh was deleted before the last stop)", removing->interface);
        if (Status w = store_->save(PersistedState{}); !w) log->warn("state: {}", w.error().message);
      } else {
        fa::logger("mesh")->error("{}: could not finish the removal: {}", removing->interface, s.error().message);
      }
    }
    if (mesh_ && desired_) {
      auto mlog = fa::logger("mesh");
      std::optional<overlay::DesiredMesh> copy;
      const auto& m = placed_locked(*desired_, copy);
      auto r = mesh_->apply(m);
      if (r)
        mlog->info("{}: adopted persisted mesh of cluster {}{} (changes: {})", m.interface, m.cluster_id,
                   m.netns != desired_->netns ? " inside the pod holding it" : "", to_json(*r)["changes"].dump());
      else
        mlog->error("{}: could not bring the persisted mesh up: {} (retrying on each refresh)", m.interface,
                    r.error().message);
    }
  }
  refresh();
  return {};
}

StatusParts Core::parts_locked(bool live, const std::string& error) {
  const Config cfg = config();
  StatusParts p;
  p.starting = !discovered_;
  p.inspect = inspect_text_;
  p.mesh_available = mesh_ != nullptr;
  p.mesh = desired_;
  p.mesh_live = live;
  p.mesh_error = error;
  p.public_key = public_key_;
  if (!cfg.overlay.public_address.empty())
    p.endpoint = endpoint_of(cfg.overlay.public_address, cfg.overlay.listen_port);
  else if (fabric_address_)
    p.endpoint = endpoint_of(*fabric_address_, cfg.overlay.listen_port);
  p.interface = cfg.overlay.interface;
  p.listen_port = cfg.overlay.listen_port;
  if (pods_.list) {
    json l = pods_.list();
    p.pods = (l.is_object() && l.contains("pods") ? l["pods"] : json::array())
                 .dump(-1, ' ', false, json::error_handler_t::replace);
  }
  p.health = json{{"healthy", conditions_.empty()}, {"conditions", probes::to_json(conditions_)}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
  p.scorecard = rdma_->scorecard().dump(-1, ' ', false, json::error_handler_t::replace);
  p.warnings = warnings_;
  return p;
}

// A probe result is news for a control plane waiting on the status.
void Core::scorecard_changed() {
  std::lock_guard lk(op_mu_);
  if (discovered_) publish_locked(parts_locked(live_, live_error_));
}

void Core::publish_locked(StatusParts parts) {
  {
    std::lock_guard lk(snap_mu_);
    if (snap_->generation != 0 && snap_->parts == parts) return;
    auto s = std::make_shared<Snapshot>();
    s->generation = snap_->generation + 1;
    s->etag = "W/\"" + instance_ + "-" + std::to_string(s->generation) + "\"";
    s->parts = std::move(parts);
    snap_ = std::move(s);
  }
  std::lock_guard lk(sub_mu_);
  for (auto& [id, fn] : subs_) fn();
}

void Core::refresh() {
  auto log = fa::logger("agent");
  auto t0 = std::chrono::steady_clock::now();
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  warnings_.clear();
  json inspect = nullptr;
  fabric_address_.reset();
  std::optional<probes::Report> report;
  if (discovery_) {
    auto r = discovery_->discover();
    if (r) {
      if (r->fabric.kind == "roce") fabric_address_ = r->fabric.address;
      inspect = probes::to_json(*r);
      report = std::move(*r);
    } else {
      ++refresh_failures_;
      warnings_.push_back("discovery failed: " + r.error().message);
      log->warn("discovery failed: {}", r.error().message);
    }
  } else {
    warnings_.push_back("discovery (probes/) is not part of this build");
  }
  discovered_ = true;
  inspect_text_ = without_counters(inspect).dump(-1, ' ', false, json::error_handler_t::replace);
  if (pods_.on_discovery)
    for (auto& w : pods_.on_discovery(inspect)) warnings_.push_back(std::move(w));
  auto full = std::make_shared<const json>(std::move(inspect));
  {
    std::lock_guard sl(snap_mu_);
    inspect_full_ = full;
  }

  // Reconcile: the interface brought back to the desired mesh, whatever
  // happened to it (a reboot, `ip link del`, a peer removed by hand).
  if (mesh_ && desired_) {
    std::optional<overlay::DesiredMesh> copy;
    const auto& m = placed_locked(*desired_, copy);
    auto r = mesh_->apply(m);
    live_ = r.ok();
    live_error_ = r ? std::string() : r.error().message;
    if (!r)
      fa::logger("mesh")->error("{}: not live: {} (retrying on each refresh)", m.interface, r.error().message);
    else if (r->created || r->device_changed || r->link_changed)
      fa::logger("mesh")->warn("{}: had drifted from the desired mesh; restored (changes: {})", m.interface,
                               to_json(*r)["changes"].dump());
  }
  // Health: the discovery and, with a mesh, the peers' handshakes.
  if (report) {
    std::vector<probes::PeerSeen> peers;
    if (mesh_ && desired_ && live_)
      if (auto s = mesh_->show(desired_->interface, netns_locked(*desired_)))
        for (const auto& p : s->device.peers) peers.push_back({overlay::key_to_base64(p.public_key), p.last_handshake_sec});
    health_.configure(probes::health_from_config(cfg));
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    auto before = conditions_;
    conditions_ = health_.observe(*report, cfg.sysfs_root, peers, now.count());
    for (const auto& c : conditions_)
      if (std::find(before.begin(), before.end(), c) == before.end())
        log->warn("health: {}", probes::condition_line(c));
    for (const auto& c : before)
      if (std::find_if(conditions_.begin(), conditions_.end(), [&](const probes::Condition& n) {
            return n.code == c.code && n.subject == c.subject;
          }) == conditions_.end())
        log->info("health: cleared: {}: {}", c.subject, c.code);
  }
  // Node labels: what this pass found, with its health (docs/kubernetes.md).
  if (!cfg.nfd.feature_file.empty()) {
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    if (auto w = nfd_file_.write(cfg.nfd.feature_file, nfd::labels_of(*full, report && conditions_.empty()), now.count(),
                                 cfg.refresh_interval))
      warnings_.push_back(std::move(*w));
  }
  publish_locked(parts_locked(live_, live_error_));
  ++refreshes_;
  last_refresh_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<const Snapshot> Core::snapshot() const {
  std::lock_guard lk(snap_mu_);
  return snap_;
}

std::shared_ptr<const json> Core::inspect_document() const {
  std::lock_guard lk(snap_mu_);
  return inspect_full_;
}

std::string Core::render_status(const Snapshot& s) const {
  // The agent block is small and built per request (uptime moves); the rest
  // is the generation's text, made once.
  auto now = std::chrono::system_clock::now();
  long long uptime = std::chrono::duration_cast<std::chrono::seconds>(now - started_).count();
  long long started = std::chrono::duration_cast<std::chrono::seconds>(started_.time_since_epoch()).count();
  char head[256];
  std::snprintf(head, sizeof head,
                "{\"agent\":{\"version\":\"%s\",\"instance\":\"%s\",\"generation\":%llu,\"started_unix\":%lld,"
                "\"uptime_seconds\":%lld,\"hostname\":",
                FA_VERSION, instance_.c_str(), static_cast<unsigned long long>(s.generation), started, uptime);
  std::string out = head;
  // The kernel's node name (uname -n) as of this request: what slurmd and
  // `hostname` see, so `fabric-agent slurm` can name the Slurm node. Any
  // bytes the kernel holds are escaped, never trusted as UTF-8.
  struct utsname u {};
  out += uname(&u) == 0 ? json(std::string(u.nodename)).dump(-1, ' ', false, json::error_handler_t::replace) : "null";
  out += "},";
  out.append(s.body(), 1, std::string::npos);  // the body starts with '{'
  return out;
}

uint64_t Core::subscribe(std::function<void()> fn) {
  std::lock_guard lk(sub_mu_);
  uint64_t id = next_sub_++;
  subs_.emplace(id, std::move(fn));
  return id;
}

void Core::unsubscribe(uint64_t id) {
  std::lock_guard lk(sub_mu_);
  subs_.erase(id);
}

ApiResult Core::get_mesh() {
  if (!mesh_) return unavailable("the overlay (overlay/)");
  std::lock_guard lk(op_mu_);
  json out = {{"desired", desired_ ? overlay::to_json(*desired_) : json(nullptr)}, {"public_key", public_key_}};
  if (!desired_) {
    out["live"] = nullptr;
    return out;
  }
  auto s = mesh_->show(desired_->interface, netns_locked(*desired_));
  out["live"] = s ? overlay::to_json(*s) : json(nullptr);
  if (!s) out["live_error"] = s.error().message;
  return out;
}

// The document as the daemon keeps it (defaults from the config, the
// agent's key), or why it is refused. Nothing is touched.
std::variant<overlay::DesiredMesh, ApiFailure> Core::admit_locked(const Config& cfg, const json& doc) {
  if (!doc.is_object()) return invalid("", "", "the mesh document must be a JSON object");
  overlay::ParseOptions po;
  po.overlay_cidr = cfg.overlay.cidr;
  auto parsed = overlay::parse_desired(doc, po);
  if (!parsed.ok()) return invalid(parsed.errors);
  overlay::DesiredMesh m = std::move(*parsed.value);
  if (!doc.contains("interface")) m.interface = cfg.overlay.interface;
  if (!doc.contains("listen_port")) m.listen_port = cfg.overlay.listen_port;
  if (!m.mtu) m.mtu = cfg.overlay.mtu > 0 ? static_cast<uint32_t>(cfg.overlay.mtu) : 1420;
  // Without a key file of its own (none named, or null), the mesh uses the
  // agent's key, so the public key the control plane read from /v1/status
  // stays true.
  if (!m.private_key_file) {
    m.private_key_file = key_path();
  } else if (!key_file_accepted(*m.private_key_file, cfg.state_dir)) {
    return invalid("private_key_file", *m.private_key_file,
                   "expected a file directly in " + cfg.state_dir + " or /etc/fabric-agent (or null: the agent's key)");
  }
  if (m.netns && !netns_accepted(*m.netns))
    return invalid("netns", *m.netns, "expected a name, /run/netns/NAME or /proc/PID/ns/net");
  return m;
}

ApiResult Core::put_mesh(const json& doc) {
  if (!mesh_) return unavailable("the overlay (overlay/)");
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  auto admitted = admit_locked(cfg, doc);
  if (auto* f = std::get_if<ApiFailure>(&admitted)) return std::move(*f);
  overlay::DesiredMesh& want = std::get<overlay::DesiredMesh>(admitted);
  if (desired_) {
    if (desired_->cluster_id != want.cluster_id)
      return ApiFailure{409, "conflict",
                        "this node is in cluster '" + desired_->cluster_id + "'; DELETE /v1/mesh before joining '" +
                            want.cluster_id + "'",
                        "cluster_id", nullptr};
    if (desired_->interface != want.interface || desired_->netns != want.netns)
      return ApiFailure{409, "conflict",
                        "the mesh runs on interface '" + desired_->interface +
                            "'; DELETE /v1/mesh before moving it to another interface or namespace",
                        "interface", nullptr};
  }
  return change_locked(std::move(want), nullptr);
}

ApiResult Core::patch_mesh(const json& doc) {
  if (!mesh_) return unavailable("the overlay (overlay/)");
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  overlay::ParseOptions po;
  po.overlay_cidr = cfg.overlay.cidr;
  auto parsed = overlay::parse_peer_changes(doc, po);
  if (!parsed.ok()) return invalid(parsed.errors);
  const overlay::PeerChanges& c = *parsed.value;
  if (!desired_)
    return ApiFailure{409, "conflict", "this node has no mesh: PUT /v1/mesh first", "cluster_id", nullptr};
  if (c.cluster_id != desired_->cluster_id)
    return ApiFailure{409, "conflict",
                      "this node is in cluster '" + desired_->cluster_id + "', not '" + c.cluster_id + "'",
                      "cluster_id", nullptr};
  auto after = overlay::with_changes(*desired_, c, po);
  if (!after.ok()) return invalid(after.errors);
  return change_locked(std::move(*after.value), &c);
}

// The rest of a PUT or a PATCH, once the new desired mesh is valid: persist
// it ahead of the change (a crash in between leaves what the control plane
// asked for, which the next start applies), apply it, publish. A failed
// apply puts the previous state back.
ApiResult Core::change_locked(overlay::DesiredMesh next, const overlay::PeerChanges* peers) {
  auto log = fa::logger("mesh");
  const bool persist = !desired_ || *desired_ != next;
  if (persist)
    if (Status s = peers ? store_->append(*peers, next) : store_->save(PersistedState{next, std::nullopt}); !s) {
      log->error("state: {}", s.error().message);
      return ApiFailure{500, "state_write_failed", "nothing changed: " + s.error().message, "", nullptr};
    }
  fault_point("daemon: desired state persisted, not applied");
  std::optional<overlay::DesiredMesh> copy;
  auto r = peers ? mesh_->apply_peers(placed_locked(*desired_, copy), *peers) : mesh_->apply(placed_locked(next, copy));
  if (!r) {
    log->error("{}: apply failed: {}", next.interface, r.error().message);
    if (persist)
      if (Status s = store_->save(PersistedState{desired_ ? std::optional(*desired_) : std::nullopt, std::nullopt}); !s)
        log->error("state: writing back the previous mesh after the failed apply: {}", s.error().message);
    return ApiFailure{500, "apply_failed", r.error().message, "", nullptr};
  }
  fault_point("daemon: applied, not published");
  desired_ = std::make_shared<overlay::DesiredMesh>(std::move(next));
  live_ = true;
  live_error_.clear();
  json out = to_json(*r);
  log->info("{}: mesh of cluster {} applied ({} peers, changes: {})", desired_->interface, desired_->cluster_id,
            desired_->peers.size(), out["changes"].dump());
  publish_locked(parts_locked(true, ""));
  out["cluster_id"] = desired_->cluster_id;
  return out;
}

ApiResult Core::delete_mesh() {
  if (!mesh_) return unavailable("the overlay (overlay/)");
  auto log = fa::logger("mesh");
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  const std::string ifname = desired_ ? desired_->interface : cfg.overlay.interface;
  // Forgotten first, with the removal to finish: a removal cut short (a
  // crash) is finished at the next start, one that fails is retried by the
  // control plane, and neither is undone by a refresh recreating it.
  if (desired_)
    if (Status s = store_->save(PersistedState{std::nullopt, Removal{ifname, desired_->netns}}); !s)
      return ApiFailure{500, "state_write_failed", "nothing changed: " + s.error().message, "", nullptr};
  const bool had = desired_ != nullptr;
  // The login material belongs to the rental the mesh is: it goes with it.
  if (Status s = forget_login_locked(); !s) log->error("login: {}", s.error().message);
  std::optional<std::string> netns = desired_ ? netns_locked(*desired_) : std::nullopt;
  desired_.reset();
  if (Status s = mesh_->down(ifname, netns); !s) {
    log->error("{}: down failed: {}", ifname, s.error().message);
    publish_locked(parts_locked(false, ""));
    return ApiFailure{500, "down_failed", s.error().message, "", nullptr};
  }
  if (had) {
    log->info("{}: mesh removed", ifname);
    if (Status s = store_->save(PersistedState{}); !s) log->warn("state: {}", s.error().message);
  }
  live_ = false;
  live_error_.clear();
  publish_locked(parts_locked(false, ""));
  return json{{"interface", ifname}, {"removed", had}};
}

Status Core::forget_login_locked() {
  login_.reset();
  if (::unlink(login_path().c_str()) != 0 && errno != ENOENT) return Error::from_errno("remove " + login_path());
  return {};
}

ApiResult Core::get_login() {
  std::lock_guard lk(op_mu_);
  return json{{"login", login_ ? pods::public_view(*login_) : json(nullptr)}};
}

ApiResult Core::put_login(const json& doc) {
  std::lock_guard lk(op_mu_);
  if (!desired_)
    return ApiFailure{409, "conflict", "this node has no mesh: PUT /v1/mesh first (the login material is for its cluster)",
                      "cluster_id", nullptr};
  if (doc.is_object() && doc.contains("cluster_id") && doc["cluster_id"].is_string() &&
      doc["cluster_id"].get<std::string>() != desired_->cluster_id)
    return ApiFailure{409, "conflict",
                      "this node is in cluster '" + desired_->cluster_id + "', not '" +
                          doc["cluster_id"].get<std::string>() + "'",
                      "cluster_id", nullptr};
  auto parsed = pods::parse_login(doc, desired_->address, static_cast<int64_t>(std::time(nullptr)));
  if (!parsed.ok()) return invalid(parsed.errors);
  const pods::Login& l = *parsed.value;
  std::string text = pods::to_json(l).dump();
  Status w = write_file_atomic(login_path(), text, 0600);
  secure_wipe(text.data(), text.size());
  if (!w) return ApiFailure{500, "state_write_failed", "nothing changed: " + w.error().message, "", nullptr};
  fa::logger("login")->info("SSH login material of cluster {} kept (CA {}, host certificate for {}, user key {})",
                            l.cluster_id, pods::fingerprint(l.ca_public_key), l.principals.empty() ? "" : l.principals[0],
                            pods::fingerprint(l.user_public_key));
  login_ = std::move(*parsed.value);
  json out = pods::public_view(*login_);
  out["hosts"] = pods::host_pattern(desired_->address);
  return out;
}

ApiResult Core::delete_login() {
  std::lock_guard lk(op_mu_);
  const bool had = login_.has_value();
  if (Status s = forget_login_locked(); !s) return ApiFailure{500, "state_write_failed", s.error().message, "", nullptr};
  return json{{"removed", had}};
}

std::optional<json> Core::login_held() const {
  if (!desired_ || !login_ || login_->cluster_id != desired_->cluster_id) return std::nullopt;
  json j = pods::to_json(*login_);
  j["hosts"] = pods::host_pattern(desired_->address);
  return j;
}

json Core::pods() const {
  // Live from pods/ (which never makes a reader wait for a registration in
  // progress); the generation's copy without it.
  if (pods_.list) return pods_.list();
  auto s = snapshot();
  json l = json::parse(s->parts.pods, nullptr, false);
  return json{{"pods", l.is_array() ? l : json::array()}};
}

std::string Core::metrics_text() {
  std::optional<json> live;
  {
    std::lock_guard lk(op_mu_);
    if (mesh_ && desired_) {
      auto s = mesh_->show(desired_->interface, netns_locked(*desired_));
      if (s) live = overlay::to_json(*s);
    }
  }
  std::shared_ptr<const Snapshot> snap;
  std::shared_ptr<const json> inspect;
  {
    std::lock_guard lk(snap_mu_);
    snap = snap_;
    inspect = inspect_full_;
  }
  json health;
  {
    std::lock_guard lk(op_mu_);
    health = probes::to_json(conditions_);
  }
  json scorecard = rdma_->scorecard();
  MetricsInput in;
  in.health = &health;
  in.scorecard = &scorecard;
  in.inspect = inspect.get();
  in.mesh_live = live ? &*live : nullptr;
  in.generation = snap->generation;
  in.start_time_unix = std::chrono::duration<double>(started_.time_since_epoch()).count();
  in.refreshes = refreshes_;
  in.refresh_failures = refresh_failures_;
  in.last_refresh_seconds = last_refresh_seconds_;
  in.now_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return render_metrics(in, api_metrics_);
}

}  // namespace fa::agent
