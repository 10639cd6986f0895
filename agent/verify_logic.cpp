// SPDX-License-Identifier: Apache-2.0
#include "agent/verify_logic.hpp"

#include <algorithm>
#include <cstdio>

namespace fa::agent::verify {

using nlohmann::json;

std::vector<std::vector<Pair>> round_robin(int n) {
  std::vector<std::vector<Pair>> rounds;
  if (n < 2) return rounds;
  const int m = n % 2 == 0 ? n : n + 1;  // slot m-1 is the bye when n is odd
  std::vector<int> at(m);
  for (int i = 0; i < m; ++i) at[i] = i;
  for (int r = 0; r < m - 1; ++r) {
    std::vector<Pair> round;
    for (int i = 0; i < m / 2; ++i) {
      int a = at[i], b = at[m - 1 - i];
      if (a >= n || b >= n) continue;
      // Machine 0 would always run: alternate which end of its pair serves.
      if (i == 0 && r % 2 == 1) std::swap(a, b);
      round.emplace_back(a, b);
    }
    rounds.push_back(std::move(round));
    std::rotate(at.begin() + 1, at.end() - 1, at.end());
  }
  return rounds;
}

std::vector<Rail> rails_of(const json& inspect) {
  std::vector<Rail> out;
  if (!inspect.is_object() || !inspect.contains("fabric") || !inspect["fabric"].is_object()) return out;
  const json& ports = inspect["fabric"].value("ports", json::array());
  if (!ports.is_array()) return out;
  for (const auto& p : ports) {
    if (!p.is_string()) continue;
    Rail r;
    r.hca = p.get<std::string>();
    auto colon = r.hca.rfind(':');
    std::string dev = r.hca.substr(0, colon);
    int port = 1;
    if (colon != std::string::npos) port = std::atoi(r.hca.c_str() + colon + 1);
    for (const auto& h : inspect.value("hcas", json::array())) {
      if (!h.is_object() || h.value("name", "") != dev) continue;
      for (const auto& hp : h.value("ports", json::array()))
        if (hp.is_object() && hp.value("port", 0) == port && hp.contains("rate_gbps") && hp["rate_gbps"].is_number())
          r.rate_gbps = hp["rate_gbps"].get<double>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<int> gid_index_of(const json& inspect) {
  if (!inspect.is_object()) return std::nullopt;
  const json& env = inspect.value("nccl_env", json::object());
  if (env.is_object() && env.contains("NCCL_IB_GID_INDEX")) {
    const json& g = env["NCCL_IB_GID_INDEX"];
    if (g.is_number_integer()) return g.get<int>();
    if (g.is_string()) {
      const std::string& s = g.get_ref<const std::string&>();
      if (!s.empty() && s.size() <= 3 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return std::stoi(s);
    }
  }
  const json& f = inspect.value("fabric", json::object());
  if (f.is_object() && f.value("kind", "") == "infiniband") return 0;
  return std::nullopt;
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kDegraded: return "degraded";
    case Status::kFailed: return "failed";
  }
  return "failed";
}

namespace {
std::string gbps_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
}  // namespace

Judged judge(const json& probe, double rate_a_gbps, double rate_b_gbps, double min_fraction) {
  Judged j;
  const bool known = rate_a_gbps > 0 && rate_b_gbps > 0;
  const double slower = known ? std::min(rate_a_gbps, rate_b_gbps) : 0;
  j.pass_gbps = min_fraction * slower;
  if (!probe.is_object() || probe.value("status", "") == "failed" || !probe.contains("gbps") || !probe["gbps"].is_number()) {
    j.status = Status::kFailed;
    j.reason = probe.is_object() && probe.contains("reason") && probe["reason"].is_string() ? probe["reason"].get<std::string>()
                                                                                          : "protocol_error";
    j.message = probe.is_object() ? probe.value("message", "") : "";
    if (j.message.empty() && j.reason == "protocol_error") j.message = "the run answer holds no result";
    return j;
  }
  const double gbps = probe["gbps"].get<double>();
  if (!known) {
    j.status = Status::kDegraded;
    j.reason = "port_rate_unknown";
    j.message = "the kernel reports no rate for " + std::string(rate_a_gbps > 0 ? "the serving" : "the running") +
                " end's port: no pass line";
    return j;
  }
  if (gbps < j.pass_gbps) {
    j.status = Status::kDegraded;
    j.reason = "below_rate";
    j.message = gbps_text(gbps) + " Gb/s < " + gbps_text(min_fraction) + " x " + gbps_text(slower) +
                " Gb/s (the slower port)";
    return j;
  }
  j.status = Status::kOk;
  return j;
}

double runner_fraction(double rate_runner_gbps, double rate_server_gbps, double min_fraction) {
  if (rate_runner_gbps <= 0 || rate_server_gbps <= 0) return min_fraction;
  return min_fraction * std::min(rate_runner_gbps, rate_server_gbps) / rate_runner_gbps;
}

int pick_reference(const PassMatrix& passed, int a, int b) {
  int best = -1, best_passes = 0;
  for (int g = 0; g < static_cast<int>(passed.size()); ++g) {
    if (g == a || g == b) continue;
    int passes = 0;
    for (const auto& v : passed[g]) passes += v.value_or(false) ? 1 : 0;
    if (passes > best_passes) best = g, best_passes = passes;
  }
  return best;
}

const char* blame_name(Blame b) {
  switch (b) {
    case Blame::kFirst: return "first";
    case Blame::kSecond: return "second";
    case Blame::kBoth: return "both";
    case Blame::kPath: return "path";
    case Blame::kUndetermined: return "undetermined";
  }
  return "undetermined";
}

Blame blame(std::optional<bool> a_with_reference, std::optional<bool> b_with_reference) {
  if (!a_with_reference || !b_with_reference) return Blame::kUndetermined;
  if (*a_with_reference && *b_with_reference) return Blame::kPath;
  if (!*a_with_reference && !*b_with_reference) return Blame::kBoth;
  return *a_with_reference ? Blame::kSecond : Blame::kFirst;
}

std::vector<int> closed_overlay_ports(int n, const std::function<bool(int, int)>& reachable, const std::vector<bool>& up) {
  std::vector<int> out;
  for (int m = 0; m < n; ++m) {
    if (m < static_cast<int>(up.size()) && !up[m]) {
      out.push_back(m);
      continue;
    }
    bool any_with_m = false, any_without_m = false;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) {
        if (!reachable(i, j)) continue;
        (i == m || j == m ? any_with_m : any_without_m) = true;
      }
    if (!any_with_m && any_without_m) out.push_back(m);
  }
  return out;
}

}  // namespace fa::agent::verify
