// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "probes/rdma/stats.hpp"

using namespace fa::rdma;

TEST_CASE("nearest-rank percentiles on 1..100", "[rdma][stats]") {
  std::vector<double> s;
  for (int i = 100; i >= 1; --i) s.push_back(i);  // unsorted input
  auto p = summarize(s);
  REQUIRE(p.ok());
  CHECK(p->p50 == 50);
  CHECK(p->p90 == 90);
  CHECK(p->p99 == 99);
  CHECK(p->max == 100);
}

TEST_CASE("percentiles are observed samples and ordered", "[rdma][stats]") {
  struct Case {
    std::vector<double> in;
    Percentiles want;
  };
  const std::vector<Case> cases = {
      {{7}, {7, 7, 7, 7}},
      {{1, 2}, {1, 2, 2, 2}},
      {{3, 1, 2}, {2, 3, 3, 3}},
      {{5, 5, 5, 5}, {5, 5, 5, 5}},
      // 10 samples: p50 = 5th, p90 = 9th, p99 = ceil(9.9) = 10th
      {{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, {5, 9, 10, 10}},
      // a single outlier in 1000 shows in max, not in p99
      {[] {
         std::vector<double> v(999, 2.0);
         v.push_back(500);
         return v;
       }(),
       {2, 2, 2, 500}},
  };
  for (const auto& c : cases) {
    auto p = summarize(c.in);
    REQUIRE(p.ok());
    CHECK(*p == c.want);
    CHECK(p->p50 <= p->p90);
    CHECK(p->p90 <= p->p99);
    CHECK(p->p99 <= p->max);
  }
}

TEST_CASE("200 samples: p99 is the 198th", "[rdma][stats]") {
  std::vector<double> s;
  for (int i = 1; i <= 200; ++i) s.push_back(i * 0.5);
  auto p = summarize(s);
  REQUIRE(p.ok());
  CHECK(p->p50 == 50);
  CHECK(p->p90 == 90);
  CHECK(p->p99 == 99);
  CHECK(p->max == 100);
}

TEST_CASE("empty and non-durations are refused", "[rdma][stats]") {
  CHECK_FALSE(summarize({}).ok());
  CHECK_FALSE(summarize({1, -1}).ok());
  CHECK_FALSE(summarize({1, std::nan("")}).ok());
  CHECK_FALSE(summarize({std::numeric_limits<double>::infinity()}).ok());
}

TEST_CASE("gbps", "[rdma][stats]") {
  CHECK(gbps(125000000, 1.0) == Approx(1.0));
  CHECK(gbps(1250000000, 2.0) == Approx(5.0));
  CHECK(gbps(100, 0) == 0);
}
