// SPDX-License-Identifier: Apache-2.0
#include "agent/rdma_service.hpp"

#include <chrono>

#include "common/log.hpp"
#include "probes/cli.hpp"
#include "probes/inspect.hpp"
#include "probes/rdma/defaults.hpp"
#include "probes/rdma/probe.hpp"

namespace fa::agent {

using nlohmann::json;

namespace {

ApiFailure invalid(const std::string& field, const std::string& value, const std::string& message) {
  return ApiFailure{422, "validation_failed", field + ": `" + value + "': " + message, field,
                    json::array({{{"field", field}, {"value", value}, {"message", message}}})};
}

std::string shown(const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Every key of the body must be one we read: a typo ("gid_idx") must not
// silently fall back to a default and measure the wrong port.
std::optional<ApiFailure> only_keys(const json& body, std::initializer_list<const char*> keys) {
  if (!body.is_object()) return invalid("", shown(body), "expected a JSON object");
  for (const auto& item : body.items()) {
    const std::string& k = item.key();
    bool known = false;
    std::string accepted;
    for (const char* key : keys) {
      known = known || k == key;
      accepted += (accepted.empty() ? "" : ", ") + std::string(key);
    }
    // Not echoed: a misspelt "key" holds a secret.
    if (!known) return invalid(k, "(not shown)", "unknown key; accepted: " + accepted);
  }
  return std::nullopt;
}

template <class T, class Parse>
std::optional<ApiFailure> read(const json& body, const char* key, Parse parse, std::optional<T>& out) {
  if (!body.contains(key)) return std::nullopt;
  const json& v = body[key];
  std::string text = v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "";
  if (text.empty() && !v.is_string()) return invalid(key, shown(v), "expected a string or a number");
  auto r = parse(text);
  if (!r) return invalid(key, text, r.error().message);
  out = *r;
  return std::nullopt;
}

// The probe key: a secret, so neither the message nor the details echo it.
std::optional<ApiFailure> read_key(const json& body, rdma::Key& out) {
  if (!body.contains("key"))
    return invalid("key", "", "required: the probe key both agents share (hex or base64 of at least 32 random bytes)");
  const json& v = body["key"];
  if (!v.is_string()) return invalid("key", "(not shown)", "expected a string (hex or base64 of at least 32 random bytes)");
  auto k = rdma::Key::parse(v.get_ref<const std::string&>());
  if (!k) return invalid("key", "(not shown)", k.error().message);
  out = std::move(*k);
  return std::nullopt;
}

// hca/gid_index as given; what is missing comes from one discovery pass.
Result<rdma::Target> target(const Config& cfg, std::optional<rdma::HcaPort> hca, std::optional<int> gid) {
  if (hca && gid) return rdma::Target{*hca, *gid};
  probes::InspectOptions io = probes::options_from_config(cfg);
  io.query_sm = false;  // picking a port and a GID does not need the SM
  return rdma::target_from(probes::discover(io), hca, gid);
}

}  // namespace

RdmaService::RdmaService(std::function<Config()> config, std::function<void()> on_scorecard)
    : config_(std::move(config)), on_scorecard_(std::move(on_scorecard)) {}
RdmaService::~RdmaService() {
  if (server_) server_->stop();
}

ApiResult RdmaService::serve_start(const json& body) {
  if (auto f = only_keys(body, {"key", "hca", "gid_index", "port", "bind"})) return *f;
  std::optional<rdma::HcaPort> hca;
  std::optional<int> gid;
  std::optional<int> port;
  if (auto f = read(body, "hca", rdma::parse_hca, hca)) return *f;
  if (auto f = read(body, "gid_index", rdma::parse_gid_index, gid)) return *f;
  auto parse_port = [](const std::string& s) -> Result<int> {
    try {
      size_t used = 0;
      int v = std::stoi(s, &used);
      if (used == s.size() && v >= 0 && v <= 65535) return v;
    } catch (const std::exception&) {
    }
    return Error{"expected a port 0..65535 (0: any free port)"};
  };
  if (auto f = read(body, "port", parse_port, port)) return *f;
  rdma::ServeOptions so;
  if (auto f = read_key(body, so.key)) return *f;
  if (body.contains("bind")) {
    if (!body["bind"].is_string()) return invalid("bind", shown(body["bind"]), "expected an IP address string");
    so.bind = body["bind"];
  }
  std::lock_guard lk(mu_);
  if (server_) return ApiFailure{409, "conflict", "the probe listener already runs on port " + std::to_string(server_->port()) +
                                                      "; DELETE /v1/probes/rdma/serve first", "", nullptr};
  auto t = target(config_(), hca, gid);
  if (!t) return ApiFailure{422, "validation_failed", t.error().message, hca ? "gid_index" : "hca", nullptr};
  so.hca = t->hca;
  so.gid_index = t->gid_index;
  if (port) so.port = static_cast<uint16_t>(*port);
  auto s = rdma::Server::start(so);
  if (!s) return ApiFailure{422, "validation_failed", s.error().message, "hca", nullptr};
  server_ = std::move(*s);
  serving_ = {{"serving", true},
              {"port", server_->port()},
              {"bind", server_->address()},
              {"hca", so.hca.device + ":" + std::to_string(so.hca.port)},
              {"gid_index", so.gid_index}};
  fa::logger("probe")->info("rdma probe listener on {}:{} ({}, GID index {})", server_->address(), server_->port(),
                            serving_["hca"].get<std::string>(), so.gid_index);
  return serving_;
}

ApiResult RdmaService::serve_status() {
  std::lock_guard lk(mu_);
  if (!server_) return json{{"serving", false}};
  json out = serving_;
  auto st = server_->stats();
  out["sessions"] = st.sessions;
  out["failed"] = st.failed;
  out["rejected"] = st.rejected;
  out["authenticated"] = st.authenticated;
  out["registered_bytes"] = st.registered_bytes;
  out["last_peer"] = st.last_peer;
  out["last_reason"] = st.last_reason;
  out["last_message"] = st.last_message;
  return out;
}

ApiResult RdmaService::serve_stop() {
  std::lock_guard lk(mu_);
  bool was = server_ != nullptr;
  if (server_) server_->stop();
  server_.reset();
  return json{{"serving", false}, {"stopped", was}};
}

ApiResult RdmaService::run(const json& body) {
  if (auto f = only_keys(body, {"peer", "key", "hca", "gid_index", "duration_s", "size", "latency_iters", "min_fraction"}))
    return *f;
  if (!body.contains("peer")) return invalid("peer", "", "required: HOST[:PORT] of an agent serving the probe");
  std::optional<rdma::PeerAddr> peer;
  std::optional<rdma::HcaPort> hca;
  std::optional<int> gid;
  std::optional<double> duration;
  std::optional<uint64_t> size;
  if (auto f = read(body, "peer", [](const std::string& s) { return rdma::parse_peer(s); }, peer)) return *f;
  if (auto f = read(body, "hca", rdma::parse_hca, hca)) return *f;
  if (auto f = read(body, "gid_index", rdma::parse_gid_index, gid)) return *f;
  if (auto f = read(body, "duration_s", rdma::parse_duration, duration)) return *f;
  if (auto f = read(body, "size", rdma::parse_size, size)) return *f;
  rdma::ProbeOptions po;
  if (auto f = read_key(body, po.key)) return *f;
  if (body.contains("latency_iters")) {
    const json& v = body["latency_iters"];
    if (!v.is_number_integer() || v.get<long>() < 1 || v.get<long>() > 1000000)
      return invalid("latency_iters", shown(v), "expected an integer 1..1000000");
    po.latency_iters = static_cast<uint32_t>(v.get<long>());
  }
  if (body.contains("min_fraction")) {
    const json& v = body["min_fraction"];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
      return invalid("min_fraction", shown(v), "expected a number 0..1");
    po.min_fraction = v.get<double>();
  }
  auto t = target(config_(), hca, gid);
  if (!t) return ApiFailure{422, "validation_failed", t.error().message, hca ? "gid_index" : "hca", nullptr};
  po.peer = *peer;
  po.hca = t->hca;
  po.gid_index = t->gid_index;
  if (duration) po.duration_s = *duration;
  if (size) po.size = *size;
  auto r = rdma::run_probe(po);
  if (!r) return invalid("", "", r.error().message);
  // A probe that ran and failed is still an answer: 200 with status "failed"
  // and the classified reason, as the CLI prints it. Either way it is this
  // rail's last result against that peer.
  json out = rdma::to_json(*r);
  long long now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  {
    std::lock_guard lk(sc_mu_);
    Status s = scorecard_locked().record(
        scorecard_entry(po.peer.host, po.hca.device + ":" + std::to_string(po.hca.port), out, now));
    if (!s) fa::logger("probe")->warn("scorecard: {} (the result is kept until the agent stops)", s.error().message);
  }
  if (on_scorecard_) on_scorecard_();
  return out;
}

Scorecard& RdmaService::scorecard_locked() {
  if (!scorecard_) {
    const std::string dir = config_().state_dir;
    scorecard_ = std::make_unique<Scorecard>(dir.empty() ? std::string() : dir + "/scorecard.json");
    if (Status s = scorecard_->load(); !s) fa::logger("probe")->warn("{}", s.error().message);
  }
  return *scorecard_;
}

json RdmaService::scorecard() {
  std::lock_guard lk(sc_mu_);
  return scorecard_locked().to_json();
}

}  // namespace fa::agent
