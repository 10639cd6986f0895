// SPDX-License-Identifier: Apache-2.0
// The whole binary against the fixture trees, with addresses and routes from
// real rtnetlink: each test builds a network namespace with dummy interfaces
// named as in the fixture, carrying its addresses and default route, and
// runs `fabric-agent inspect --json` inside it.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

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
