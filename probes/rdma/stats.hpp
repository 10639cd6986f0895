// SPDX-License-Identifier: Apache-2.0
// Latency distribution summary. Nearest-rank percentiles (the smallest sample
// such that at least p% of samples are <= it): every reported figure is a
// latency that was actually observed, never an interpolation between two.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.hpp"

namespace fa::rdma {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
  bool operator==(const Percentiles&) const = default;
};

// Fails on an empty sample set or a non-finite/negative sample.
Result<Percentiles> summarize(std::vector<double> samples);

// One percentile of an already sorted, non-empty sample set; p in (0, 100].
double nearest_rank(const std::vector<double>& sorted, double p);

// Gb/s (10^9 bits per second) from bytes and seconds; 0 when seconds <= 0.
double gbps(uint64_t bytes, double seconds);

}  // namespace fa::rdma
