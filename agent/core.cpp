// SPDX-License-Identifier: Apache-2.0
#include "agent/core.hpp"

#include <cstdio>
#include <cstring>

#include "agent/rdma_service.hpp"
#include "common/log.hpp"
#include "common/random.hpp"
#include "common/task.hpp"

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
  if (inspect.contains("hcas") && inspect["hcas"].is_array())
    for (auto& hca : inspect["hcas"])
      if (hca.contains("ports") && hca["ports"].is_array())
        for (auto& p : hca["ports"]) {
          p.erase("counters");
          p.erase("hw_counters");
        }
  return inspect;
}

std::string endpoint_of(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<std::string> opt_netns(const json& desired) {
  if (desired.is_object() && desired.contains("netns") && desired["netns"].is_string())
    return desired["netns"].get<std::string>();
  return std::nullopt;
}

std::string ifname_of(const json& desired, const Config& cfg) {
  if (desired.is_object() && desired.contains("interface") && desired["interface"].is_string())
    return desired["interface"].get<std::string>();
  return cfg.overlay.interface;
}

json with_netns(json desired, const std::optional<std::string>& netns) {
  if (netns && desired.is_object()) desired["netns"] = *netns;
  return desired;
}

ApiFailure unavailable(const char* what) {
  return ApiFailure{503, "unavailable", std::string(what) + " is not part of this build", "", nullptr};
}

}  // namespace

