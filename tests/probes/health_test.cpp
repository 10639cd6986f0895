// SPDX-License-Identifier: Apache-2.0
// Health conditions on data: port states, flap histories, counter growth,
// symbol error rates, PCIe links from a sysfs tree, the fabric and GIDs,
// mesh peers' handshakes, and the hold that keeps a flapping condition up.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <optional>

#include "probes/health.hpp"

using namespace fa::probes;
namespace fs = std::filesystem;

namespace {

Port ib_port(int n, const std::string& state = "ACTIVE", double rate = 400) {
  Port p;
  p.port = n;
  p.state = state;
  p.phys_state = state == "ACTIVE" ? "LinkUp" : "Polling";
  p.link_layer = "InfiniBand";
  p.rate_gbps = rate;
  return p;
}

Report ib_report(std::vector<Port> ports) {
  Report r;
  Hca h;
  h.name = "mlx5_0";
  h.ports = std::move(ports);
  r.fabric.kind = "infiniband";
  r.fabric.id = "ib:fe80:0000:0000:0000/sm:0x0002c90300a1b2c3";
  for (const auto& p : h.ports)
    if (p.state == "ACTIVE") r.fabric.ports.push_back("mlx5_0:" + std::to_string(p.port));
  r.hcas.push_back(std::move(h));
  return r;
}

std::vector<std::pair<std::string, PcieLink>> no_pcie(const std::string&, const std::string&) { return {}; }

bool has(const std::vector<Condition>& cs, const std::string& code, const std::string& subject) {
  for (const auto& c : cs)
    if (c.code == code && c.subject == subject) return true;
  return false;
}

std::optional<Condition> find(const std::vector<Condition>& cs, const std::string& code) {
  for (const auto& c : cs)
    if (c.code == code) return c;
  return std::nullopt;
}

struct TempTree {
  fs::path root;
  TempTree() {
    char tmpl[] = "/tmp/fa-health-XXXXXX";
    REQUIRE(::mkdtemp(tmpl));
    root = tmpl;
  }
  ~TempTree() { fs::remove_all(root); }
  void link(const std::string& rel, const char* speed, int width, const char* max_speed, int max_width) {
    fs::path d = root / "devices" / rel;
    fs::create_directories(d);
    std::ofstream(d / "current_link_speed") << speed << "\n";
    std::ofstream(d / "current_link_width") << width << "\n";
    std::ofstream(d / "max_link_speed") << max_speed << "\n";
    std::ofstream(d / "max_link_width") << max_width << "\n";
  }
};

}  // namespace

TEST_CASE("health: a fabric port not ACTIVE/LinkUp is port_down, naming its state") {
  auto r = ib_report({ib_port(1), ib_port(2, "DOWN")});
  auto cs = snapshot_conditions(r, "/nonexistent", {}, 1000, no_pcie);
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].code == "port_down");
  CHECK(cs[0].subject == "mlx5_0:2");
  CHECK(cs[0].evidence == "state DOWN, phys Polling");
  CHECK(cs[0].since_unix == 1000);
}

TEST_CASE("health: ACTIVE but not LinkUp is down too") {
  auto p = ib_port(1);
  p.phys_state = "PortConfigurationTraining";
  auto cs = snapshot_conditions(ib_report({p}), "/nonexistent", {}, 1, no_pcie);
  CHECK(has(cs, "port_down", "mlx5_0:1"));
}

TEST_CASE("health: an Ethernet port of an HCA that carries no fabric port is not watched") {
  Report r;
  Hca h;
  h.name = "mlx5_9";
  Port p;
  p.port = 1;
  p.state = "DOWN";
  p.link_layer = "Ethernet";
  h.ports.push_back(p);
  r.hcas.push_back(h);
  CHECK(snapshot_conditions(r, "/nonexistent", {}, 1, no_pcie).empty());
}

TEST_CASE("health: a pinned RoCE port that left the fabric (its link down) is still watched") {
  Report r;
  Hca h;
  h.name = "rxe0";
  Port p;
  p.port = 1;
  p.state = "DOWN";
  p.phys_state = "Disabled";
  p.link_layer = "Ethernet";
  h.ports.push_back(p);
  r.hcas.push_back(h);
  HealthConfig c;
  CHECK(snapshot_conditions(r, "/nonexistent", c, 1, no_pcie).empty());
  for (const char* pin : {"rxe0", "rxe0:1"}) {
    c.pinned = {pin};
    CHECK(has(snapshot_conditions(r, "/nonexistent", c, 1, no_pcie), "port_down", "rxe0:1"));
  }
}

