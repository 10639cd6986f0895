// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/stats.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace fa::rdma {

double nearest_rank(const std::vector<double>& sorted, double p) {
  // rank = ceil(p/100 * n), 1-based; computed in integers where possible so
  // p99 of 100 samples is the 99th, not the 100th through rounding.
  const size_t n = sorted.size();
  double exact = p / 100.0 * static_cast<double>(n);
  size_t rank = static_cast<size_t>(std::ceil(exact - 1e-9));
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

Result<Percentiles> summarize(std::vector<double> samples) {
  if (samples.empty()) return Error{"latency: no samples"};
  for (double s : samples)
    if (!std::isfinite(s) || s < 0) return Error{"latency: sample " + std::to_string(s) + " is not a duration"};
  std::sort(samples.begin(), samples.end());
  return Percentiles{nearest_rank(samples, 50), nearest_rank(samples, 90), nearest_rank(samples, 99),
                     samples.back()};
}

double gbps(uint64_t bytes, double seconds) {
  if (seconds <= 0) return 0;
  return static_cast<double>(bytes) * 8.0 / seconds / 1e9;
}

}  // namespace fa::rdma
