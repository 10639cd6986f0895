// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition (format 0.0.4) for GET /metrics: build info,
// API request counts and a latency histogram per route, port state and rate
// per device/port and its counters (the inspect document's `counters` map:
// the IBA port counters one family each, bytes in bytes; hw_counters by
// name), mesh peers with handshake age and bytes (from `mesh show`), the
// health conditions and the scorecard's last probe per peer and rail. Kept
// clean under `promtool check metrics` (tests run it on live output and on
// the fixtures' ports).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace fa::agent {

class ApiMetrics {
 public:
  static constexpr std::array<double, 14> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                      0.025,  0.05,    0.1,    0.25,  1,      5,     30};
  void observe(const std::string& route, int status, std::chrono::nanoseconds latency);
  void render(std::string& out) const;

 private:
  struct Hist {
    std::array<uint64_t, kBuckets.size()> buckets{};
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Hist> latency_;
};

struct MetricsInput {
  const nlohmann::json* inspect = nullptr;    // inspect document or null
  const nlohmann::json* mesh_live = nullptr;  // mesh show document or null
  const nlohmann::json* health = nullptr;     // [{code, subject, evidence, since_unix}] or null
  const nlohmann::json* scorecard = nullptr;  // {"results": [scorecard entries]} or null
  uint64_t generation = 0;
  double start_time_unix = 0;
  uint64_t refreshes = 0;
  uint64_t refresh_failures = 0;
  double last_refresh_seconds = 0;
  double now_unix = 0;
};

std::string render_metrics(const MetricsInput& in, const ApiMetrics& api);

// Label value escaping per the exposition format (\\, \", \n).
std::string escape_label(const std::string& v);

}  // namespace fa::agent