TEST_CASE("health: a port slower than its fastest sibling is port_slow") {
  auto cs = snapshot_conditions(ib_report({ib_port(1, "ACTIVE", 400), ib_port(2, "ACTIVE", 200)}), "/nonexistent", {},
                                1, no_pcie);
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].code == "port_slow");
  CHECK(cs[0].subject == "mlx5_0:2");
  CHECK(cs[0].evidence == "runs at 200 Gb/s, its siblings at 400 Gb/s");
  CHECK(snapshot_conditions(ib_report({ib_port(1), ib_port(2)}), "/nonexistent", {}, 1, no_pcie).empty());
}

TEST_CASE("health: PCIe trained below min(device max, slot max) along the path, from sysfs") {
  TempTree t;
  auto r = ib_report({ib_port(1)});
  r.hcas[0].pci_path = "pci0000:00/0000:00:01.0/0000:13:00.0";
  SECTION("the device can do Gen5 but the bridge only Gen4: Gen4 x16 is as good as it gets") {
    t.link("pci0000:00/0000:00:01.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    t.link("pci0000:00/0000:00:01.0/0000:13:00.0", "16.0 GT/s PCIe", 16, "32.0 GT/s PCIe", 16);
    CHECK(snapshot_conditions(r, t.root, {}, 1).empty());
  }
  SECTION("trained at Gen3 where both ends do Gen4") {
    t.link("pci0000:00/0000:00:01.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    t.link("pci0000:00/0000:00:01.0/0000:13:00.0", "8.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    auto cs = snapshot_conditions(r, t.root, {}, 1);
    REQUIRE(cs.size() == 1);
    CHECK(cs[0].code == "pcie_degraded");
    CHECK(cs[0].subject == "0000:13:00.0");
    CHECK(cs[0].evidence == "trained x16 at 8 GT/s, the link can do x16 at 16 GT/s");
  }
  SECTION("trained at x8 where both ends do x16") {
    t.link("pci0000:00/0000:00:01.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    t.link("pci0000:00/0000:00:01.0/0000:13:00.0", "16.0 GT/s PCIe", 8, "16.0 GT/s PCIe", 16);
    CHECK(has(snapshot_conditions(r, t.root, {}, 1), "pcie_degraded", "0000:13:00.0"));
  }
  SECTION("a bridge above the device trained low is named as the bridge") {
    t.link("pci0000:00/0000:00:01.0", "2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    t.link("pci0000:00/0000:00:01.0/0000:13:00.0", "16.0 GT/s PCIe", 16, "16.0 GT/s PCIe", 16);
    auto cs = snapshot_conditions(r, t.root, {}, 1);
    REQUIRE(cs.size() == 1);
    CHECK(cs[0].subject == "0000:00:01.0");
  }
  SECTION("unreadable attributes say nothing") {
    CHECK(snapshot_conditions(r, t.root, {}, 1).empty());
  }
}

TEST_CASE("health: gpud's flap rule: down 25 s or more, then up, 3 times in 12 h") {
  Health h;
  int64_t t = 100000;
  auto up = ib_report({ib_port(1)});
  auto down = ib_report({ib_port(1, "DOWN")});
  CHECK(h.observe(up, "/x", {}, t, no_pcie).empty());
  for (int i = 0; i < 3; ++i) {
    auto cs = h.observe(down, "/x", {}, t += 60, no_pcie);
    CHECK(has(cs, "port_down", "mlx5_0:1"));
    cs = h.observe(up, "/x", {}, t += 30, no_pcie);
    CHECK(has(cs, "link_flapping", "mlx5_0:1") == (i == 2));
  }
  auto c = find(h.observe(up, "/x", {}, t += 10, no_pcie), "link_flapping");
  REQUIRE(c);
  CHECK(c->evidence == "3 times down for 25 s or more within 12 h");
}

TEST_CASE("health: short downs do not count for gpud's rule, Azure's 5 losses in 24 h do") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  int64_t t = 100000;
  auto up = ib_report({ib_port(1)});
  auto down = ib_report({ib_port(1, "DOWN")});
  h.observe(up, "/x", {}, t, no_pcie);
  for (int i = 0; i < 5; ++i) {
    h.observe(down, "/x", {}, t += 3600, no_pcie);
    auto cs = h.observe(up, "/x", {}, t += 5, no_pcie);
    CHECK(has(cs, "link_flapping", "mlx5_0:1") == (i == 4));
  }
  auto c = find(h.observe(up, "/x", {}, t += 1, no_pcie), "link_flapping");
  REQUIRE(c);
  CHECK(c->evidence == "5 losses of the link within 24 h");
  // A day later the losses have aged out of the window.
  CHECK_FALSE(has(h.observe(up, "/x", {}, t += 25 * 3600, no_pcie), "link_flapping", "mlx5_0:1"));
}

TEST_CASE("health: link_downed growing between two looks counts as losses of the link") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  auto r = ib_report({ib_port(1)});
  r.hcas[0].ports[0].counters["link_downed"] = 2;
  h.observe(r, "/x", {}, 1000, no_pcie);
  r.hcas[0].ports[0].counters["link_downed"] = 7;
  auto cs = h.observe(r, "/x", {}, 1030, no_pcie);
  CHECK(has(cs, "link_flapping", "mlx5_0:1"));
  auto e = find(cs, "port_errors");
  REQUIRE(e);
  CHECK(e->evidence == "link_downed +5");
}

TEST_CASE("health: an error counter that grows is port_errors, a steady non-zero one is not") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  for (const char* k : {"port_rcv_remote_physical_errors", "excessive_buffer_overrun_errors",
                        "local_link_integrity_errors"}) {
    Health h(cfg);
    auto r = ib_report({ib_port(1)});
    r.hcas[0].ports[0].counters[k] = 40;  // old damage, present at the first look
    CHECK(h.observe(r, "/x", {}, 1000, no_pcie).empty());
    CHECK(h.observe(r, "/x", {}, 1030, no_pcie).empty());
    r.hcas[0].ports[0].counters[k] = 41;
    auto cs = h.observe(r, "/x", {}, 1060, no_pcie);
    REQUIRE(cs.size() == 1);
    CHECK(cs[0].code == "port_errors");
    CHECK(cs[0].evidence == std::string(k) + " +1");
    CHECK(h.observe(r, "/x", {}, 1090, no_pcie).empty());
  }
}

TEST_CASE("health: symbol errors at 200/400G rates seen in service do not fire, more than 120 an hour does") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  auto r = ib_report({ib_port(1)});
  uint64_t v = 1'000'000;  // a large raw count from months of service
  int64_t t = 0;
  // A day at 100 an hour (5 every third minute, looked at every 30 s):
  // normal at these rates.
  for (int i = 0; i < 24 * 120; ++i) {
    r.hcas[0].ports[0].counters["symbol_error"] = v += (i % 6 == 0 ? 5 : 0);
    CHECK(h.observe(r, "/x", {}, t += 30, no_pcie).empty());
  }
  // Then a burst: 121 within the hour.
  r.hcas[0].ports[0].counters["symbol_error"] = v += 121;
  auto cs = h.observe(r, "/x", {}, t += 30, no_pcie);
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].code == "symbol_errors");
}

