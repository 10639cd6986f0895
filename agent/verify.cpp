// SPDX-License-Identifier: Apache-2.0
// `fabric-agent cluster verify`: the reference flow that measures a set of
// machines before they are listed together, through the same agent API
// calls a control plane makes:
//   1. GET /v1/status from every agent; refuse a mixed set (as form does);
//   2. the overlay: every pair reports a recent WireGuard handshake both ways
//      (GET /v1/mesh), and a machine its peers cannot reach is named;
//   3. round-robin rounds (each machine in at most one pair a round, the
//      pairs of a round at the same time); per pair, every rail NCCL will use,
//      rail k to rail k: POST serve on one end with a fresh key, POST run from
//      the other, DELETE serve;
//   4. each rail judged against the slower port's kernel rate;
//   5. each end of a failing pair re-measured against a machine that passed,
//      to name the bad end (machine and rail);
//   6. the matrix for a person, the whole result as JSON; exit 0 when all pass.
// The decisions are pure functions in verify_logic.hpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <tuple>

#include "agent/auth.hpp"
#include "agent/client.hpp"
#include "agent/cluster.hpp"
#include "agent/verify_logic.hpp"
#include "common/cli.hpp"
#include "common/fs.hpp"
#include "common/json.hpp"
#include "common/random.hpp"

