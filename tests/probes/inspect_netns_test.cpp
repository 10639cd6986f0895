// SPDX-License-Identifier: Apache-2.0
// The whole binary against the fixture trees, with addresses and routes from
// real rtnetlink: each test builds a network namespace with dummy interfaces
// named as in the fixture, carrying its addresses and default route, and
// runs `fabric-agent inspect --json` inside it.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

std::string fx(const char* name) { return std::string(FA_FIXTURES_DIR) + "/" + name; }

std::string binary() {
  const char* b = std::getenv("FA_BINARY");
  REQUIRE(b != nullptr);
  return b;
}

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

struct Run {
  int rc = -1;
  std::string out;
};

Run capture(const std::string& cmd) {
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A uniquely named namespace (pid + counter), deleted even when a check fails.
class Netns {
 public:
  Netns() {
    static std::atomic<int> n{0};
    name_ = "fa-probes-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    REQUIRE(sh("ip netns add " + name_) == 0);
    run("ip link set lo up");
  }
  ~Netns() { sh("ip netns del " + name_); }
  Netns(const Netns&) = delete;
  Netns& operator=(const Netns&) = delete;

  void run(const std::string& cmd) {
    INFO("in " << name_ << ": " << cmd);
    REQUIRE(sh("ip netns exec " + name_ + " " + cmd) == 0);
  }
  // A dummy interface; where the kernel has no dummy driver (this host's),
  // one end of a veth pair whose peer stays in the namespace. Discovery only
  // sees names, IFF_UP, addresses and routes, which both carry the same way.
  void dummy(const std::string& ifname, const std::string& cidr = "", bool up = true) {
    if (sh("ip netns exec " + name_ + " ip link add " + ifname + " type dummy") != 0) {
      std::string peer = "fapeer" + std::to_string(peers_++);
      run("ip link add " + ifname + " type veth peer name " + peer);
      run("ip link set " + peer + " up");
    }
    if (!cidr.empty()) run("ip addr add " + cidr + " dev " + ifname);
    if (up) run("ip link set " + ifname + " up");
  }
  json inspect(const std::string& root, const std::string& extra = "") {
    Run r = capture("ip netns exec " + name_ + " " + binary() + " inspect --sysfs-root " + root + " --json " +
                    extra);
    INFO(r.out);
    REQUIRE(r.rc == 0);
    return json::parse(r.out);
  }
  // VLAN netdev over `lower`; without 8021q in the kernel, an interface of
  // the same name (the agent reads the GID's ndev name, not the link kind).
  void vlan(const std::string& lower, const std::string& ifname, int id) {
    if (sh("ip netns exec " + name_ + " ip link add link " + lower + " name " + ifname + " type vlan id " +
           std::to_string(id)) != 0) {
      WARN("no 8021q in this kernel: " << ifname << " is a veth, not a VLAN");
      dummy(ifname, "", false);
    }
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int peers_ = 0;
};

// A config file in a private temp dir, removed afterwards.
class TempConfig {
 public:
  explicit TempConfig(const std::string& yaml) {
    char tmpl[] = "/tmp/fa-probes-cfg-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/agent.yaml";
    std::ofstream(path_) << yaml;
  }
  ~TempConfig() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  std::string arg() const { return "--config " + path_; }

 private:
  std::string dir_, path_;
};

bool has_warning(const json& j, const std::string& needle) {
  for (const auto& w : j["warnings"])
    if (w.get<std::string>().find(needle) != std::string::npos) return true;
  return false;
}

TempConfig empty_config() { return TempConfig("{}\n"); }

}  // namespace

TEST_CASE("fixture a: InfiniBand fabric, exact-match NCCL_IB_HCA, internet card left out") {
  Netns ns;
  ns.dummy("ens5f0np0", "203.0.113.10/24");
  ns.dummy("ens5f1np1", "", false);
  ns.run("ip route add default via 203.0.113.1 dev ens5f0np0");
  auto cfg = empty_config();
  json j = ns.inspect(fx("a-ib-8gpu"), cfg.arg());

  CHECK(j["fabric"]["kind"] == "infiniband");
  CHECK(j["fabric"]["ports"] ==
        json({"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_4:1", "mlx5_5:1", "mlx5_6:1", "mlx5_7:1"}));
  CHECK(j["nccl_env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  CHECK(j["nccl_env"]["NCCL_IB_GID_INDEX"].is_null());
  CHECK(j["nccl_env"]["NCCL_SOCKET_IFNAME"] == "wg0");
  CHECK(j["fabric"]["subnet_prefix"] == "fe80:0000:0000:0000");
  CHECK(j["fabric"]["sm_lid"] == 1);
  // SMInfo cannot reach fixture devices: no GUID, no id, and a warning why.
  CHECK(j["fabric"]["sm_guid"].is_null());
  CHECK(j["fabric"]["id"].is_null());
  CHECK(has_warning(j, "sm_guid unknown: SMInfo not sent"));
  CHECK_FALSE(has_warning(j, "several fabrics"));

  REQUIRE(j["hcas"].size() == 10);
  CHECK(j["hcas"][8]["name"] == "mlx5_10");  // natural order
  const json& h0 = j["hcas"][0];
  CHECK(h0["name"] == "mlx5_0");
  CHECK(h0["node_guid"] == "a088:c203:00b1:2c40");
  CHECK(h0["fw_ver"] == "28.39.1002");
  CHECK(h0["pci"] == "0000:13:00.0");
  CHECK(h0["numa_node"] == 0);
  const json& p0 = h0["ports"][0];
  CHECK(p0["state"] == "ACTIVE");
  CHECK(p0["link_layer"] == "InfiniBand");
  CHECK(p0["rate_gbps"] == 400);
  CHECK(p0["lid"] == 17);
  CHECK(p0["gids"] == json::parse(R"([{"index":0,"gid":"fe80:0000:0000:0000:a088:c203:00b1:2c40",
                                        "type":"IB/RoCE v1","netdev":null}])"));
  CHECK(j["hcas"][3]["ports"][0]["state"] == "DOWN");
  CHECK(j["hcas"][8]["ports"][0]["gids"][3]["type"] == "RoCE v2");

  CHECK(j["gpus"]["count"] == 8);
  CHECK(j["gpus"]["vendor"] == "nvidia");
  CHECK(j["gpus"]["model"] == "H100 SXM5 80GB");
  CHECK(j["gpus"]["devices"][0]["pci"] == "0000:12:00.0");
  CHECK(j["gpus"]["devices"][0]["nearest_hca"] == "mlx5_0");
  CHECK(j["gpus"]["devices"][3]["nearest_hca"] == "mlx5_0");  // its own switch's HCA is DOWN
  CHECK(j["gpus"]["devices"][7]["nearest_hca"] == "mlx5_7");
  CHECK(j["gpus"]["devices"][7]["numa_node"] == 1);

  CHECK(j["counters"]["mlx5_0:1"]["counters"]["port_xmit_data"] == 1234567890);
  CHECK(j["counters"]["mlx5_5:1"]["counters"]["symbol_error"] == 3);
  CHECK(j["reasons"]["NCCL_IB_HCA"].get<std::string>().find("exact") != std::string::npos);
  CHECK(j["reasons"]["fabric"].get<std::string>().find(
            "mlx5_10:1 GID 3 (203.0.113.10 on ens5f0np0): carries the "
            "default route") != std::string::npos);
}

TEST_CASE("fixture a without a default route on the management card: it becomes a second fabric and loses") {
  Netns ns;
  ns.dummy("ens5f0np0", "203.0.113.10/24");
  auto cfg = empty_config();
  json j = ns.inspect(fx("a-ib-8gpu"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "infiniband");
  CHECK(has_warning(j, "several fabrics"));
  CHECK(has_warning(j, "203.0.113.0/24"));
}

TEST_CASE("fixture a as a table for a person") {
  Netns ns;
  auto cfg = empty_config();
  Run r = capture("ip netns exec " + ns.name() + " " + binary() + " inspect --sysfs-root " + fx("a-ib-8gpu") +
                  " " + cfg.arg());
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("fabric    infiniband") != std::string::npos);
  CHECK(r.out.find("NCCL_IB_HCA==mlx5_0:1,") != std::string::npos);
  CHECK(r.out.find("8 x H100 SXM5 80GB") != std::string::npos);
}

TEST_CASE("fixture b: RoCE GID index is the fabric card's, not the internet card's lower one") {
  Netns ns;
  ns.dummy("enp1s0f0np0", "198.51.100.20/24");
  ns.run("ip route add default via 198.51.100.1 dev enp1s0f0np0");
  ns.dummy("ens3np0", "10.20.0.11/16");
  ns.dummy("ens4np0", "10.20.0.12/16");
  ns.dummy("ens5np0", "10.20.0.13/16");
  TempConfig cfg("provider_id: prov-test\n");
  json j = ns.inspect(fx("b-roce"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "roce");
  CHECK(j["fabric"]["ports"] == json({"mlx5_1:1", "mlx5_2:1", "mlx5_3:1"}));
  CHECK(j["nccl_env"]["NCCL_IB_HCA"] == "=mlx5_1:1,mlx5_2:1,mlx5_3:1");
  CHECK(j["nccl_env"]["NCCL_IB_GID_INDEX"] == "5");
  CHECK(j["fabric"]["segment"] == "10.20.0.0/16");
  CHECK(j["fabric"]["address"] == "10.20.0.11");
  CHECK(j["fabric"]["netdev"] == "ens3np0");
  CHECK(j["fabric"]["id"] == "roce:prov-test:10.20.0.0/16");
  CHECK(j["fabric"]["sm_guid"].is_null());
  CHECK(has_warning(j, "mlx5_2:1 (GID 3)"));
  CHECK(has_warning(j, "NCCL_IB_ADDR_RANGE=10.20.0.0/16"));
  CHECK(j["hcas"][1]["ports"][0]["netdev"] == "ens3np0");
  CHECK(j["counters"]["mlx5_3:1"]["hw_counters"]["np_cnp_sent"] == 126);
  CHECK(j["gpus"]["model"] == "L40S");
}

TEST_CASE("fixture b: a fabric netdev that is down drops its port") {
  Netns ns;
  ns.dummy("enp1s0f0np0", "198.51.100.20/24");
  ns.run("ip route add default via 198.51.100.1 dev enp1s0f0np0");
  ns.dummy("ens3np0", "10.20.0.11/16", false);
  ns.dummy("ens4np0", "10.20.0.12/16");
  ns.dummy("ens5np0", "10.20.0.13/16");
  auto cfg = empty_config();
  json j = ns.inspect(fx("b-roce"), cfg.arg());
  CHECK(j["fabric"]["ports"] == json({"mlx5_2:1", "mlx5_3:1"}));
  CHECK(j["fabric"]["id"].is_null());
  CHECK(has_warning(j, "provider_id is not set"));
  CHECK(j["reasons"]["fabric"].get<std::string>().find("ens3np0): netdev is down") != std::string::npos);
}

TEST_CASE("fixture c: fabric address on a VLAN netdev over the port") {
  Netns ns;
  ns.dummy("ens1f0np0");
  ns.vlan("ens1f0np0", "ens1f0np0.100", 100);
  ns.run("ip addr add 10.30.0.5/24 dev ens1f0np0.100");
  ns.run("ip link set ens1f0np0.100 up");
  ns.dummy("eno1", "192.0.2.50/24");
  ns.run("ip route add default via 192.0.2.1 dev eno1");
  TempConfig cfg("provider_id: p1\noverlay:\n  interface: wg7\n");
  json j = ns.inspect(fx("c-roce-vlan"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "roce");
  CHECK(j["fabric"]["netdev"] == "ens1f0np0.100");
  CHECK(j["hcas"][0]["ports"][0]["netdev"] == "ens1f0np0");
  CHECK(j["fabric"]["segment"] == "10.30.0.0/24");
  CHECK(j["nccl_env"]["NCCL_IB_GID_INDEX"] == "5");
  CHECK(j["nccl_env"]["NCCL_SOCKET_IFNAME"] == "wg7");
  CHECK(j["fabric"]["id"] == "roce:p1:10.30.0.0/24");
}

TEST_CASE("fixture c: config pins the fabric netdev and the HCAs") {
  Netns ns;
  ns.dummy("ens1f0np0");
  ns.vlan("ens1f0np0", "ens1f0np0.100", 100);
  ns.run("ip addr add 10.30.0.5/24 dev ens1f0np0.100");
  ns.run("ip link set ens1f0np0.100 up");
  {
    TempConfig cfg("fabric:\n  netdev: ens1f0np0.100\n  hcas: [mlx5_0:1]\n");
    json j = ns.inspect(fx("c-roce-vlan"), cfg.arg());
    CHECK(j["fabric"]["ports"] == json({"mlx5_0:1"}));
  }
  {
    TempConfig cfg("fabric:\n  netdev: eth9\n");
    json j = ns.inspect(fx("c-roce-vlan"), cfg.arg());
    CHECK(j["fabric"]["kind"] == "none");
    CHECK(has_warning(j, "configured fabric.netdev eth9"));
  }
  {
    TempConfig cfg("fabric:\n  hcas: [mlx5_9]\n");
    json j = ns.inspect(fx("c-roce-vlan"), cfg.arg());
    CHECK(j["fabric"]["kind"] == "none");
    CHECK(j["reasons"]["fabric"].get<std::string>().find("not in the configured fabric.hcas") !=
          std::string::npos);
  }
}

TEST_CASE("fixture d: no HCAs, kind none, exit 0") {
  Netns ns;
  auto cfg = empty_config();
  json j = ns.inspect(fx("d-none"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "none");
  CHECK(j["hcas"].empty());
  CHECK(j["gpus"]["count"] == 0);
  CHECK(j["nccl_env"]["NCCL_IB_HCA"].is_null());
  CHECK(j["warnings"].empty());
}

TEST_CASE("fixture e: damaged trees warn with paths and still answer") {
  Netns ns;
  auto cfg = empty_config();
  json j = ns.inspect(fx("e-damaged"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "none");
  CHECK(j["hcas"].size() == 4);
  CHECK(has_warning(j, "e-damaged/class/infiniband/mlx5_0/ports/1/rate"));
  CHECK(has_warning(j, "e-damaged/class/infiniband/mlx5_1/ports/1/state"));
  CHECK(has_warning(j, "RoCE port without a netdev"));
  CHECK(j["hcas"][0]["ports"][0]["rate_gbps"].is_null());
}

TEST_CASE("bad config: inspect refuses with the file position") {
  TempConfig cfg("fabric:\n  netdevv: eth0\n");
  Run r = capture(binary() + " inspect --sysfs-root " + fx("d-none") + " " + cfg.arg() + " 2>&1");
  CHECK(r.rc == 2);
  CHECK(r.out.find("agent.yaml:2:") != std::string::npos);
}

TEST_CASE("fixture f: the real rxe0 dump on vethA 192.168.77.1/24 is a RoCE fabric at GID 1") {
  Netns ns;
  ns.dummy("vethA", "192.168.77.1/24");
  ns.dummy("eth0", "10.0.2.15/24");
  ns.run("ip route add default via 10.0.2.2 dev eth0");
  TempConfig cfg("provider_id: lab\n");
  json j = ns.inspect(fx("f-rxe"), cfg.arg());
  CHECK(j["warnings"].empty());
  CHECK(j["fabric"]["kind"] == "roce");
  CHECK(j["fabric"]["ports"] == json({"rxe0:1"}));
  CHECK(j["fabric"]["id"] == "roce:lab:192.168.77.0/24");
  CHECK(j["fabric"]["address"] == "192.168.77.1");
  CHECK(j["fabric"]["netdev"] == "vethA");
  CHECK(j["nccl_env"]["NCCL_IB_HCA"] == "=rxe0:1");
  CHECK(j["nccl_env"]["NCCL_IB_GID_INDEX"] == "1");
  const json& h = j["hcas"][0];
  CHECK(h["name"] == "rxe0");
  CHECK(h["node_guid"] == "1c95:bcff:fea6:281c");
  CHECK(h["fw_ver"].is_null());  // rxe writes an empty fw_ver
  CHECK(h["pci"].is_null());
  CHECK(h["ports"][0]["rate_gbps"] == 10);
  CHECK(h["ports"][0]["gids"].size() == 2);  // 1022 empty slots skipped
  CHECK(j["counters"]["rxe0:1"]["hw_counters"]["lifespan"] == 12);
}

namespace {

// The rail host's netdevs: NIC k's on rail k (10.0.k.11/24), the front-end
// card with the default route.
void rail_links(Netns& ns) {
  for (int k = 0; k < 8; ++k)
    ns.dummy("ens1" + std::to_string(k) + "np0", "10.0." + std::to_string(k) + ".11/24");
  ns.dummy("ens20f0np0", "198.51.100.30/24");
  ns.run("ip route add default via 198.51.100.1 dev ens20f0np0");
}

const char* kRailsId =
    "roce:prov-r:10.0.0.0/24,10.0.1.0/24,10.0.2.0/24,10.0.3.0/24,10.0.4.0/24,10.0.5.0/24,10.0.6.0/24,"
    "10.0.7.0/24";

}  // namespace

TEST_CASE("fixture g: 8 rails on 8 subnets are one fabric, every rail NIC in NCCL_IB_HCA") {
  Netns ns;
  rail_links(ns);
  TempConfig cfg("provider_id: prov-r\n");
  json j = ns.inspect(fx("g-roce-rails"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "roce");
  CHECK(j["fabric"]["ports"] == json({"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1",
                                      "mlx5_6:1", "mlx5_7:1"}));
  CHECK(j["nccl_env"]["NCCL_IB_HCA"] ==
        "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  CHECK(j["nccl_env"]["NCCL_IB_GID_INDEX"] == "3");
  CHECK(j["fabric"]["id"] == kRailsId);
  CHECK(j["fabric"]["segment"] == "10.0.0.0/24");
  CHECK(j["fabric"]["address"] == "10.0.0.11");
  REQUIRE(j["fabric"]["rails"].size() == 8);
  const json& r5 = j["fabric"]["rails"][5];
  CHECK(r5["segment"] == "10.0.5.0/24");
  REQUIRE(r5["ports"].size() == 1);
  json p5 = r5["ports"][0];
  CHECK(p5["port"] == "mlx5_5:1");
  CHECK(p5["state"] == "ACTIVE");
  CHECK(p5["netdev"] == "ens15np0");
  CHECK(p5["address"] == "10.0.5.11");
  CHECK(p5["gid_index"] == 3);
  // The netdevs here are dummies or veths: no DCB in their driver, so
  // lossless is unknown and says why; mlx5's ECN switches come from sysfs.
  CHECK(p5["lossless"]["state"] == "unknown");
  CHECK(p5["lossless"]["reason"].get<std::string>().find("ens15np0: the driver has no DCB support") !=
        std::string::npos);
  CHECK(p5["lossless"]["ecn_np"] == json({3}));
  CHECK(p5["lossless"]["ecn_rp"] == json({3}));
  CHECK(j["fabric"]["lossless"] == "unknown");
  CHECK(j["nccl_env"]["NCCL_IB_TC"].is_null());
  // The front-end card (default route) is no rail, and no warning is needed.
  CHECK(j["reasons"]["fabric"].get<std::string>().find(
            "mlx5_8:1 GID 3 (198.51.100.30 on ens20f0np0): carries the "
            "default route") != std::string::npos);
  CHECK_FALSE(has_warning(j, "several fabrics"));
  CHECK_FALSE(has_warning(j, "disagree"));
  CHECK(j["gpus"]["count"] == 8);
  for (int k = 0; k < 8; ++k) CHECK(j["gpus"]["devices"][k]["nearest_hca"] == "mlx5_" + std::to_string(k));
}

TEST_CASE(
    "fixture h: one rail down keeps the fabric id, leaves NCCL_IB_HCA, and GID indexes that differ are "
    "named") {
  Netns ns;
  rail_links(ns);
  TempConfig cfg("provider_id: prov-r\n");
  json j = ns.inspect(fx("h-roce-rails-down"), cfg.arg());
  CHECK(j["fabric"]["kind"] == "roce");
  CHECK(j["fabric"]["id"] == kRailsId);  // the same fabric as its healthy peers
  CHECK(j["nccl_env"]["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  CHECK(j["fabric"]["rails"][3]["ports"][0]["state"] == "DOWN");
  CHECK(has_warning(j, "rail 10.0.3.0/24 has no ACTIVE port: mlx5_3:1 (DOWN)"));
  CHECK(j["nccl_env"]["NCCL_IB_GID_INDEX"] == "3");
  CHECK(j["fabric"]["rails"][5]["ports"][0]["gid_index"] == 5);
  CHECK(has_warning(j, "NCCL_IB_GID_INDEX=3 is wrong for mlx5_5:1 (GID 5)"));
  CHECK(has_warning(j, "NCCL_IB_ADDR_RANGE=10.0.0.0/21"));
  CHECK(j["fabric"]["rails"][6]["ports"][0]["lossless"]["ecn_np"] == json::array());

  // The table shows the rails, the one down and the lossless verdict at a glance.
  Run t = capture("ip netns exec " + ns.name() + " " + binary() + " inspect --sysfs-root " +
                  fx("h-roce-rails-down") + " " + cfg.arg());
  REQUIRE(t.rc == 0);
  CHECK(t.out.find("          8 rails:\n") != std::string::npos);
  CHECK(t.out.find(
            "            10.0.3.0/24        mlx5_3:1 ens13np0 10.0.3.11 GID 3 DOWN lossless unknown\n") !=
        std::string::npos);
  CHECK(t.out.find("            10.0.5.0/24        mlx5_5:1 ens15np0 10.0.5.11 GID 5 lossless unknown\n") !=
        std::string::npos);
  CHECK(t.out.find("          lossless unknown: mlx5_0:1: ens10np0: the driver has no DCB support") !=
        std::string::npos);
}

TEST_CASE("DCB on a real veth: lossless is unknown with the driver's answer, on InfiniBand yes by design") {
  Netns ns;
  ns.run("ip link add vethA type veth peer name vethB");
  ns.run("ip addr add 192.168.77.1/24 dev vethA");
  ns.run("ip link set vethA up");
  ns.run("ip link set vethB up");
  TempConfig cfg("provider_id: lab\n");
  json j = ns.inspect(fx("f-rxe"), cfg.arg());
  REQUIRE(j["fabric"]["kind"] == "roce");
  const json& l = j["fabric"]["rails"][0]["ports"][0]["lossless"];
  CHECK(l["state"] == "unknown");
  CHECK(l["reason"] ==
        "vethA: the driver has no DCB support (RTM_GETDCB: Operation not supported), so PFC and "
        "the priority map cannot be read");
  CHECK(l["ecn_np"].is_null());  // rxe over a veth: no ECN switches in sysfs
  CHECK(l["pfc_priorities"] == json::array());
  CHECK(j["fabric"]["lossless"] == "unknown");
  CHECK(j["fabric"]["lossless_reason"].get<std::string>().find(
            "rxe0:1: vethA: the driver has no DCB support") != std::string::npos);
  CHECK_FALSE(has_warning(j, "not lossless"));

  auto cfg2 = empty_config();
  json ib = ns.inspect(fx("a-ib-8gpu"), cfg2.arg());
  CHECK(ib["fabric"]["lossless"] == "yes");
}

namespace {

// A private directory for lldpd's socket and startup commands, readable by
// lldpd's own user (lldpcli, which lldpd runs at start, is setuid _lldpd).
class LldpDir {
 public:
  LldpDir() {
    char tmpl[] = "/tmp/fa-lldp-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    REQUIRE(::chmod(dir_.c_str(), 0755) == 0);
  }
  ~LldpDir() { sh("rm -rf " + dir_); }
  LldpDir(const LldpDir&) = delete;
  LldpDir& operator=(const LldpDir&) = delete;
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

// A real lldpd (Debian's) in a namespace, in the foreground and its own
// process group (lldpd runs as a privileged monitor and an unprivileged
// child; both are signalled), sending an LLDP frame every second.
class Lldpd {
 public:
  Lldpd(const Netns& ns, const LldpDir& dir, const std::string& name, const std::vector<std::string>& conf)
      : socket_(dir.path(name + ".sock")) {
    std::string conf_path = dir.path(name + ".conf");
    {
      std::ofstream c(conf_path);
      c << "configure lldp tx-interval 1\n";
      for (const auto& l : conf) c << l << "\n";
    }
    REQUIRE(::chmod(conf_path.c_str(), 0644) == 0);
    std::string log = dir.path(name + ".log");
    std::vector<std::string> args = {"ip", "netns", "exec",  ns.name(), "lldpd",
                                     "-d", "-u",    socket_, "-O",      conf_path};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&at, 0);
    int rc = ::posix_spawnp(&pid_, "ip", &fa, &at, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    REQUIRE(rc == 0);
  }
  ~Lldpd() {
    ::kill(-pid_, SIGCONT);
    ::kill(-pid_, SIGTERM);
    int st;
    ::waitpid(pid_, &st, 0);
  }
  Lldpd(const Lldpd&) = delete;
  Lldpd& operator=(const Lldpd&) = delete;
  const std::string& socket() const { return socket_; }
  void stop() { REQUIRE(::kill(-pid_, SIGSTOP) == 0); }
  // Until lldpd answers lldpcli (at most 15 s).
  void wait_ready() {
    for (int i = 0; i < 150; ++i) {
      if (sh("lldpcli -u " + socket_ + " show interfaces") == 0) return;
      ::usleep(100 * 1000);
    }
    FAIL("lldpd at " << socket_ << " did not answer within 15 s");
  }
  // Until lldpd, asked with lldpcli, has heard a neighbour on `ifname` (at
  // most 15 s).
  void wait_neighbor(const std::string& ifname = "vethA") {
    for (int i = 0; i < 150; ++i) {
      if (sh("lldpcli -u " + socket_ + " -f keyvalue show neighbors ports " + ifname +
             " | grep -q '^lldp\\." + ifname + "\\.chassis\\.'") == 0)
        return;
      ::usleep(100 * 1000);
    }
    FAIL("lldpd at " << socket_ << " heard no neighbour on " << ifname << " within 15 s");
  }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

std::string link_mac(const Netns& ns, const std::string& ifname) {
  Run r = capture("ip netns exec " + ns.name() + " cat /sys/class/net/" + ifname + "/address");
  REQUIRE(r.rc == 0);
  return r.out.substr(0, r.out.find('\n'));
}

// A host's netdev `port` cabled to port `swport` of a switch namespace
// (fixture f by default: rxe0 on vethA, 192.168.77.1/24).
struct CabledHost {
  Netns host, sw;
  explicit CabledHost(const std::string& swport, const std::string& port = "vethA",
                      const std::string& cidr = "192.168.77.1/24") {
    host.run("ip link add " + port + " type veth peer name " + swport + " netns " + sw.name());
    if (!cidr.empty()) host.run("ip addr add " + cidr + " dev " + port);
    host.run("ip link set " + port + " up");
    sw.run("ip link set " + swport + " up");
  }
};

// The switch's lldpd calls itself `name` and names its ports by interface
// name, as switches do.

std::vector<std::string> switch_conf(const std::string& name) {
  return {"configure system hostname " + name, "configure lldp portidsubtype ifname"};
}

std::string lldp_config(const std::string& socket) {
  return "provider_id: lab\nfabric:\n  lldpd_socket: " + socket + "\n";
}

}  // namespace

TEST_CASE("LLDP: two RoCE hosts on one segment, cabled to different switches, name their switch and port") {
  LldpDir dir;
  CabledHost a("swp7"), b("swp9");
  Lldpd leaf1(a.sw, dir, "leaf1", switch_conf("leaf-01")), leaf2(b.sw, dir, "leaf2", switch_conf("leaf-02"));
  Lldpd ha(a.host, dir, "host-a", {}), hb(b.host, dir, "host-b", {});
  ha.wait_neighbor();
  hb.wait_neighbor();

  TempConfig ca(lldp_config(ha.socket())), cb(lldp_config(hb.socket()));
  json ja = a.host.inspect(fx("f-rxe"), ca.arg());
  json jb = b.host.inspect(fx("f-rxe"), cb.arg());
  // One fabric (one segment) by id, but visibly not one switch.
  CHECK(ja["fabric"]["id"] == "roce:lab:192.168.77.0/24");
  CHECK(jb["fabric"]["id"] == ja["fabric"]["id"]);
  CHECK(ja["fabric"]["lldp_reason"].is_null());
  CHECK(ja["fabric"]["rails"][0]["ports"][0]["lldp"] ==
        json::parse(R"([{"chassis_id": ")" + link_mac(a.sw, "swp7") + R"(", "chassis_id_subtype": "mac",
                         "system_name": "leaf-01", "port_id": "swp7", "port_id_subtype": "ifname",
                         "port_descr": "swp7"}])"));
  const json& nb = jb["fabric"]["rails"][0]["ports"][0]["lldp"];
  REQUIRE(nb.size() == 1);
  CHECK(nb[0]["system_name"] == "leaf-02");
  CHECK(nb[0]["chassis_id"] == link_mac(b.sw, "swp9"));
  CHECK(nb[0]["port_id"] == "swp9");

  Run t = capture("ip netns exec " + a.host.name() + " " + binary() + " inspect --sysfs-root " + fx("f-rxe") +
                  " " + ca.arg());
  CHECK(t.out.find("rxe0:1 vethA 192.168.77.1 GID 1 lossless unknown switch leaf-01 swp7\n") !=
        std::string::npos);
}

TEST_CASE("LLDP: the neighbour of a VLAN fabric netdev is the one heard on the port's own netdev") {
  LldpDir dir;
  CabledHost a("swp3", "ens1f0np0", "");
  a.host.vlan("ens1f0np0", "ens1f0np0.100", 100);
  a.host.run("ip addr add 10.30.0.5/24 dev ens1f0np0.100");
  a.host.run("ip link set ens1f0np0.100 up");
  Lldpd leaf(a.sw, dir, "leaf", switch_conf("leaf-03"));
  Lldpd h(a.host, dir, "host", {});
  h.wait_neighbor("ens1f0np0");
  TempConfig cfg(lldp_config(h.socket()));
  json j = a.host.inspect(fx("c-roce-vlan"), cfg.arg());
  const json& p = j["fabric"]["rails"][0]["ports"][0];
  CHECK(p["netdev"] == "ens1f0np0.100");
  REQUIRE(p["lldp"].size() == 1);
  CHECK(p["lldp"][0]["system_name"] == "leaf-03");
  CHECK(p["lldp"][0]["port_id"] == "swp3");
}

TEST_CASE(
    "LLDP under the service's privileges: lldpcli and lldpd's socket need their groups, and the reason says "
    "so") {
  LldpDir dir;
  CabledHost a("swp7");
  Lldpd leaf(a.sw, dir, "leaf", switch_conf("leaf-01"));
  Lldpd h(a.host, dir, "host", {});
  h.wait_neighbor();
  TempConfig cfg(lldp_config(h.socket()));
  // The unit's CapabilityBoundingSet (root without CAP_DAC_OVERRIDE) and
  // NoNewPrivileges (lldpcli's setuid bit does not apply).
  std::string unit = "setpriv --no-new-privs --bounding-set=-all,+net_admin,+sys_admin --inh-caps=-all ";
  auto inspect = [&](const std::string& groups) {
    Run r = capture("ip netns exec " + a.host.name() + " " + unit + groups + " " + binary() +
                    " inspect --sysfs-root " + fx("f-rxe") + " --json " + cfg.arg());
    REQUIRE(r.rc == 0);
    return json::parse(r.out);
  };
  const std::string hint =
      ": run the agent with the groups adm _lldpd (systemd: SupplementaryGroups=adm _lldpd in a drop-in)";

  json j = inspect("");
  CHECK(j["fabric"]["rails"][0]["ports"][0]["lldp"].is_null());
  CHECK(j["fabric"]["lldp_reason"] == "/usr/sbin/lldpcli: permission denied" + hint);

  j = inspect("--groups=adm");
  CHECK(j["fabric"]["rails"][0]["ports"][0]["lldp"].is_null());
  CHECK(j["fabric"]["lldp_reason"] ==
        "lldpcli: unable to connect to socket " + h.socket() + ": Permission denied" + hint);

  j = inspect("--groups=adm,_lldpd");
  CHECK(j["fabric"]["lldp_reason"].is_null());
  CHECK(j["fabric"]["rails"][0]["ports"][0]["lldp"][0]["system_name"] == "leaf-01");
}

TEST_CASE("LLDP: a stopped lldpd costs the discovery pass 2 s, not the pass, and no lldpd is said") {
  LldpDir dir;
  CabledHost a("swp7");
  Lldpd h(a.host, dir, "host", {});
  TempConfig none(lldp_config(dir.path("none.sock")));
  json j = a.host.inspect(fx("f-rxe"), none.arg());
  CHECK(j["fabric"]["rails"][0]["ports"][0]["lldp"].is_null());
  CHECK(j["fabric"]["lldp_reason"] == "lldpcli: unable to connect to socket " + dir.path("none.sock") +
                                          ": No such file or directory (is lldpd running?)");

  // Ready (it answers), then stopped: it accepts and never answers.
  h.wait_ready();
  h.stop();
  TempConfig cfg(lldp_config(h.socket()));
  auto t0 = std::chrono::steady_clock::now();
  Run r = capture("ip netns exec " + a.host.name() + " timeout 30 " + binary() + " inspect --sysfs-root " +
                  fx("f-rxe") + " --json " + cfg.arg());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.rc == 0);
  CHECK(s < 10);
  json js = json::parse(r.out);
  CHECK(js["fabric"]["id"] == "roce:lab:192.168.77.0/24");
  CHECK(js["fabric"]["lldp_reason"] ==
        "lldpd at " + h.socket() + ": no answer within 2 s (lldpd stopped or busy)");
}