TEST_CASE("health: a condition keeps its first evidence and time, and stays the hold after it clears") {
  Health h;  // hold 300 s
  auto up = ib_report({ib_port(1)});
  auto down = ib_report({ib_port(1, "DOWN")});
  h.observe(up, "/x", {}, 1000, no_pcie);
  h.observe(down, "/x", {}, 1030, no_pcie);
  auto down2 = down;
  down2.hcas[0].ports[0].phys_state = "Disabled";
  auto cs = h.observe(down2, "/x", {}, 1060, no_pcie);
  REQUIRE(cs.size() == 1);
  CHECK(cs[0].since_unix == 1030);
  CHECK(cs[0].evidence == "state DOWN, phys Polling");
  CHECK(h.observe(up, "/x", {}, 1090, no_pcie).size() == 1);  // cleared 0 s ago: held
  CHECK(h.observe(up, "/x", {}, 1060 + 299, no_pcie).size() == 1);
  CHECK(h.observe(up, "/x", {}, 1060 + 300, no_pcie).empty());
}

TEST_CASE("health: a port whose device is gone stays watched") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  h.observe(ib_report({ib_port(1)}), "/x", {}, 1000, no_pcie);
  Report gone;
  auto c = find(h.observe(gone, "/x", {}, 1030, no_pcie), "port_down");
  REQUIRE(c);
  CHECK(c->subject == "mlx5_0:1");
  CHECK(c->evidence == "the device is gone");
}

