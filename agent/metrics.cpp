// SPDX-License-Identifier: Apache-2.0
#include "agent/metrics.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <set>
#include <vector>

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

uint64_t as_u64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return 0;
}

// A string member of a JSON object, "" when absent or not a string (the
// inspect document writes null for what could not be read).
std::string str_of(const nlohmann::json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The IBA PortCounters (and PortCountersExtended) that the kernel writes to
// ports/N/counters/, one family each, named and typed as Prometheus expects.
// port_xmit_data and port_rcv_data count 4-octet words: "Total number of
// data octets, divided by 4 (lanes)" (the kernel's
// Documentation/ABI/stable/sysfs-class-infiniband; PortXmitData and
// PortRcvData in the IBA spec's PortCounters), hence `scale` 4 for bytes.
struct IbaCounter {
  const char* file;
  const char* metric;
  uint64_t scale;
  const char* help;
};
constexpr IbaCounter kIbaCounters[] = {
    {"port_rcv_data", "fabric_agent_port_receive_bytes_total", 4,
     "Data octets received on all VLs (port_rcv_data x 4)."},
    {"port_xmit_data", "fabric_agent_port_transmit_bytes_total", 4,
     "Data octets transmitted on all VLs (port_xmit_data x 4)."},
    {"port_rcv_packets", "fabric_agent_port_receive_packets_total", 1,
     "Packets received, errors included (port_rcv_packets)."},
    {"port_xmit_packets", "fabric_agent_port_transmit_packets_total", 1,
     "Packets transmitted, errors included (port_xmit_packets)."},
    {"unicast_rcv_packets", "fabric_agent_port_unicast_receive_packets_total", 1,
     "Unicast packets received (unicast_rcv_packets)."},
    {"unicast_xmit_packets", "fabric_agent_port_unicast_transmit_packets_total", 1,
     "Unicast packets transmitted (unicast_xmit_packets)."},
    {"multicast_rcv_packets", "fabric_agent_port_multicast_receive_packets_total", 1,
     "Multicast packets received (multicast_rcv_packets)."},
    {"multicast_xmit_packets", "fabric_agent_port_multicast_transmit_packets_total", 1,
     "Multicast packets transmitted (multicast_xmit_packets)."},
    {"port_rcv_errors", "fabric_agent_port_receive_errors_total", 1,
     "Packets received with an error (port_rcv_errors)."},
    {"port_rcv_remote_physical_errors", "fabric_agent_port_receive_remote_physical_errors_total", 1,
     "Packets received marked with the EBP delimiter (port_rcv_remote_physical_errors)."},
    {"port_rcv_switch_relay_errors", "fabric_agent_port_receive_switch_relay_errors_total", 1,
     "Packets received that the switch relay could not forward (port_rcv_switch_relay_errors)."},
    {"port_rcv_constraint_errors", "fabric_agent_port_receive_constraint_errors_total", 1,
     "Packets received and discarded by inbound filtering or partition checks (port_rcv_constraint_errors)."},
    {"port_xmit_constraint_errors", "fabric_agent_port_transmit_constraint_errors_total", 1,
     "Packets not transmitted because of outbound filtering or partition checks "
     "(port_xmit_constraint_errors)."},
    {"port_xmit_discards", "fabric_agent_port_transmit_discards_total", 1,
     "Outbound packets discarded because the port is down or congested (port_xmit_discards)."},
    {"port_xmit_wait", "fabric_agent_port_transmit_wait_total", 1,
     "Ticks with data to send and nothing sent (port_xmit_wait)."},
    {"symbol_error", "fabric_agent_port_symbol_errors_total", 1,
     "Minor link errors on a physical lane (symbol_error)."},
    {"link_error_recovery", "fabric_agent_port_link_error_recoveries_total", 1,
     "Link error recoveries completed (link_error_recovery)."},
    {"link_downed", "fabric_agent_port_link_downed_total", 1,
     "Times a failed link error recovery took the link down (link_downed)."},
    {"local_link_integrity_errors", "fabric_agent_port_local_link_integrity_errors_total", 1,
     "Times local physical errors exceeded their threshold (local_link_integrity_errors)."},
    {"excessive_buffer_overrun_errors", "fabric_agent_port_excessive_buffer_overrun_errors_total", 1,
     "Input buffer overruns (excessive_buffer_overrun_errors)."},
    {"VL15_dropped", "fabric_agent_port_vl15_dropped_total", 1,
     "Incoming VL15 (subnet management) packets dropped (VL15_dropped)."},
};

std::string scaled(uint64_t v, uint64_t scale) {
  // Exact while it fits; beyond 2^64 the text format's float is all there is.
  if (v <= UINT64_MAX / scale) return num(v * scale);
  return num(static_cast<double>(v) * static_cast<double>(scale));
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

  // Ports: state and rate from hcas[].ports[], counters from the document's
  // `counters` map ("dev:port" -> {counters, hw_counters}).
  std::string state, rate, hw;
  std::vector<std::string> iba(std::size(kIbaCounters));
  std::set<std::string> seen;  // a series appears once even if the document repeats a port
  const nlohmann::json* doc = in.inspect && in.inspect->is_object() ? in.inspect : nullptr;
  const nlohmann::json* hcas =
      doc && doc->contains("hcas") && (*doc)["hcas"].is_array() ? &(*doc)["hcas"] : nullptr;
  const nlohmann::json* all_counters =
      doc && doc->contains("counters") && (*doc)["counters"].is_object() ? &(*doc)["counters"] : nullptr;
  for (const auto& hca : hcas ? *hcas : nlohmann::json::array()) {
    if (!hca.is_object() || !hca.contains("ports") || !hca["ports"].is_array()) continue;
    const std::string name = str_of(hca, "name");
    const std::string dev = escape_label(name);
    for (const auto& p : hca["ports"]) {
      if (!p.is_object() || !p.contains("port") || !p["port"].is_number_integer()) continue;
      std::string port = std::to_string(p["port"].get<int64_t>());
      if (!seen.insert(dev + ":" + port).second) continue;
      std::string labels = "device=\"" + dev + "\",port=\"" + port + "\"";
      state += "fabric_agent_port_state{" + labels + ",link_layer=\"" +
               escape_label(str_of(p, "link_layer")) + "\"} " +
               std::to_string(port_state_value(str_of(p, "state"))) + "\n";
      if (p.contains("rate_gbps") && p["rate_gbps"].is_number())
        rate += "fabric_agent_port_rate_bytes_per_second{" + labels + "} " +
                num(p["rate_gbps"].get<double>() * 1e9 / 8) + "\n";
      if (!all_counters) continue;
      auto c = all_counters->find(name + ":" + port);
      if (c == all_counters->end() || !c->is_object()) continue;
      if (auto iba_c = c->find("counters"); iba_c != c->end() && iba_c->is_object())
        for (size_t i = 0; i < std::size(kIbaCounters); ++i)
          if (auto v = iba_c->find(kIbaCounters[i].file); v != iba_c->end())
            iba[i] += std::string(kIbaCounters[i].metric) + "{" + labels + "} " +
                      scaled(as_u64(*v), kIbaCounters[i].scale) + "\n";
      // hw_counters differ per driver: their names are a label. `lifespan` is
      // no counter but how long the kernel caches the others (ms).
      if (auto hw_c = c->find("hw_counters"); hw_c != c->end() && hw_c->is_object())
        for (const auto& [n, v] : hw_c->items())
          if (n != "lifespan")
            hw += "fabric_agent_port_hw_events_total{" + labels + ",counter=\"" + escape_label(n) + "\"} " +
                  num(as_u64(v)) + "\n";
    }
  }
  family(out, "fabric_agent_port_state", "gauge",
         "RDMA port state as the kernel numbers it: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER, 0 "
         "unknown.");
  out += state;
  family(out, "fabric_agent_port_rate_bytes_per_second", "gauge", "RDMA port link rate (ports/N/rate).");
  out += rate;
  // Only the families a port has: a RoCE host or rxe (no counters/) shows none.
  for (size_t i = 0; i < std::size(kIbaCounters); ++i) {
    if (iba[i].empty()) continue;
    family(out, kIbaCounters[i].metric, "counter", kIbaCounters[i].help);
    out += iba[i];
  }
  if (!hw.empty()) {
    family(out, "fabric_agent_port_hw_events_total", "counter",
           "RDMA port hardware counters (ports/N/hw_counters), by sysfs name; which exist depends on the "
           "driver.");
    out += hw;
  }

  // Mesh.
  std::string age, rx, tx;
  size_t npeers = 0;
  bool up = false;
  if (in.mesh_live && in.mesh_live->is_object()) {
    up = true;
    std::string ifname = escape_label(str_of(*in.mesh_live, "interface"));
    if (in.mesh_live->contains("peers") && (*in.mesh_live)["peers"].is_array()) {
      for (const auto& p : (*in.mesh_live)["peers"]) {
        ++npeers;
        std::string labels = "interface=\"" + ifname + "\",peer=\"" + escape_label(str_of(p, "public_key")) + "\"";
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

  std::string conditions;
  size_t held = 0;
  if (in.health && in.health->is_array())
    for (const auto& c : *in.health) {
      if (!c.is_object()) continue;
      ++held;
      conditions += "fabric_agent_health_condition_start_time_seconds{code=\"" + escape_label(c.value("code", "")) +
                    "\",subject=\"" + escape_label(c.value("subject", "")) + "\"} " +
                    num(static_cast<uint64_t>(c.value("since_unix", int64_t{0}))) + "\n";
    }
  family(out, "fabric_agent_healthy", "gauge", "1 when no health condition holds (docs/health.md).");
  out += std::string("fabric_agent_healthy ") + (held ? "0" : "1") + "\n";
  family(out, "fabric_agent_health_condition_start_time_seconds", "gauge",
         "Unix time a health condition was raised, by code and subject; absent when it does not hold.");
  out += conditions;

  // The scorecard: the last probe this agent ran per peer and rail. A failed
  // probe has no figures, so its bandwidth and latency series are absent and
  // its status is 0.
  std::string bw, lat, status, when;
  if (in.scorecard && in.scorecard->is_object() && in.scorecard->contains("results"))
    for (const auto& e : (*in.scorecard)["results"]) {
      if (!e.is_object()) continue;
      const std::string labels = "peer=\"" + escape_label(str_of(e, "peer")) + "\",rail=\"" + escape_label(str_of(e, "rail")) + "\"";
      const std::string st = str_of(e, "status");
      status += "fabric_agent_rail_status{" + labels + "} " + (st == "ok" ? "2" : st == "degraded" ? "1" : "0") + "\n";
      if (e.contains("measured_unix") && e["measured_unix"].is_number())
        when += "fabric_agent_rail_measured_time_seconds{" + labels + "} " + num(e["measured_unix"].get<double>()) + "\n";
      if (e.contains("gbps") && e["gbps"].is_number())
        bw += "fabric_agent_rail_bandwidth_bytes_per_second{" + labels + "} " + num(e["gbps"].get<double>() * 1e9 / 8) + "\n";
      if (e.contains("latency_us") && e["latency_us"].is_object())
        for (const char* k : {"p50", "p90", "p99", "max"})
          if (e["latency_us"].contains(k) && e["latency_us"][k].is_number())
            lat += "fabric_agent_rail_latency_seconds{" + labels + ",stat=\"" + k + "\"} " +
                   num(e["latency_us"][k].get<double>() / 1e6) + "\n";
    }
  family(out, "fabric_agent_rail_status", "gauge",
         "Last RDMA probe this agent ran to a peer on a rail: 2 ok, 1 degraded, 0 failed.");
  out += status;
  family(out, "fabric_agent_rail_bandwidth_bytes_per_second", "gauge",
         "RDMA WRITE payload rate of the last probe to a peer on a rail.");
  out += bw;
  family(out, "fabric_agent_rail_latency_seconds", "gauge",
         "One-way RDMA write latency of the last probe to a peer on a rail, by stat (p50, p90, p99, max).");
  out += lat;
  family(out, "fabric_agent_rail_measured_time_seconds", "gauge", "Unix time of the last probe to a peer on a rail.");
  out += when;
  return out;
}

}  // namespace fa::agent
