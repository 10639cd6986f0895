// SPDX-License-Identifier: Apache-2.0
#include "agent/metrics.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <set>

namespace fa::agent {

namespace {

// Shortest text that reads back as the same double (0.00025, not
// 0.00025000000000000001): fmt's Dragonbox. Not std::to_chars, whose
// libstdc++ implementation makes the binary load libm at every start (for
// fegetround/fesetround). Non-finite values as the text format spells them.
std::string num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string num(uint64_t v) { return std::to_string(v); }

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// Sysfs counter names become label values, not metric names: the set differs
// per driver and a label keeps the family list fixed.
uint64_t as_u64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return 0;
}

int port_state_value(const std::string& s) {
  // ib_port_state numbering as the kernel writes it in ports/N/state ("4: ACTIVE").
  if (s == "DOWN") return 1;
  if (s == "INIT") return 2;
  if (s == "ARMED") return 3;
  if (s == "ACTIVE") return 4;
  if (s == "ACTIVE_DEFER") return 5;
  return 0;
}

}  // namespace

std::string escape_label(const std::string& v) {
  std::string o;
  o.reserve(v.size());
  for (char c : v) {
    if (c == '\\') o += "\\\\";
    else if (c == '"') o += "\\\"";
    else if (c == '\n') o += "\\n";
    else o += c;
  }
  return o;
}

void ApiMetrics::observe(const std::string& route, int status, std::chrono::nanoseconds latency) {
  double s = std::chrono::duration<double>(latency).count();
  std::lock_guard lk(mu_);
  ++requests_[{route, status}];
  Hist& h = latency_[route];
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (s <= kBuckets[i]) ++h.buckets[i];
  ++h.count;
  h.sum += s;
}

void ApiMetrics::render(std::string& out) const {
  std::lock_guard lk(mu_);
  family(out, "fabric_agent_http_requests_total", "counter", "HTTP API requests answered, by route and status code.");
  for (const auto& [k, n] : requests_)
    out += "fabric_agent_http_requests_total{route=\"" + escape_label(k.first) + "\",code=\"" + std::to_string(k.second) +
           "\"} " + num(n) + "\n";
  family(out, "fabric_agent_http_request_duration_seconds", "histogram",
         "Time from a complete request to its response being queued, by route.");
  for (const auto& [route, h] : latency_) {
    const std::string r = escape_label(route);
    for (size_t i = 0; i < kBuckets.size(); ++i)
      out += "fabric_agent_http_request_duration_seconds_bucket{route=\"" + r + "\",le=\"" + num(kBuckets[i]) + "\"} " +
             num(h.buckets[i]) + "\n";
    out += "fabric_agent_http_request_duration_seconds_bucket{route=\"" + r + "\",le=\"+Inf\"} " + num(h.count) + "\n";
    out += "fabric_agent_http_request_duration_seconds_sum{route=\"" + r + "\"} " + num(h.sum) + "\n";
    out += "fabric_agent_http_request_duration_seconds_count{route=\"" + r + "\"} " + num(h.count) + "\n";
  }
}

