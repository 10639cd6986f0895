// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "probes/rdma/probe.hpp"

using namespace fa::rdma;

TEST_CASE("hca option: DEV or DEV:PORT", "[rdma][options]") {
  CHECK(*parse_hca("mlx5_0:1") == HcaPort{"mlx5_0", 1});
  CHECK(*parse_hca("rxe0") == HcaPort{"rxe0", 1});
  CHECK(*parse_hca("mlx5_bond_0:2") == HcaPort{"mlx5_bond_0", 2});
  for (const char* bad : {"", ":1", "mlx5_0:", "mlx5_0:0", "mlx5_0:256", "mlx5_0:1:2", "mlx5 0:1", "mlx5_0:x",
                          "../etc:1", "mlx5_0:-1"}) {
    INFO(bad);
    auto r = parse_hca(bad);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("--hca '" + std::string(bad) + "'"));
  }
}

TEST_CASE("peer option: HOST, HOST:PORT, bracketed IPv6", "[rdma][options]") {
  CHECK(*parse_peer("10.0.0.2") == PeerAddr{"10.0.0.2", kDefaultPort});
  CHECK(*parse_peer("10.0.0.2:7000") == PeerAddr{"10.0.0.2", 7000});
  CHECK(*parse_peer("node-b") == PeerAddr{"node-b", kDefaultPort});
  CHECK(*parse_peer("[fe80::1%eth0]:99") == PeerAddr{"fe80::1%eth0", 99});
  CHECK(*parse_peer("[::1]") == PeerAddr{"::1", kDefaultPort});
  CHECK(*parse_peer("fd00::2") == PeerAddr{"fd00::2", kDefaultPort});
  CHECK(*parse_peer("h", 5) == PeerAddr{"h", 5});
  CHECK(*parse_peer("fe80::1%eth0") == PeerAddr{"fe80::1%eth0", kDefaultPort});
  for (const char* bad : {"", ":5", "h:", "h:0", "h:65536", "h:x", "[::1", "[::1]x", "[]:5", "[::1]:", "a b", "h:5:", "1:2:3:x", "[h]:5"}) {
    INFO(bad);
    auto r = parse_peer(bad);
    CHECK_FALSE(r.ok());
  }
}

TEST_CASE("size, duration and gid index options", "[rdma][options]") {
  CHECK(*parse_size("65536") == 65536);
  CHECK(*parse_size("64K") == 65536);
  CHECK(*parse_size("1m") == 1048576);
  CHECK(*parse_size("64M") == 64ull << 20);
  for (const char* bad : {"", "0", "65M", "1G", "K", "-1", "1.5K", "12 ", "0x10"}) {
    INFO(bad);
    CHECK_FALSE(parse_size(bad).ok());
  }
  CHECK(*parse_duration("5") == 5.0);
  CHECK(*parse_duration("0.5") == 0.5);
  for (const char* bad : {"", "0", "0.05", "3601", "inf", "nan", "5s", "-1"}) {
    INFO(bad);
    CHECK_FALSE(parse_duration(bad).ok());
  }
  CHECK(*parse_gid_index("3") == 3);
  CHECK_FALSE(parse_gid_index("256").ok());
  CHECK_FALSE(parse_gid_index("-1").ok());
}

TEST_CASE("port rate from verbs width and speed codes", "[rdma][options]") {
  CHECK(port_rate_gbps(2, 32) == 100);  // 4X EDR
  CHECK(port_rate_gbps(2, 64) == 200);  // 4X HDR
  CHECK(port_rate_gbps(2, 128) == 400); // 4X NDR
  CHECK(port_rate_gbps(1, 1) == 2.5);   // 1X SDR
  CHECK(port_rate_gbps(2, 4) == 40);    // 4X QDR
  CHECK(port_rate_gbps(3, 4) == 0);     // unknown width
  CHECK(port_rate_gbps(2, 3) == 0);     // unknown speed
}

TEST_CASE("result JSON: figures when measured, a reason instead when failed", "[rdma][options]") {
  ProbeResult ok;
  ok.status = ProbeStatus::kOk;
  ok.bytes = 1000;
  ok.seconds = 2;
  ok.gbps = 4e-6;
  ok.latency_us = Percentiles{1, 2, 3, 4};
  ok.hca = "rxe0";
  ok.port = 1;
  ok.gid_index = 1;
  ok.gid = "::ffff:10.0.0.1";
  ok.peer = "10.0.0.2:18520";
  auto j = to_json(ok);
  CHECK(j["status"] == "ok");
  CHECK(j["reason"].is_null());
  CHECK(j["bytes"] == 1000);
  CHECK(j["latency_us"]["p50"] == 1.0);
  CHECK(j["latency_us"]["max"] == 4.0);
  for (const char* k : {"bytes", "seconds", "gbps", "latency_us", "hca", "port", "gid_index", "gid", "peer", "status",
                        "reason", "message"})
    CHECK(j.contains(k));

  ProbeResult bad = ok;
  bad.status = ProbeStatus::kFailed;
  bad.reason = Reason::kQpRtrFailed;
  bad.message = "ibv_modify_qp INIT->RTR: Invalid argument";
  auto f = to_json(bad);
  CHECK(f["status"] == "failed");
  CHECK(f["reason"] == "qp_rtr_failed");
  CHECK(f["gbps"].is_null());
  CHECK(f["bytes"].is_null());
  CHECK(f["latency_us"].is_null());
  CHECK(f["hca"] == "rxe0");

  ProbeResult deg = ok;
  deg.status = ProbeStatus::kDegraded;
  deg.reason = Reason::kBelowRate;
  auto d = to_json(deg);
  CHECK(d["status"] == "degraded");
  CHECK(d["reason"] == "below_rate");
  CHECK(d["gbps"] == Approx(4e-6));
}

TEST_CASE("run_probe refuses options that describe no probe", "[rdma][options]") {
  ProbeOptions o;
  o.peer = {"127.0.0.1", 1};
  o.gid_index = 0;
  auto r = run_probe(o);  // no --hca
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("--hca"));
  o.hca = {"rxe0", 1};
  o.key = *Key::parse(std::string(64, 'a'));
  o.window = 0;
  r = run_probe(o);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("window"));
}
