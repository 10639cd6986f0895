// SPDX-License-Identifier: Apache-2.0
// Parsing of the probe's options and the result document: pure, table-tested.
#include <arpa/inet.h>

#include <cctype>
#include <charconv>

#include "common/cli.hpp"
#include "probes/rdma/probe.hpp"

namespace fa::rdma {
namespace {

Result<uint64_t> parse_uint(std::string_view field, std::string_view s, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi)
    return Error{std::string(field) + " '" + std::string(s) + "' is not an integer in " + std::to_string(lo) +
                 ".." + std::to_string(hi)};
  return v;
}

}  // namespace

Result<HcaPort> parse_hca(std::string_view s) {
  auto bad = [&] {
    return Error{"--hca '" + std::string(s) + "' is not DEV or DEV:PORT (e.g. mlx5_0:1; DEV is letters, digits, "
                                              "'_', '-', '.', PORT 1..255)"};
  };
  HcaPort h;
  std::string_view dev = s;
  if (auto c = s.find(':'); c != std::string_view::npos) {
    dev = s.substr(0, c);
    auto port = parse_uint("--hca port", s.substr(c + 1), 1, 255);
    if (!port) return bad();
    h.port = static_cast<uint8_t>(*port);
  }
  if (dev.empty() || dev.size() > 63) return bad();
  for (char ch : dev)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.')) return bad();
  h.device = std::string(dev);
  return h;
}

Result<PeerAddr> parse_peer(std::string_view s, uint16_t default_port) {
  auto bad = [&](const std::string& why) {
    return Error{"--peer '" + std::string(s) + "' " + why + " (accepted: HOST, HOST:PORT, [IPV6]:PORT)"};
  };
  PeerAddr p;
  p.port = default_port;
  std::string_view host = s, port;
  const bool bracketed = !s.empty() && s[0] == '[';
  if (bracketed) {
    auto close = s.find(']');
    if (close == std::string_view::npos) return bad("has no closing ']'");
    host = s.substr(1, close - 1);
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return bad("has text after ']' that is not ':PORT'");
      port = rest.substr(1);
      if (port.empty()) return bad("has an empty port");
    }
  } else if (auto c = s.find(':'); c != std::string_view::npos && s.find(':', c + 1) == std::string_view::npos) {
    host = s.substr(0, c);
    port = s.substr(c + 1);
    if (port.empty()) return bad("has an empty port");
  }
  if (host.empty()) return bad("has no host");
  if (bracketed || host.find(':') != std::string_view::npos) {
    // Only an IPv6 literal may contain ':' (with an optional %zone).
    std::string addr(host.substr(0, host.find('%')));
    in6_addr a6{};
    if (inet_pton(AF_INET6, addr.c_str(), &a6) != 1) return bad("is not an IPv6 address; write HOST:PORT or [IPV6]:PORT");
  }
  for (char ch : host)
    if (ch <= 0x20 || ch >= 0x7f || ch == '/' || ch == '[' || ch == ']') return bad("has a character not allowed in a host");
  if (!port.empty()) {
    auto v = parse_uint("port", port, 1, 65535);
    if (!v) return bad("has a port outside 1..65535");
    p.port = static_cast<uint16_t>(*v);
  }
  p.host = std::string(host);
  return p;
}

Result<uint64_t> parse_size(std::string_view s) {
  const uint64_t max = 64ull << 20;
  uint64_t mult = 1;
  std::string_view digits = s;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'k')) mult = 1024;
  if (!s.empty() && (s.back() == 'M' || s.back() == 'm')) mult = 1024 * 1024;
  if (mult != 1) digits.remove_suffix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || v == 0 || v > max / mult)
    return Error{"--size '" + std::string(s) + "' is not a size in 1.." + std::to_string(max) +
                 " bytes (plain bytes or with a K/M suffix, e.g. 65536 or 64K)"};
  return v * mult;
}

Result<double> parse_duration(std::string_view s) {
  auto v = parse_decimal(s);  // never inf or nan
  if (!v || *v < 0.1 || *v > 3600)
    return Error{"--duration '" + std::string(s) + "' is not a number of seconds in 0.1..3600"};
  return *v;
}

Result<int> parse_gid_index(std::string_view s) {
  auto v = parse_uint("--gid-index", s, 0, 255);
  if (!v) return v.take_error();
  return static_cast<int>(*v);
}

double port_rate_gbps(uint8_t active_width, uint8_t active_speed) {
  double lanes = 0;
  switch (active_width) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  double lane = 0;
  switch (active_speed) {
    case 1: lane = 2.5; break;   // SDR
    case 2: lane = 5; break;     // DDR
    case 4: lane = 10; break;    // QDR
    case 8: lane = 10; break;    // FDR10
    case 16: lane = 14; break;   // FDR
    case 32: lane = 25; break;   // EDR
    case 64: lane = 50; break;   // HDR
    case 128: lane = 100; break; // NDR
    default: return 0;
  }
  return lanes * lane;
}

std::string_view status_name(ProbeStatus s) {
  switch (s) {
    case ProbeStatus::kOk: return "ok";
    case ProbeStatus::kDegraded: return "degraded";
    case ProbeStatus::kFailed: return "failed";
  }
  return "failed";
}

nlohmann::json to_json(const ProbeResult& r) {
  using nlohmann::json;
  const bool failed = r.status == ProbeStatus::kFailed;
  json j;
  j["status"] = status_name(r.status);
  j["reason"] = r.reason == Reason::kNone ? json(nullptr) : json(reason_name(r.reason));
  j["message"] = r.message;
  // A failed probe has a reason instead of figures: a partial number would
  // read as a measurement.
  j["bytes"] = failed ? json(nullptr) : json(r.bytes);
  j["seconds"] = failed ? json(nullptr) : json(r.seconds);
  j["gbps"] = failed ? json(nullptr) : json(r.gbps);
  if (!failed && r.latency_us) {
    j["latency_us"] = {{"p50", r.latency_us->p50},
                       {"p90", r.latency_us->p90},
                       {"p99", r.latency_us->p99},
                       {"max", r.latency_us->max}};
  } else {
    j["latency_us"] = nullptr;
  }
  j["hca"] = r.hca;
  j["port"] = r.port;
  j["gid_index"] = r.gid_index;
  j["gid"] = r.gid;
  j["peer"] = r.peer;
  j["size"] = r.size;
  j["latency_iters"] = r.latency_iters;
  j["port_rate_gbps"] = r.port_rate_gbps;
  return j;
}

}  // namespace fa::rdma