namespace fa::agent {

using nlohmann::json;
namespace v = verify;

namespace {

constexpr const char* kCmd = "fabric-agent cluster verify";

struct Machine {
  std::string name;  // "n0", for the matrix
  Url url;
  json status;
  std::vector<v::Rail> rails;
  std::optional<int> gid_index;
  std::string public_key;
  int listen_port = 51820;
};

struct Settings {
  double min_fraction = 0.9;
  double duration_s = 5;
  long latency_iters = 1000;
  std::string size = "65536";
  int probe_port = 18520;
  ClientOptions http;
};

// One rail of one pair, measured: `runner` ran the probe against `server`.
struct Measurement {
  int runner = -1, server = -1, rail = -1, round = -1;  // round -1: a re-measurement
  json probe;           // the run answer, or {status: failed, reason, message} made here
  json runner_end, server_end;  // {machine, hca, port, gid_index}
  v::Judged judged;
  double seconds = 0;  // wall time of serve + run + stop
};

std::mutex print_mu;
void progress(const std::string& line) {
  std::lock_guard lk(print_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

json failed(const std::string& reason, const std::string& message) {
  return {{"status", "failed"}, {"reason", reason}, {"message", message}, {"gbps", nullptr}, {"latency_us", nullptr}};
}

std::string fmt_num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

// The peer address of a serve answer: its bind address and port.
std::string peer_of(const json& serve) {
  std::string host = serve.value("bind", "");
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(serve.value("port", 0));
}

Measurement measure(const std::vector<Machine>& ms, int runner, int server, int rail, const Settings& s) {
  Measurement m;
  m.runner = runner;
  m.server = server;
  m.rail = rail;
  const Machine& R = ms[runner];
  const Machine& S = ms[server];
  m.runner_end = {{"machine", R.name}, {"hca", nullptr}, {"gid_index", R.gid_index ? json(*R.gid_index) : json(nullptr)}};
  m.server_end = {{"machine", S.name}, {"hca", nullptr}, {"gid_index", S.gid_index ? json(*S.gid_index) : json(nullptr)}};
  auto t0 = std::chrono::steady_clock::now();
  auto done = [&](json probe) {
    m.probe = std::move(probe);
    const double rr = rail < static_cast<int>(R.rails.size()) ? R.rails[rail].rate_gbps : 0;
    const double rs = rail < static_cast<int>(S.rails.size()) ? S.rails[rail].rate_gbps : 0;
    m.judged = v::judge(m.probe, rr, rs, s.min_fraction);
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return m;
  };
  // Rail k to rail k: a machine without a rail k is the bad end by its own
  // report (its kernel lists fewer ACTIVE fabric ports).
  for (const Machine* x : {&R, &S})
    if (rail >= static_cast<int>(x->rails.size()))
      return done(failed("no_port", x->name + " has no rail " + std::to_string(rail) + ": its fabric lists " +
                                        std::to_string(x->rails.size()) + " ACTIVE port(s)"));
  m.runner_end["hca"] = R.rails[rail].hca;
  m.server_end["hca"] = S.rails[rail].hca;
  auto key = random_hex(32);  // one per pair and rail; never printed
  if (!key) return done(failed("agent_error", "no random key: " + key.error().message));
  json serve = {{"key", *key}, {"hca", S.rails[rail].hca}, {"port", s.probe_port}};
  if (S.gid_index) serve["gid_index"] = *S.gid_index;
  auto sr = http_request(S.url, "POST", "/v1/probes/rdma/serve", serve.dump(), s.http);
  if (!sr) return done(failed("agent_error", S.name + ": POST /v1/probes/rdma/serve: " + sr.error().message));
  if (sr->status != 200)
    return done(failed("serve_failed", S.name + ": POST /v1/probes/rdma/serve answered " + std::to_string(sr->status) + ": " +
                                           error_message(*sr)));
  json served = fa::parse_json(sr->body);
  if (served.is_object()) {
    m.server_end["hca"] = served.value("hca", S.rails[rail].hca);
    if (served.contains("gid_index")) m.server_end["gid_index"] = served["gid_index"];
  }
  const double rr = R.rails[rail].rate_gbps, rs = S.rails[rail].rate_gbps;
  json run = {{"peer", peer_of(served)},
              {"key", *key},
              {"hca", R.rails[rail].hca},
              {"duration_s", s.duration_s},
              {"latency_iters", s.latency_iters},
              {"size", s.size},
              {"min_fraction", v::runner_fraction(rr, rs, s.min_fraction)}};
  if (R.gid_index) run["gid_index"] = *R.gid_index;
  ClientOptions long_call = s.http;
  // The probe's own bounds (docs/probe.md): duration + latency + handshake and idle timeouts.
  long_call.timeout = std::chrono::milliseconds(static_cast<long long>((s.duration_s + 60) * 1000 + s.latency_iters));
  auto rr_ = http_request(R.url, "POST", "/v1/probes/rdma/run", run.dump(), long_call);
  json probe;
  if (!rr_) probe = failed("agent_error", R.name + ": POST /v1/probes/rdma/run: " + rr_.error().message);
  else if (rr_->status != 200)
    probe = failed("agent_error", R.name + ": POST /v1/probes/rdma/run answered " + std::to_string(rr_->status) + ": " +
                                      error_message(*rr_));
  else probe = fa::parse_json(rr_->body);
  if (probe.is_object()) {
    if (probe.contains("gid_index") && probe["gid_index"].is_number()) m.runner_end["gid_index"] = probe["gid_index"];
    if (probe.contains("hca") && probe["hca"].is_string() && !probe["hca"].get<std::string>().empty())
      m.runner_end["hca"] = probe["hca"].get<std::string>() + ":" + std::to_string(probe.value("port", 1));
  }
  auto dr = http_request(S.url, "DELETE", "/v1/probes/rdma/serve", "", s.http);
  if (!dr || dr->status != 200)
    progress("warning: " + S.name + ": DELETE /v1/probes/rdma/serve failed: " +
                         (dr ? error_message(*dr) : dr.error().message) + " (its listener may still run)");
  return done(std::move(probe));
}

std::string line_of(const Measurement& m, const std::vector<Machine>& ms) {
  // (An end without that rail has a null hca.)
  auto hca = [](const json& e) { return e["hca"].is_string() ? e["hca"].get<std::string>() : std::string("-"); };
  std::string out = ms[m.runner].name + " " + hca(m.runner_end) + " -> " + ms[m.server].name + " " + hca(m.server_end) +
                    " (rail " + std::to_string(m.rail) + "): ";
  if (m.judged.status == v::Status::kFailed)
    return out + "failed: " + m.judged.reason + (m.judged.message.empty() ? "" : ": " + m.judged.message);
  const json& l = m.probe.value("latency_us", json(nullptr));
  out += fmt_num(m.probe.value("gbps", 0.0)) + " Gb/s";
  if (l.is_object())
    out += ", latency p50/p90/p99/max " + fmt_num(l.value("p50", 0.0)) + "/" + fmt_num(l.value("p90", 0.0)) + "/" +
           fmt_num(l.value("p99", 0.0)) + "/" + fmt_num(l.value("max", 0.0)) + " us";
  auto gid = [](const json& e) { return e["gid_index"].is_number() ? std::to_string(e["gid_index"].get<int>()) : "-"; };
  out += ", GID " + gid(m.runner_end) + "/" + gid(m.server_end);
  out += std::string(": ") + v::status_name(m.judged.status);
  if (m.judged.status != v::Status::kOk) out += ": " + m.judged.reason + (m.judged.message.empty() ? "" : ": " + m.judged.message);
  return out;
}

json to_json(const Measurement& m) {
  return {{"runner", m.runner_end},
          {"server", m.server_end},
          {"rail", m.rail},
          {"round", m.round < 0 ? json(nullptr) : json(m.round + 1)},
          {"status", v::status_name(m.judged.status)},
          {"reason", m.judged.reason.empty() ? json(nullptr) : json(m.judged.reason)},
          {"message", m.judged.message},
          {"gbps", m.probe.is_object() && m.probe.contains("gbps") ? m.probe["gbps"] : json(nullptr)},
          {"pass_gbps", m.judged.pass_gbps},
          {"latency_us", m.probe.is_object() && m.probe.contains("latency_us") ? m.probe["latency_us"] : json(nullptr)},
          {"seconds", m.seconds}};
}

// The overlay check: every pair reports a recent handshake both ways.
struct Overlay {
  bool checked = false;
  std::vector<std::vector<bool>> reachable;
  std::vector<bool> up;
  std::vector<int> closed;
  std::vector<std::string> problems;
  bool ok() const {
    if (!checked) return true;
    for (size_t i = 0; i < reachable.size(); ++i)
      for (size_t j = i + 1; j < reachable.size(); ++j)
        if (!reachable[i][j]) return false;
    return true;
  }
};

Overlay check_overlay(const std::vector<Machine>& ms, const Settings& s) {
  Overlay o;
  o.checked = true;
  const int n = static_cast<int>(ms.size());
  o.up.assign(n, false);
  o.reachable.assign(n, std::vector<bool>(n, false));
  std::vector<std::map<std::string, long long>> seen(n);
  const long long now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (int i = 0; i < n; ++i) {
    auto r = http_request(ms[i].url, "GET", "/v1/mesh", "", s.http);
    if (!r || r->status != 200) {
      o.problems.push_back(ms[i].name + ": GET /v1/mesh failed: " + (r ? error_message(*r) : r.error().message));
      continue;
    }
    json d = fa::parse_json(r->body);
    json live = d.is_object() && d.contains("live") ? d["live"] : json(nullptr);
    if (!d.is_object() || !d.contains("desired") || d["desired"].is_null()) {
      o.problems.push_back(ms[i].name + ": no mesh (run `fabric-agent cluster form` first, or pass --no-overlay)");
      continue;
    }
    if (!live.is_object()) {
      o.problems.push_back(ms[i].name + ": its WireGuard interface is not up" +
                           (d.value("live_error", json(nullptr)).is_string() ? ": " + d["live_error"].get<std::string>() : ""));
      continue;
    }
    o.up[i] = true;
    for (const auto& p : live.value("peers", json::array()))
      if (p.is_object() && p.contains("public_key") && p["public_key"].is_string())
        seen[i][p["public_key"].get<std::string>()] =
            p.contains("last_handshake_unix") && p["last_handshake_unix"].is_number() ? p["last_handshake_unix"].get<long long>() : 0;
  }
  // "Recent": WireGuard re-handshakes every 2 minutes on a live tunnel.
  auto recent = [&](int i, int j) {
    auto it = seen[i].find(ms[j].public_key);
    return it != seen[i].end() && it->second > 0 && now - it->second <= 180;
  };
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) o.reachable[i][j] = i != j && recent(i, j) && recent(j, i);
  o.closed = v::closed_overlay_ports(n, [&](int i, int j) { return o.reachable[i][j]; }, o.up);
  return o;
}

int usage_error(const std::string& m) {
  std::fprintf(stderr, "%s: %s\n", kCmd, m.c_str());
  return 2;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

}  // namespace

int cmd_cluster_verify(const std::vector<std::string>& argv_in) {
  std::vector<std::string> agents, rest;
  split_agents(argv_in, 0, agents, rest);
  auto args = Args::parse(rest, {{"token-file", true},
                                 {"min-fraction", true},
                                 {"json", true},
                                 {"duration", true},
                                 {"latency-iters", true},
                                 {"size", true},
                                 {"probe-port", true},
                                 {"no-overlay", false},
                                 {"ca-file", true},
                                 {"cert", true},
                                 {"key", true}});
  if (!args) return usage_error(args.error().message);
  if (agents.size() < 2) return usage_error("give at least two --agent URL");
  auto token_file = args->get("token-file");
  if (!token_file) return usage_error("--token-file F is required");
  Settings s;
  auto number = [&](const char* flag, double lo, double hi, double& out) -> bool {
    auto v = args->get(flag);
    if (!v) return true;
    try {
      size_t used = 0;
      double x = std::stod(*v, &used);
      if (used == v->size() && x >= lo && x <= hi) {
        out = x;
        return true;
      }
    } catch (const std::exception&) {
    }
    std::fprintf(stderr, "%s: --%s '%s' is not accepted; accepted: a number %g..%g\n", kCmd, flag, v->c_str(), lo, hi);
    return false;
  };
  double iters = static_cast<double>(s.latency_iters), port = s.probe_port;
  if (!number("min-fraction", 0, 1, s.min_fraction) || !number("duration", 0.1, 3600, s.duration_s) ||
      !number("latency-iters", 1, 1000000, iters) || !number("probe-port", 1, 65535, port))
    return 2;
  s.latency_iters = static_cast<long>(iters);
  s.probe_port = static_cast<int>(port);
  s.size = args->get_or("size", "65536");
  auto secret = read_token_secret(*token_file);
  if (!secret) {
    std::fprintf(stderr, "%s: %s\n", kCmd, secret.error().message.c_str());
    return 1;
  }
  s.http.token = *secret;
  s.http.ca_file = args->get_or("ca-file", "");
  s.http.cert_file = args->get_or("cert", "");
  s.http.key_file = args->get_or("key", "");
  const auto t_start = std::chrono::steady_clock::now();

  // 1. Status of every agent; one fabric, one GPU shape.
  std::vector<Machine> ms;
  for (const auto& a : agents) {
    auto u = parse_url(a);
    if (!u) return usage_error(u.error().message);
    auto r = http_request(*u, "GET", "/v1/status", "", s.http);
    if (!r) {
      std::fprintf(stderr, "%s: %s\n", kCmd, r.error().message.c_str());
      return 1;
    }
    if (r->status != 200) {
      std::fprintf(stderr, "%s: %s: GET /v1/status answered %d: %s\n", kCmd, u->base.c_str(), r->status,
                   error_message(*r).c_str());
      return 1;
    }
    Machine m;
    m.name = "n" + std::to_string(ms.size());
    m.url = *u;
    m.status = fa::parse_json(r->body);
    if (!m.status.is_object()) {
      std::fprintf(stderr, "%s: %s: status is not a JSON object\n", kCmd, u->base.c_str());
      return 1;
    }
    const json& in = m.status.contains("inspect") ? m.status["inspect"] : json(nullptr);
    m.rails = v::rails_of(in);
    m.gid_index = v::gid_index_of(in);
    const json& mesh = m.status.value("mesh", json::object());
    if (mesh.is_object()) {
      if (mesh.contains("public_key") && mesh["public_key"].is_string()) m.public_key = mesh["public_key"];
      m.listen_port = mesh.value("listen_port", 51820);
    }
    ms.push_back(std::move(m));
  }
  const int n = static_cast<int>(ms.size());
  std::vector<std::string> fabric, gpus;
  for (const auto& m : ms) fabric.push_back(fabric_id_of(m.status)), gpus.push_back(gpu_shape_of(m.status));
  for (int i = 0; i < static_cast<int>(ms.size()); ++i)
    if (fabric[i] == "(unknown)") {
      std::fprintf(stderr, "%s: refused: the fabric of %s has no id (see its `fabric-agent inspect`)\n", kCmd,
                   ms[i].url.base.c_str());
      return 1;
    }
  if (int i = odd_one(fabric); i >= 0) {
    std::fprintf(stderr, "%s: refused: %s is on fabric %s, the others on %s\n", kCmd, ms[i].url.base.c_str(),
                 fabric[i].c_str(), fabric[i == 0 ? 1 : 0].c_str());
    return 1;
  }
  if (int i = odd_one(gpus); i >= 0) {
    std::fprintf(stderr, "%s: refused: %s has GPUs %s, the others %s\n", kCmd, ms[i].url.base.c_str(), gpus[i].c_str(),
                 gpus[i == 0 ? 1 : 0].c_str());
    return 1;
  }
  if (fabric[0] == "(none)") {
    std::fprintf(stderr, "%s: no agent reports an RDMA fabric: nothing to measure\n", kCmd);
    return 1;
  }
  size_t nrails = 0;
  for (const auto& m : ms) nrails = std::max(nrails, m.rails.size());
  for (const auto& m : ms) {
    std::string rails;
    for (const auto& r : m.rails) rails += " " + r.hca + " (" + fmt_num(r.rate_gbps) + " Gb/s)";
    std::fprintf(stderr, "%s  %s  GID index %s, rails:%s\n", m.name.c_str(), m.url.base.c_str(),
                 m.gid_index ? std::to_string(*m.gid_index).c_str() : "(agent's default)", rails.empty() ? " none" : rails.c_str());
  }

  // 2. The overlay port, pair by pair.
  Overlay ov;
  if (!args->has("no-overlay")) {
    ov = check_overlay(ms, s);
    for (const auto& p : ov.problems) std::fprintf(stderr, "overlay: %s\n", p.c_str());
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (!ov.reachable[i][j] && ov.up[i] && ov.up[j])
          std::fprintf(stderr, "overlay: %s <-> %s: no recent WireGuard handshake both ways\n", ms[i].name.c_str(),
                       ms[j].name.c_str());
    for (int c : ov.closed)
      std::fprintf(stderr, "overlay: %s (%s): UDP %d not reachable from its peers\n", ms[c].name.c_str(),
                   ms[c].url.base.c_str(), ms[c].listen_port);
    if (ov.ok()) std::fprintf(stderr, "overlay: every pair has a recent WireGuard handshake both ways\n");
  }

  // 3. Rounds: the pairs of a round at once, the rails of a pair one after
  // the other (an agent runs one probe at a time).
  auto rounds = v::round_robin(n);
  std::fprintf(stderr, "verify: %d machines, %zu rounds, %zu rail(s), %g s per probe, pass line %g x the slower port\n", n,
               rounds.size(), nrails, s.duration_s, s.min_fraction);
  std::vector<Measurement> results;
  const auto t_measure = std::chrono::steady_clock::now();
  for (size_t r = 0; r < rounds.size(); ++r) {
    std::vector<std::vector<Measurement>> out(rounds[r].size());
    std::vector<std::thread> threads;
    for (size_t p = 0; p < rounds[r].size(); ++p)
      threads.emplace_back([&, r, p] {
        auto [a, b] = rounds[r][p];
        for (size_t k = 0; k < nrails; ++k) {
          Measurement m = measure(ms, a, b, static_cast<int>(k), s);
          m.round = static_cast<int>(r);
          progress("[round " + std::to_string(r + 1) + "/" + std::to_string(rounds.size()) + "] " + line_of(m, ms));
          out[p].push_back(std::move(m));
        }
      });
    for (auto& t : threads) t.join();
    for (auto& o : out)
      for (auto& m : o) results.push_back(std::move(m));
  }
  const double measure_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_measure).count();

  // 4./5. The bad end of each failing pair, from re-measuring both ends
  // against a machine that passed on that rail.
  std::vector<v::PassMatrix> passed(nrails, v::PassMatrix(n, std::vector<std::optional<bool>>(n)));
  for (const auto& m : results) passed[m.rail][m.runner][m.server] = passed[m.rail][m.server][m.runner] = m.judged.status == v::Status::kOk;
  std::map<std::tuple<int, int, int>, Measurement> again;  // (machine, reference, rail)
  json bad_ends = json::array(), verdicts = json::array();
  std::map<std::pair<int, int>, std::string> named;  // (machine, rail) -> why
  for (const auto& m : results) {
    if (m.judged.status == v::Status::kOk) continue;
    const int a = m.runner, b = m.server, k = m.rail;
    json verdict = {{"runner", ms[a].name}, {"server", ms[b].name}, {"rail", k}, {"reference", nullptr}};
    std::vector<int> bad;
    if (m.judged.reason == "no_port") {
      for (int x : {a, b})
        if (k >= static_cast<int>(ms[x].rails.size())) bad.push_back(x);
      verdict["blame"] = bad.size() == 2 ? "both" : bad[0] == a ? "first" : "second";
      verdict["evidence"] = m.judged.message;
    } else {
      const int g = v::pick_reference(passed[k], a, b);
      std::optional<bool> with[2];
      if (g >= 0) {
        verdict["reference"] = ms[g].name;
        int i = 0;
        for (int x : {a, b}) {
          auto key = std::make_tuple(x, g, k);
          if (!again.count(key)) {
            progress("re-measuring " + ms[x].name + " rail " + std::to_string(k) + " against " + ms[g].name +
                                 " (passed on that rail)");
            Measurement r = measure(ms, x, g, k, s);
            progress("[again] " + line_of(r, ms));
            again.emplace(key, std::move(r));
          }
          with[i++] = again.at(key).judged.status == v::Status::kOk;
        }
      }
      v::Blame bl = v::blame(with[0], with[1]);
      verdict["blame"] = v::blame_name(bl);
      if (bl == v::Blame::kFirst || bl == v::Blame::kBoth) bad.push_back(a);
      if (bl == v::Blame::kSecond || bl == v::Blame::kBoth) bad.push_back(b);
      verdict["evidence"] = g < 0 ? std::string("no machine passed on this rail to compare with")
                                  : ms[a].name + (*with[0] ? " passes" : " fails") + " with " + ms[g].name + ", " +
                                        ms[b].name + (*with[1] ? " passes" : " fails") + " with " + ms[g].name;
    }
    for (int x : bad) {
      std::string why = m.judged.reason + " (" + verdict["evidence"].get<std::string>() + ")";
      if (named.emplace(std::make_pair(x, k), why).second)
        bad_ends.push_back({{"machine", ms[x].name},
                            {"agent", ms[x].url.base},
                            {"rail", k},
                            {"hca", k < static_cast<int>(ms[x].rails.size()) ? json(ms[x].rails[k].hca) : json(nullptr)},
                            {"reason", m.judged.reason},
                            {"evidence", verdict["evidence"]}});
    }
    verdicts.push_back(std::move(verdict));
  }

  // 6. The matrix, the details, the verdict.
  const bool all_ok = ov.ok() && std::all_of(results.begin(), results.end(),
                                             [](const Measurement& m) { return m.judged.status == v::Status::kOk; });
  const std::string json_path = args->get_or("json", "");
  FILE* out = json_path == "-" ? stderr : stdout;
  for (size_t k = 0; k < nrails; ++k) {
    std::fprintf(out, "rail %zu: Gb/s between two machines (each pair measured once); ok, LOW below %g x the slower port, FAIL\n",
                 k, s.min_fraction);
    std::string head = pad("", 6);
    for (const auto& m : ms) head += pad(m.name, 13);
    std::fprintf(out, "%s\n", head.c_str());
    for (int i = 0; i < n; ++i) {
      std::string row = pad(ms[i].name, 6);
      for (int j = 0; j < n; ++j) {
        const Measurement* hit = nullptr;
        for (const auto& m : results)
          if (static_cast<size_t>(m.rail) == k && ((m.runner == i && m.server == j) || (m.runner == j && m.server == i)))
            hit = &m;
        std::string cell = i == j ? "-" : hit ? "" : ".";
        if (hit) {
          if (hit->judged.status == v::Status::kFailed) cell = "FAIL";
          else cell = fmt_num(hit->probe.value("gbps", 0.0)) + (hit->judged.status == v::Status::kOk ? " ok" : " LOW");
        }
        row += pad(cell, 13);
      }
      std::fprintf(out, "%s\n", row.c_str());
    }
  }
  for (const auto& m : results) std::fprintf(out, "  %s\n", line_of(m, ms).c_str());
  for (const auto& b : bad_ends)
    std::fprintf(out, "bad end: %s (%s) rail %d %s: %s (%s)\n", b["machine"].get<std::string>().c_str(),
                 b["agent"].get<std::string>().c_str(), b["rail"].get<int>(),
                 b["hca"].is_string() ? b["hca"].get<std::string>().c_str() : "(none)", b["reason"].get<std::string>().c_str(),
                 b["evidence"].get<std::string>().c_str());
  for (const auto& vd : verdicts)
    if (vd["blame"] == "path" || vd["blame"] == "undetermined")
      std::fprintf(out, "pair %s-%s rail %d: %s (%s)\n", vd["runner"].get<std::string>().c_str(),
                   vd["server"].get<std::string>().c_str(), vd["rail"].get<int>(),
                   vd["blame"] == "path" ? "both ends pass with another machine: the path between them" : "bad end not known",
                   vd["evidence"].get<std::string>().c_str());
  for (int c : ov.closed)
    std::fprintf(out, "closed overlay port: %s (%s) UDP %d\n", ms[c].name.c_str(), ms[c].url.base.c_str(), ms[c].listen_port);
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::fprintf(out, "verify: %s: %d machines, %zu pair(s) x %zu rail(s) in %zu round(s), %.1f s (measuring %.1f s)\n",
               all_ok ? "PASS" : "FAIL", n, static_cast<size_t>(n) * (n - 1) / 2, nrails, rounds.size(), total, measure_seconds);

  json doc = {{"passed", all_ok},
              {"min_fraction", s.min_fraction},
              {"duration_s", s.duration_s},
              {"machines", json::array()},
              {"rounds", json::array()},
              {"results", json::array()},
              {"remeasured", json::array()},
              {"verdicts", verdicts},
              {"bad_ends", bad_ends},
              {"seconds", total},
              {"measure_seconds", measure_seconds}};
  for (const auto& m : ms) {
    json rails = json::array();
    for (const auto& r : m.rails) rails.push_back({{"hca", r.hca}, {"rate_gbps", r.rate_gbps}});
    doc["machines"].push_back({{"name", m.name},
                               {"agent", m.url.base},
                               {"gid_index", m.gid_index ? json(*m.gid_index) : json(nullptr)},
                               {"rails", rails}});
  }
  for (const auto& r : rounds) {
    json round = json::array();
    for (auto [a, b] : r) round.push_back({ms[a].name, ms[b].name});
    doc["rounds"].push_back(round);
  }
  for (const auto& m : results) doc["results"].push_back(to_json(m));
  for (const auto& [k, m] : again) doc["remeasured"].push_back(to_json(m));
  if (ov.checked) {
    json pairs = json::array(), closed = json::array();
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) pairs.push_back({{"a", ms[i].name}, {"b", ms[j].name}, {"reachable", bool(ov.reachable[i][j])}});
    for (int c : ov.closed) closed.push_back({{"machine", ms[c].name}, {"agent", ms[c].url.base}, {"udp_port", ms[c].listen_port}});
    doc["overlay"] = {{"ok", ov.ok()}, {"pairs", pairs}, {"closed", closed}, {"problems", ov.problems}};
  } else {
    doc["overlay"] = nullptr;
  }
  if (json_path == "-") {
    std::printf("%s\n", doc.dump(2).c_str());
  } else if (!json_path.empty()) {
    if (Status w = write_file_atomic(json_path, doc.dump(2) + "\n", 0644); !w) {
      std::fprintf(stderr, "%s: --json %s: %s\n", kCmd, json_path.c_str(), w.error().message.c_str());
      return 1;
    }
  }
  return all_ok ? 0 : 1;
}

}  // namespace fa::agent
