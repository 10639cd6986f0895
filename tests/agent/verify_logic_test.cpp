// SPDX-License-Identifier: Apache-2.0
// `cluster verify`'s decisions on data: the round-robin schedule, the rails
// read from a status, the pass line, the reference machine, the bad end and
// the closed overlay port.
#include <catch2/catch.hpp>

#include <set>

#include "agent/verify_logic.hpp"

using namespace fa::agent::verify;
using nlohmann::json;

TEST_CASE("round_robin: N = 2..64, every pair exactly once, nobody twice in a round") {
  for (int n = 2; n <= 64; ++n) {
    INFO("n = " << n);
    auto rounds = round_robin(n);
    REQUIRE(static_cast<int>(rounds.size()) == (n % 2 == 0 ? n - 1 : n));
    std::set<std::pair<int, int>> seen;
    for (const auto& round : rounds) {
      CHECK(static_cast<int>(round.size()) == n / 2);
      std::set<int> busy;
      for (auto [a, b] : round) {
        REQUIRE(a >= 0);
        REQUIRE(a < n);
        REQUIRE(b >= 0);
        REQUIRE(b < n);
        REQUIRE(a != b);
        CHECK(busy.insert(a).second);
        CHECK(busy.insert(b).second);
        CHECK(seen.insert({std::min(a, b), std::max(a, b)}).second);
      }
    }
    CHECK(static_cast<int>(seen.size()) == n * (n - 1) / 2);
  }
  CHECK(round_robin(1).empty());
  CHECK(round_robin(0).empty());
}

TEST_CASE("round_robin: odd N gives each machine exactly one bye") {
  for (int n : {3, 5, 7, 33}) {
    std::vector<int> byes(n, 0);
    for (const auto& round : round_robin(n)) {
      std::vector<bool> in(n, false);
      for (auto [a, b] : round) in[a] = in[b] = true;
      for (int i = 0; i < n; ++i) byes[i] += in[i] ? 0 : 1;
    }
    for (int i = 0; i < n; ++i) CHECK(byes[i] == 1);
  }
}

TEST_CASE("round_robin: the runs are spread, not all on machine 0") {
  std::vector<int> runs(8, 0);
  for (const auto& round : round_robin(8))
    for (auto [a, b] : round) ++runs[a];
  CHECK(runs[0] < 7);
  CHECK(runs[0] > 0);
}

namespace {
json inspect_two_rails() {
  return json::parse(R"({
    "fabric": {"kind": "roce", "ports": ["mlx5_1:1", "mlx5_0:1"]},
    "nccl_env": {"NCCL_IB_HCA": "=mlx5_1:1,mlx5_0:1", "NCCL_IB_GID_INDEX": "3"},
    "hcas": [
      {"name": "mlx5_0", "ports": [{"port": 1, "rate_gbps": 400}]},
      {"name": "mlx5_1", "ports": [{"port": 1, "rate_gbps": 200}, {"port": 2, "rate_gbps": 100}]}
    ]})");
}
}  // namespace

TEST_CASE("rails_of: fabric.ports in order with each port's kernel rate") {
  auto r = rails_of(inspect_two_rails());
  REQUIRE(r.size() == 2);
  CHECK(r[0].hca == "mlx5_1:1");
  CHECK(r[0].rate_gbps == 200);
  CHECK(r[1].hca == "mlx5_0:1");
  CHECK(r[1].rate_gbps == 400);
  CHECK(rails_of(json(nullptr)).empty());
  CHECK(rails_of(json::parse(R"({"fabric": {"kind": "none", "ports": []}})")).empty());
  // A port without a rate reads 0 (judge() then has no pass line).
  auto j = inspect_two_rails();
  j["hcas"][0]["ports"][0].erase("rate_gbps");
  CHECK(rails_of(j)[1].rate_gbps == 0);
}

TEST_CASE("gid_index_of: NCCL_IB_GID_INDEX, InfiniBand 0, else none") {
  CHECK(gid_index_of(inspect_two_rails()) == 3);
  CHECK(gid_index_of(json::parse(R"({"fabric": {"kind": "infiniband"}, "nccl_env": {"NCCL_IB_GID_INDEX": null}})")) == 0);
  CHECK_FALSE(gid_index_of(json::parse(R"({"fabric": {"kind": "roce"}, "nccl_env": {}})")).has_value());
  CHECK_FALSE(gid_index_of(json::parse(R"({"fabric": {"kind": "roce"}, "nccl_env": {"NCCL_IB_GID_INDEX": "x"}})")).has_value());
}