std::string render_metrics(const MetricsInput& in, const ApiMetrics& api) {
  std::string out;
  out.reserve(8192);
  family(out, "fabric_agent_build_info", "gauge", "Build information; the value is always 1.");
  out += "fabric_agent_build_info{version=\"" + escape_label(FA_VERSION) + "\"} 1\n";
  family(out, "fabric_agent_start_time_seconds", "gauge", "Unix time the agent started.");
  out += "fabric_agent_start_time_seconds " + num(in.start_time_unix) + "\n";
  family(out, "fabric_agent_status_generation", "gauge", "Generation of /v1/status; moves only when the state changes.");
  out += "fabric_agent_status_generation " + num(in.generation) + "\n";
  family(out, "fabric_agent_refreshes_total", "counter", "Discovery refreshes run (timer and rtnetlink events).");
  out += "fabric_agent_refreshes_total " + num(in.refreshes) + "\n";
  family(out, "fabric_agent_refresh_failures_total", "counter", "Discovery refreshes that could not run.");
  out += "fabric_agent_refresh_failures_total " + num(in.refresh_failures) + "\n";
  family(out, "fabric_agent_last_refresh_duration_seconds", "gauge", "Duration of the last discovery refresh.");
  out += "fabric_agent_last_refresh_duration_seconds " + num(in.last_refresh_seconds) + "\n";

  api.render(out);

  // Ports: state, rate, counters.
  std::string state, rate, counters, hw;
  std::set<std::string> seen;  // a series appears once even if the document repeats a port
  if (in.inspect && in.inspect->is_object() && in.inspect->contains("hcas") && (*in.inspect)["hcas"].is_array()) {
    for (const auto& hca : (*in.inspect)["hcas"]) {
      std::string dev = escape_label(hca.value("name", ""));
      if (!hca.contains("ports") || !hca["ports"].is_array()) continue;
      for (const auto& p : hca["ports"]) {
        std::string port = std::to_string(p.value("port", 0));
        if (!seen.insert(dev + ":" + port).second) continue;
        std::string labels = "device=\"" + dev + "\",port=\"" + port + "\"";
        std::string st = p.contains("state") && p["state"].is_string() ? p["state"].get<std::string>() : "";
        state += "fabric_agent_port_state{" + labels + ",link_layer=\"" + escape_label(p.value("link_layer", "")) +
                 "\"} " + std::to_string(port_state_value(st)) + "\n";
        if (p.contains("rate_gbps") && p["rate_gbps"].is_number())
          rate += "fabric_agent_port_rate_bits_per_second{" + labels + "} " + num(p["rate_gbps"].get<double>() * 1e9) + "\n";
        auto add = [&](const char* key, std::string& dst, const char* metric) {
          if (!p.contains(key) || !p[key].is_object()) return;
          for (const auto& [name, v] : p[key].items())
            dst += std::string(metric) + "{" + labels + ",counter=\"" + escape_label(name) + "\"} " + num(as_u64(v)) + "\n";
        };
        add("counters", counters, "fabric_agent_port_counter_total");
        add("hw_counters", hw, "fabric_agent_port_hw_counter_total");
      }
    }
  }
  family(out, "fabric_agent_port_state", "gauge",
         "RDMA port state as the kernel numbers it: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER, 0 "
         "unknown.");
  out += state;
  family(out, "fabric_agent_port_rate_bits_per_second", "gauge", "RDMA port link rate.");
  out += rate;
  family(out, "fabric_agent_port_counter_total", "counter", "RDMA port counters (ports/N/counters), by sysfs name.");
  out += counters;
  family(out, "fabric_agent_port_hw_counter_total", "counter", "RDMA port hardware counters (ports/N/hw_counters), by sysfs name.");
  out += hw;

  // Mesh.
  std::string age, rx, tx;
  size_t npeers = 0;
  bool up = false;
  if (in.mesh_live && in.mesh_live->is_object()) {
    up = true;
    std::string ifname = escape_label(in.mesh_live->value("interface", ""));
    if (in.mesh_live->contains("peers") && (*in.mesh_live)["peers"].is_array()) {
      for (const auto& p : (*in.mesh_live)["peers"]) {
        ++npeers;
        std::string labels = "interface=\"" + ifname + "\",peer=\"" + escape_label(p.value("public_key", "")) + "\"";
        int64_t hs = p.contains("last_handshake_unix") && p["last_handshake_unix"].is_number_integer()
                         ? p["last_handshake_unix"].get<int64_t>()
                         : 0;
        // No handshake yet: the series is absent rather than a fake age.
        if (hs > 0) age += "fabric_agent_mesh_peer_handshake_age_seconds{" + labels + "} " + num(in.now_unix - static_cast<double>(hs)) + "\n";
        rx += "fabric_agent_mesh_peer_receive_bytes_total{" + labels + "} " + num(as_u64(p.value("rx_bytes", nlohmann::json(0)))) + "\n";
        tx += "fabric_agent_mesh_peer_transmit_bytes_total{" + labels + "} " + num(as_u64(p.value("tx_bytes", nlohmann::json(0)))) + "\n";
      }
    }
  }
  family(out, "fabric_agent_mesh_up", "gauge", "1 when the overlay interface exists and answers.");
  out += std::string("fabric_agent_mesh_up ") + (up ? "1" : "0") + "\n";
  family(out, "fabric_agent_mesh_peers", "gauge", "Peers configured on the overlay interface.");
  out += "fabric_agent_mesh_peers " + num(static_cast<uint64_t>(npeers)) + "\n";
  family(out, "fabric_agent_mesh_peer_handshake_age_seconds", "gauge", "Seconds since the last WireGuard handshake with a peer.");
  out += age;
  family(out, "fabric_agent_mesh_peer_receive_bytes_total", "counter", "Bytes received from a peer over the overlay.");
  out += rx;
  family(out, "fabric_agent_mesh_peer_transmit_bytes_total", "counter", "Bytes sent to a peer over the overlay.");
  out += tx;
  return out;
}

}  // namespace fa::agent