TEST_CASE("health: the fabric id changing is fabric_changed") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  auto r = ib_report({ib_port(1)});
  h.observe(r, "/x", {}, 1000, no_pcie);
  r.fabric.id = "ib:fe80:0000:0000:0000/sm:0x0002c90300ffffff";
  auto c = find(h.observe(r, "/x", {}, 1030, no_pcie), "fabric_changed");
  REQUIRE(c);
  CHECK(c->evidence == "was ib:fe80:0000:0000:0000/sm:0x0002c90300a1b2c3, now ib:fe80:0000:0000:0000/sm:0x0002c90300ffffff");
}

TEST_CASE("health: the GID NCCL uses changing under a running mesh is gid_changed, without a mesh it is not") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Report r;
  Hca hc;
  hc.name = "rxe0";
  Port p;
  p.port = 1;
  p.state = "ACTIVE";
  p.phys_state = "LinkUp";
  p.link_layer = "Ethernet";
  p.gids = {{3, "0000:0000:0000:0000:0000:ffff:0a14:000b", "RoCE v2", "eth1"}};
  hc.ports.push_back(p);
  r.hcas.push_back(hc);
  r.fabric.kind = "roce";
  r.fabric.ports = {"rxe0:1"};
  r.nccl.ib_gid_index = "3";
  std::vector<PeerSeen> peers = {{"peerkey", 990}};
  Health h(cfg);
  CHECK(h.observe(r, "/x", peers, 1000, no_pcie).empty());
  auto changed = r;
  changed.hcas[0].ports[0].gids[0].gid = "0000:0000:0000:0000:0000:ffff:0a14:000c";
  CHECK(has(h.observe(changed, "/x", peers, 1030, no_pcie), "gid_changed", "rxe0:1"));
  Health no_mesh(cfg);
  no_mesh.observe(r, "/x", {}, 1000, no_pcie);
  CHECK(no_mesh.observe(changed, "/x", {}, 1030, no_pcie).empty());
}

TEST_CASE("health: a peer whose last handshake is older than 180 s is peer_down, and back when it returns") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  Report r;
  CHECK(h.observe(r, "/x", {{"k1", 1000}}, 1100, no_pcie).empty());
  CHECK(h.observe(r, "/x", {{"k1", 1000}}, 1180, no_pcie).empty());
  auto c = find(h.observe(r, "/x", {{"k1", 1000}}, 1181, no_pcie), "peer_down");
  REQUIRE(c);
  CHECK(c->subject == "peer k1");
  CHECK(c->evidence == "last handshake 181 s ago");
  CHECK(h.observe(r, "/x", {{"k1", 1200}}, 1210, no_pcie).empty());
}

TEST_CASE("health: a peer never heard from is down 180 s after it was first listed") {
  HealthConfig cfg;
  cfg.hold_seconds = 0;
  Health h(cfg);
  Report r;
  CHECK(h.observe(r, "/x", {{"k2", 0}}, 5000, no_pcie).empty());
  CHECK(h.observe(r, "/x", {{"k2", 0}}, 5180, no_pcie).empty());
  CHECK(has(h.observe(r, "/x", {{"k2", 0}}, 5181, no_pcie), "peer_down", "peer k2"));
  // Removed from the mesh: nothing more to say about it.
  CHECK(h.observe(r, "/x", {}, 5200, no_pcie).empty());
}

TEST_CASE("health: the line a person reads names device, code, evidence and time") {
  Condition c{"port_down", "mlx5_0:1", "state DOWN, phys Polling", 1796212800};
  CHECK(condition_line(c) == "mlx5_0:1: port_down: state DOWN, phys Polling (since 2026-12-02T12:00:00Z)");
  auto j = to_json({c});
  CHECK(j.dump() ==
        R"([{"code":"port_down","evidence":"state DOWN, phys Polling","since_unix":1796212800,"subject":"mlx5_0:1"}])");
}