TEST_CASE("judge: the pass line is the fraction of the slower port") {
  auto ran = [](double gbps) { return json{{"status", "ok"}, {"reason", nullptr}, {"gbps", gbps}}; };
  // NDR 400 against NDR 400: 380 passes at 0.9 (360), 350 does not.
  auto j = judge(ran(380), 400, 400, 0.9);
  CHECK(j.status == Status::kOk);
  CHECK(j.pass_gbps == Approx(360));
  j = judge(ran(350), 400, 400, 0.9);
  CHECK(j.status == Status::kDegraded);
  CHECK(j.reason == "below_rate");
  CHECK_THAT(j.message, Catch::Contains("350 Gb/s < 0.9 x 400 Gb/s"));
  // The slower end sets the line, whichever end it is.
  CHECK(judge(ran(190), 400, 200, 0.9).status == Status::kOk);
  CHECK(judge(ran(190), 200, 400, 0.9).status == Status::kOk);
  CHECK(judge(ran(170), 200, 400, 0.9).status == Status::kDegraded);
  // Exactly on the line passes; configurable.
  CHECK(judge(ran(360), 400, 400, 0.9).status == Status::kOk);
  CHECK(judge(ran(350), 400, 400, 0.8).status == Status::kOk);
  CHECK(judge(ran(0.2), 10, 10, 0).status == Status::kOk);
  // No rate from the kernel: no pass line, not a pass.
  j = judge(ran(380), 0, 400, 0.9);
  CHECK(j.status == Status::kDegraded);
  CHECK(j.reason == "port_rate_unknown");
}

TEST_CASE("judge: a failed probe keeps its classified reason") {
  auto j = judge(json{{"status", "failed"}, {"reason", "qp_rtr_failed"}, {"message", "peer reported: RTR"}, {"gbps", nullptr}},
                 400, 400, 0.9);
  CHECK(j.status == Status::kFailed);
  CHECK(j.reason == "qp_rtr_failed");
  CHECK(j.message == "peer reported: RTR");
  // The probe's own "degraded" (its own port, its own fraction) does not
  // decide: the slower port does.
  CHECK(judge(json{{"status", "degraded"}, {"reason", "below_rate"}, {"gbps", 380}}, 400, 400, 0.9).status == Status::kOk);
  CHECK(judge(json("garbage"), 400, 400, 0.9).reason == "protocol_error");
  CHECK(judge(json{{"status", "ok"}}, 400, 400, 0.9).status == Status::kFailed);
}

TEST_CASE("runner_fraction: the runner's own verdict matches the slower port's line") {
  CHECK(runner_fraction(400, 400, 0.9) == Approx(0.9));
  CHECK(runner_fraction(400, 200, 0.9) == Approx(0.45));
  CHECK(runner_fraction(200, 400, 0.9) == Approx(0.9));
  CHECK(runner_fraction(0, 400, 0.9) == Approx(0.9));
}

TEST_CASE("pick_reference: a third machine that passed, the one with most passes") {
  // 4 machines; 0-1 failed; 2 passed with 3, 3 passed with 2 and 1.
  PassMatrix p(4, std::vector<std::optional<bool>>(4));
  auto set = [&](int a, int b, bool v) { p[a][b] = p[b][a] = v; };
  set(0, 1, false);
  set(2, 3, true);
  set(1, 3, true);
  set(0, 2, false);
  CHECK(pick_reference(p, 0, 1) == 3);
  CHECK(pick_reference(p, 2, 3) == 1);  // of 0 and 1, only 1 ever passed
  set(1, 3, false);
  CHECK(pick_reference(p, 0, 1) == 2);
  // Two machines: nobody else to ask.
  PassMatrix two(2, std::vector<std::optional<bool>>(2));
  CHECK(pick_reference(two, 0, 1) == -1);
}

TEST_CASE("blame: the end that fails with a good machine is the bad end") {
  CHECK(blame(true, false) == Blame::kSecond);
  CHECK(blame(false, true) == Blame::kFirst);
  CHECK(blame(true, true) == Blame::kPath);
  CHECK(blame(false, false) == Blame::kBoth);
  CHECK(blame(std::nullopt, true) == Blame::kUndetermined);
  CHECK(blame(false, std::nullopt) == Blame::kUndetermined);
}

TEST_CASE("closed_overlay_ports: the machine nobody reaches is named") {
  // 3 machines, 2 unreachable from 0 and 1; 0-1 fine.
  auto r = [](int i, int j) { return i != 2 && j != 2; };
  CHECK(closed_overlay_ports(3, r, {true, true, true}) == std::vector<int>{2});
  // All reachable: none.
  CHECK(closed_overlay_ports(3, [](int, int) { return true; }, {true, true, true}).empty());
  // Two machines that do not reach each other: which one is closed is not
  // known from handshakes alone...
  CHECK(closed_overlay_ports(2, [](int, int) { return false; }, {true, true}).empty());
  // ... unless one has no interface up.
  CHECK(closed_overlay_ports(2, [](int, int) { return false; }, {true, false}) == std::vector<int>{1});
  // One pair missing among 4: the path, not a machine.
  auto one = [](int i, int j) { return !(i == 0 && j == 3); };
  CHECK(closed_overlay_ports(4, one, {true, true, true, true}).empty());
}