Core::Core(Config cfg, std::unique_ptr<Discovery> discovery, std::unique_ptr<MeshOps> mesh)
    : cfg_(std::move(cfg)),
      discovery_(std::move(discovery)),
      mesh_(std::move(mesh)),
      rdma_(std::make_unique<RdmaService>([this] { return config(); })),
      instance_(random_instance()),
      started_(std::chrono::system_clock::now()) {
  auto s = std::make_shared<Snapshot>();
  s->etag = "W/\"" + instance_ + "-0\"";
  s->stable_body = R"({"inspect":null,"mesh":null,"pods":[],"warnings":["starting"]})";
  snap_ = std::move(s);
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

// While a pod holds the mesh interface it lives in the pod's namespace: every
// apply/show/down goes there, or a PUT would create a second one on the host.
std::optional<std::string> Core::mesh_netns_locked(const json& desired) {
  if (pods_.interface_netns)
    if (auto ns = pods_.interface_netns()) return ns;
  return opt_netns(desired);
}

json Core::pods_array_locked() {
  if (!pods_.list) return persisted_.pods;
  json l = pods_.list();
  return l.is_object() && l.contains("pods") ? l["pods"] : json::array();
}

std::string Core::key_path() const { return config().state_dir + "/wg.key"; }

void Core::set_token(Token t) {
  std::lock_guard lk(token_mu_);
  token_ = std::move(t);
}

AuthResult Core::check_token(std::string_view authorization) const {
  std::lock_guard lk(token_mu_);
  return check_bearer(token_, authorization);
}

Status Core::start(const std::function<void()>& before_first_refresh) {
  auto log = fa::logger("state");
  const Config cfg = config();
  {
    std::lock_guard lk(op_mu_);
    auto loaded = load_state(cfg.state_dir);
    if (!loaded) return Error{"state: " + loaded.error().message, loaded.error().sys_errno};
    persisted_ = loaded->state;
    if (!loaded->moved_aside.empty()) {
      log->error("state file {}/state.json is corrupt ({}); moved it to {} and rebuilding from the kernel's view",
                 cfg.state_dir, loaded->problem, loaded->moved_aside);
      // Rebuild: adopt the live interface as it is, so a running mesh keeps
      // its peers. Its private key stays in the kernel (no private_key_file).
      if (mesh_) {
        auto live = mesh_->show(cfg.overlay.interface, std::nullopt);
        if (live && live->is_object()) {
          json desired = {{"cluster_id", "recovered"},
                          {"interface", cfg.overlay.interface},
                          {"listen_port", live->value("listen_port", int{cfg.overlay.listen_port})},
                          {"peers", json::array()}};
          if (live->contains("address") && (*live)["address"].is_string() && !(*live)["address"].get<std::string>().empty())
            desired["address"] = (*live)["address"];
          for (const auto& p : live->value("peers", json::array())) {
            json peer = {{"public_key", p.value("public_key", "")}, {"allowed_ips", p.value("allowed_ips", json::array())}};
            if (p.contains("endpoint") && p["endpoint"].is_string()) peer["endpoint"] = p["endpoint"];
            if (p.contains("persistent_keepalive") && p["persistent_keepalive"].is_number() && p["persistent_keepalive"].get<int>() > 0)
              peer["persistent_keepalive"] = p["persistent_keepalive"];
            desired["peers"].push_back(std::move(peer));
          }
          auto v = mesh_->validate(desired);
          if (v.canonical) {
            persisted_.mesh = *v.canonical;
            log->warn("state rebuilt from live interface {}: {} peers kept", cfg.overlay.interface, desired["peers"].size());
          } else {
            log->warn("live interface {} could not be adopted: {}: {}", cfg.overlay.interface,
                      v.errors.empty() ? "" : v.errors[0].field, v.errors.empty() ? "" : v.errors[0].message);
          }
        } else {
          log->info("no live interface {}: starting with no mesh", cfg.overlay.interface);
        }
      }
      if (Status s = save_state(cfg.state_dir, persisted_); !s) log->error("state: {}", s.error().message);
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
    if (mesh_ && !persisted_.mesh.is_null()) {
      auto mlog = fa::logger("mesh");
      auto netns = mesh_netns_locked(persisted_.mesh);
      auto r = mesh_->apply(with_netns(persisted_.mesh, netns), 0, {});
      if (r)
        mlog->info("{}: adopted persisted mesh of cluster {}{} (changes: {})", ifname_of(persisted_.mesh, cfg),
                   persisted_.mesh.value("cluster_id", ""), netns ? " inside the pod holding it" : "",
                   r->contains("changes") ? (*r)["changes"].dump() : "{}");
      else
        mlog->error("{}: could not bring the persisted mesh up: {} (retrying on each refresh)",
                    ifname_of(persisted_.mesh, cfg), r.error().message);
    }
  }
  refresh();
  return {};
}

std::optional<std::string> Core::own_endpoint_locked(const json& inspect) const {
  const Config cfg = config();
  if (!cfg.overlay.public_address.empty()) return endpoint_of(cfg.overlay.public_address, cfg.overlay.listen_port);
  if (inspect.is_object() && inspect.contains("fabric") && inspect["fabric"].is_object()) {
    const json& f = inspect["fabric"];
    if (f.value("kind", "") == "roce" && f.contains("address") && f["address"].is_string())
      return endpoint_of(f["address"].get<std::string>(), cfg.overlay.listen_port);
  }
  return std::nullopt;
}

std::string Core::mesh_summary_locked(const json& d, bool live, const std::string& live_error) {
  json pub = public_key_.empty() ? json(nullptr) : json(public_key_);
  json m = {{"available", mesh_ != nullptr}};
  auto ep = own_endpoint_locked(last_inspect_);
  m["endpoint"] = ep ? json(*ep) : json(nullptr);
  if (d.is_null()) {
    const Config cfg = config();
    m["public_key"] = std::move(pub);
    m["interface"] = cfg.overlay.interface;
    m["listen_port"] = cfg.overlay.listen_port;
    m["state"] = "none";
    return m.dump();
  }
  m["cluster_id"] = d.value("cluster_id", "");
  m["interface"] = d.value("interface", "wg0");
  m["address"] = d.value("address", "");
  m["listen_port"] = d.value("listen_port", 51820);
  if (!live) m["error"] = live_error;
  // The peers (public key, endpoint or null, allowed IPs of each desired
  // peer) are written as text where a document would place "peers" among
  // the sorted keys, not copied into a document to be serialised with the
  // rest: that was ~3/4 of this text's cost for 250 peers, made again on
  // every PUT and every refresh. The text is the same, byte for byte.
  json after(json::value_t::object);  // the keys that sort after "peers"
  after["public_key"] = std::move(pub);
  after["state"] = live ? "up" : "absent";
  std::string out = m.dump();
  out.back() = ',';
  out += "\"peers\":[";
  static const json kNull, kEmpty = "", kNoIps = json::array();
  auto put = [&out](const json& p, const char* k, const json& absent) {
    auto f = p.find(k);
    out += (f != p.end() ? *f : absent).dump();
  };
  if (auto it = d.find("peers"); it != d.end() && it->is_array()) {
    bool first = true;
    for (const auto& p : *it) {
      out += first ? "{\"allowed_ips\":" : ",{\"allowed_ips\":";
      first = false;
      put(p, "allowed_ips", kNoIps);
      out += ",\"endpoint\":";
      put(p, "endpoint", kNull);
      out += ",\"public_key\":";
      put(p, "public_key", kEmpty);
      out += '}';
    }
  }
  out += "],";
  out.append(after.dump(), 1, std::string::npos);
  return out;
}

std::string Core::stable_body_locked(const json& inspect, const std::string& mesh_summary) {
  // As a document {inspect, mesh, pods, warnings} would serialise, with the
  // mesh block already text.
  std::string out = "{\"inspect\":" + without_counters(inspect).dump();
  out += ",\"mesh\":";
  out += mesh_summary;
  out += ",\"pods\":" + pods_array_locked().dump();
  out += ",\"warnings\":" + json(warnings_).dump();
  out += '}';
  return out;
}

void Core::publish_locked(std::string body, json inspect) {
  std::vector<std::function<void()>> wake;
  {
    std::lock_guard lk(snap_mu_);
    if (snap_->generation != 0 && snap_->stable_body == body) {
      // Unchanged: keep the generation, refresh only what /metrics reads.
      auto s = std::make_shared<Snapshot>(*snap_);
      s->inspect = std::move(inspect);
      snap_ = std::move(s);
      return;
    }
    auto s = std::make_shared<Snapshot>();
    s->generation = snap_->generation + 1;
    s->etag = "W/\"" + instance_ + "-" + std::to_string(s->generation) + "\"";
    s->stable_body = std::move(body);
    s->inspect = std::move(inspect);
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
  if (discovery_) {
    auto r = discovery_->discover();
    if (r) {
      inspect = std::move(*r);
    } else {
      ++refresh_failures_;
      warnings_.push_back("discovery failed: " + r.error().message);
      log->warn("discovery failed: {}", r.error().message);
    }
  } else {
    warnings_.push_back("discovery (probes/) is not part of this build");
  }
  last_inspect_ = inspect;
  if (pods_.on_discovery)
    for (auto& w : pods_.on_discovery(inspect)) warnings_.push_back(std::move(w));

  std::optional<json> live;
  std::string live_error;
  if (mesh_ && !persisted_.mesh.is_null()) {
    const std::string ifname = ifname_of(persisted_.mesh, cfg);
    auto netns = mesh_netns_locked(persisted_.mesh);
    auto s = mesh_->show(ifname, netns);
    if (!s) {
      // Reconcile: the desired mesh is gone from the kernel (reboot, someone
      // ran `ip link del`); bring it back.
      auto mlog = fa::logger("mesh");
      mlog->warn("{}: not live ({}); re-applying the persisted mesh", ifname, s.error().message);
      auto a = mesh_->apply(with_netns(persisted_.mesh, netns), 0, {});
      if (!a) mlog->error("{}: re-apply failed: {}", ifname, a.error().message);
      s = mesh_->show(ifname, netns);
    }
    if (s) live = std::move(*s);
    else live_error = s.error().message;
  }

  std::string body =
      stable_body_locked(inspect, mesh_summary_locked(persisted_.mesh, live.has_value(), live_error));
  publish_locked(std::move(body), std::move(inspect));
  ++refreshes_;
  last_refresh_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<const Snapshot> Core::snapshot() const {
  std::lock_guard lk(snap_mu_);
  return snap_;
}

std::string Core::render_status(const Snapshot& s) const {
  // The agent block is small and built per request (uptime moves); the rest
  // is the cached text of this generation, spliced in without re-serialising.
  auto now = std::chrono::system_clock::now();
  long long uptime = std::chrono::duration_cast<std::chrono::seconds>(now - started_).count();
  long long started = std::chrono::duration_cast<std::chrono::seconds>(started_.time_since_epoch()).count();
  char head[256];
  std::snprintf(head, sizeof head,
                "{\"agent\":{\"version\":\"%s\",\"instance\":\"%s\",\"generation\":%llu,\"started_unix\":%lld,"
                "\"uptime_seconds\":%lld},",
                FA_VERSION, instance_.c_str(), static_cast<unsigned long long>(s.generation), started, uptime);
  std::string out = head;
  out.append(s.stable_body, 1, std::string::npos);  // stable_body starts with '{'
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
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  json out = {{"desired", persisted_.mesh}, {"public_key", public_key_}};
  if (persisted_.mesh.is_null()) {
    out["live"] = nullptr;
    return out;
  }
  auto s = mesh_->show(ifname_of(persisted_.mesh, cfg), mesh_netns_locked(persisted_.mesh));
  out["live"] = s ? *s : json(nullptr);
  if (!s) out["live_error"] = s.error().message;
  return out;
}

ApiResult Core::put_mesh(json doc) {
  if (!mesh_) return unavailable("the overlay (overlay/)");
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  // Without a key file of its own (none named, or null), the mesh uses the
  // agent's key, so the public key the control plane read from /v1/status
  // stays true.
  if (doc.is_object())
    if (auto it = doc.find("private_key_file"); it == doc.end() || it->is_null())
      doc["private_key_file"] = key_path();
  return put_validated_locked(cfg, mesh_->validate(doc));
}

std::optional<ApiResult> Core::put_mesh_text(std::string_view body) {
  if (!mesh_) return std::nullopt;  // put_mesh says so, after the body's own errors
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  auto v = mesh_->validate_text(body, key_path());
  if (!v) return std::nullopt;
  return put_validated_locked(cfg, std::move(*v));
}

ApiResult Core::put_validated_locked(const Config& cfg, MeshValidation v) {
  auto log = fa::logger("mesh");
  if (!v.canonical) {
    ApiFailure f{422, "validation_failed", "", "", json::array()};
    for (const auto& e : v.errors)
      f.details.push_back({{"field", e.field}, {"value", e.value}, {"message", e.message}});
    if (!v.errors.empty()) {
      const auto& e = v.errors.front();
      f.field = e.field;
      f.message = e.field + ": `" + e.value + "': " + e.message;
      if (v.errors.size() > 1) f.message += " (and " + std::to_string(v.errors.size() - 1) + " more)";
    } else {
      f.message = "the mesh document is not valid";
    }
    return f;
  }
  const json& want = *v.canonical;
  const json& have = persisted_.mesh;
  if (!have.is_null()) {
    if (have.value("cluster_id", "") != want.value("cluster_id", "")) {
      mesh_->discard();
      return ApiFailure{409, "conflict",
                        "this node is in cluster '" + have.value("cluster_id", "") + "'; DELETE /v1/mesh before joining '" +
                            want.value("cluster_id", "") + "'",
                        "cluster_id", nullptr};
    }
    if (ifname_of(have, cfg) != ifname_of(want, cfg) || opt_netns(have) != opt_netns(want)) {
      mesh_->discard();
      return ApiFailure{409, "conflict",
                        "the mesh runs on interface '" + ifname_of(have, cfg) +
                            "'; DELETE /v1/mesh before moving it to another interface or namespace",
                        "interface", nullptr};
    }
  }
  const auto netns = mesh_netns_locked(want);
  // The new state is written and fsync'd (~1 ms here) while the mesh is
  // applied: both mostly wait, on the disk and on the backend. Should the
  // apply fail, the previous state is written back before the answer; a
  // crash in between leaves the new desired state on disk, which the next
  // start applies (what the control plane asked for).
  const bool persist = persisted_.mesh != want;
  // fa::Task: its get() returns when the state is written, without waiting
  // for the writer thread's exit as std::async's future would.
  Task<Status> saved;
  // The writer only reads `want` and the pods list, both left alone until
  // saved.get() below: no copy of the peer list for it.
  if (persist)
    saved = Task<Status>([&cfg, &want, this] { return save_state(cfg.state_dir, want, persisted_.pods); });
  // The status text with the new mesh is made while the backend applies it
  // (~1.3 ms for 1000 peers, against wireguard-go's ~60 ms), and published
  // only if the apply succeeds.
  std::string status_body;
  auto prepare = [&] {
    status_body = stable_body_locked(last_inspect_, mesh_summary_locked(want, true, ""));
  };
  // The parsed form of `want` is reused (v.token) unless the apply is of a
  // copy with the pod's namespace added.
  auto r = netns ? mesh_->apply(with_netns(want, netns), 0, prepare) : mesh_->apply(want, v.token, prepare);
  Status save_status = persist ? saved.get() : Status{};
  if (!r) {
    log->error("{}: apply failed: {}", ifname_of(want, cfg), r.error().message);
    if (persist)
      if (Status s = save_state(cfg.state_dir, persisted_); !s)
        log->error("state: writing back the previous mesh after the failed apply: {}", s.error().message);
    return ApiFailure{500, "apply_failed", r.error().message, "", nullptr};
  }
  if (persist) {
    if (!save_status) {
      log->error("state: {}", save_status.error().message);
      return ApiFailure{500, "state_write_failed",
                        "mesh applied but not persisted: " + save_status.error().message, "", nullptr};
    }
    persisted_.mesh = std::move(*v.canonical);  // `want` is moved-from below this line
  }
  const json& now = persisted_.mesh;  // what was wanted, persisted
  // The peer count by reference: value("peers", ...) would copy the list.
  const auto peers = now.find("peers");
  log->info("{}: mesh of cluster {} applied ({} peers, changes: {})", ifname_of(now, cfg),
            now.value("cluster_id", ""), peers != now.end() ? peers->size() : 0,
            r->contains("changes") ? (*r)["changes"].dump() : "{}");
  if (status_body.empty())
    status_body = stable_body_locked(last_inspect_, mesh_summary_locked(now, true, ""));
  publish_locked(std::move(status_body), last_inspect_);
  json out = std::move(*r);
  out["cluster_id"] = now.value("cluster_id", "");
  return out;
}

ApiResult Core::delete_mesh() {
  if (!mesh_) return unavailable("the overlay (overlay/)");
  auto log = fa::logger("mesh");
  const Config cfg = config();
  std::lock_guard lk(op_mu_);
  const json have = persisted_.mesh;
  const std::string ifname = ifname_of(have, cfg);
  if (Status s = mesh_->down(ifname, mesh_netns_locked(have)); !s) {
    log->error("{}: down failed: {}", ifname, s.error().message);
    return ApiFailure{500, "down_failed", s.error().message, "", nullptr};
  }
  if (!have.is_null()) {
    PersistedState next = persisted_;
    next.mesh = nullptr;
    if (Status s = save_state(cfg.state_dir, next); !s)
      return ApiFailure{500, "state_write_failed", "mesh removed but not persisted: " + s.error().message, "", nullptr};
    persisted_ = std::move(next);
    log->info("{}: mesh of cluster {} removed", ifname, have.value("cluster_id", ""));
  }
  publish_locked(stable_body_locked(last_inspect_, mesh_summary_locked(persisted_.mesh, false, "")),
                 last_inspect_);
  return json{{"interface", ifname}, {"removed", !have.is_null()}};
}

json Core::pods() const {
  // Live from the registry (the hooks' own lock, not the operation lock: a
  // GET never queues behind a mesh apply); the snapshot's copy otherwise.
  if (pods_.list) return pods_.list();
  auto s = snapshot();
  json doc = json::parse(s->stable_body, nullptr, false);
  return json{{"pods", doc.is_object() && doc.contains("pods") ? doc["pods"] : json::array()}};
}

std::string Core::metrics_text() {
  const Config cfg = config();
  std::optional<json> live;
  {
    std::lock_guard lk(op_mu_);
    if (mesh_ && !persisted_.mesh.is_null()) {
      auto s = mesh_->show(ifname_of(persisted_.mesh, cfg), mesh_netns_locked(persisted_.mesh));
      if (s) live = std::move(*s);
    }
  }
  auto snap = snapshot();
  MetricsInput in;
  in.inspect = &snap->inspect;
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
