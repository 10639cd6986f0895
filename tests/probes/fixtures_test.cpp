// SPDX-License-Identifier: Apache-2.0
// The sysfs readers on the fixture trees (tests/fixtures, modelled on the
// kernel's formats). Network state is given as data here; the netns tests
// run the whole binary against real rtnetlink.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "probes/inspect.hpp"
#include "probes/logic.hpp"
#include "probes/sysfs_io.hpp"

using namespace fa::probes;

namespace {

std::string fx(const char* name) { return std::string(FA_FIXTURES_DIR) + "/" + name; }

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

// Everything the sysfs pass produces, rendered: the JSON of a report of
// just these reads (HCAs, GPUs, warnings, in order) plus the PCIe paths that
// affinity uses and to_json leaves out.
std::string render(std::vector<Hca> hcas, std::vector<GpuDevice> gpus, std::vector<std::string> warnings) {
  std::string paths;
  for (const auto& h : hcas) paths += h.name + " " + h.pci_path + "\n";
  for (const auto& g : gpus) paths += g.pci + " " + g.pci_path + "\n";
  Report r;
  r.hcas = std::move(hcas);
  r.gpus.devices = std::move(gpus);
  r.warnings = std::move(warnings);
  return to_json(r).dump(1) + "\n" + paths;
}

std::string scan_text(const std::string& root) {
  std::vector<std::string> w;
  SysfsScan s = read_sysfs(root, w);
  return render(std::move(s.hcas), std::move(s.gpus), std::move(w));
}

const Hca& by_name(const std::vector<Hca>& v, const std::string& n) {
  auto it = std::find_if(v.begin(), v.end(), [&](const Hca& h) { return h.name == n; });
  REQUIRE(it != v.end());
  return *it;
}

}  // namespace

TEST_CASE("fixture a: 8 InfiniBand HCAs, a RoCE management card, 8 GPUs") {
  std::vector<std::string> w;
  auto hcas = read_hcas(fx("a-ib-8gpu"), w);
  CHECK(w.empty());
  std::vector<std::string> names;
  for (const auto& h : hcas) names.push_back(h.name);
  CHECK(names == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5",
                                          "mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"});
  const Hca& h0 = by_name(hcas, "mlx5_0");
  CHECK(h0.node_guid == "a088:c203:00b1:2c40");
  CHECK(h0.fw_ver == "28.39.1002");
  CHECK(h0.board_id == "MT_0000000838");
  CHECK(h0.pci == "0000:13:00.0");
  CHECK(h0.numa_node == 0);
  CHECK(h0.pci_path == "pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:01.0/0000:13:00.0");
  REQUIRE(h0.ports.size() == 1);
  const Port& p = h0.ports[0];
  CHECK(p.state == "ACTIVE");
  CHECK(p.phys_state == "LinkUp");
  CHECK(p.link_layer == "InfiniBand");
  CHECK(p.rate_gbps == Approx(400));
  CHECK(p.lid == 0x11u);
  CHECK(p.sm_lid == 1u);
  REQUIRE(p.gids.size() == 1);  // 127 empty slots skipped
  CHECK(p.gids[0].gid == "fe80:0000:0000:0000:a088:c203:00b1:2c40");
  CHECK(p.gids[0].type == "IB/RoCE v1");
  CHECK(p.counters.at("port_xmit_data") == 1234567890u);
  CHECK(p.counters.at("symbol_error") == 0u);
  CHECK(p.hw_counters.count("out_of_sequence") == 1);
  CHECK(by_name(hcas, "mlx5_5").ports[0].counters.at("symbol_error") == 3u);
  CHECK(by_name(hcas, "mlx5_3").ports[0].state == "DOWN");
  CHECK(by_name(hcas, "mlx5_4").numa_node == 1);
  const Port& mg = by_name(hcas, "mlx5_10").ports[0];
  CHECK(mg.link_layer == "Ethernet");
  CHECK(mg.netdev == "ens5f0np0");
  REQUIRE(mg.gids.size() == 4);
  CHECK(mg.gids[3].type == "RoCE v2");
  CHECK(mg.gids[3].netdev == "ens5f0np0");
  CHECK(mg.hw_counters.count("np_cnp_sent") == 1);

  auto gpus = read_gpus(fx("a-ib-8gpu"), w);
  CHECK(w.empty());
  REQUIRE(gpus.size() == 8);  // NVSwitches (bridge class) and the BMC VGA are not GPUs
  CHECK(gpus[0].model == "H100 SXM5 80GB");
  CHECK(gpus[0].pci == "0000:12:00.0");
  CHECK(gpus[4].numa_node == 1);

  // Selection on this data, with the network the netns test builds.
  NetState net;
  NetLink l;
  l.name = "ens5f0np0";
  l.up = true;
  l.addrs = {{(203u << 24) | (0u << 16) | (113u << 8) | 10u, 24}};
  net.links = {l};
  net.default_route_ifs = {"ens5f0np0"};
  auto s = select_fabric(hcas, net, {}, InspectOptions{});
  CHECK(s.fabric.kind == "infiniband");
  CHECK(s.nccl.ib_hca == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1");
  assign_nearest_hcas(gpus, hcas, s.fabric.ports);
  std::vector<std::string> nearest;
  for (const auto& g : gpus) nearest.push_back(g.nearest_hca);
  // GPU 3 shares a switch with mlx5_3, which is DOWN: the nearest fabric HCA
  // is then one on the same root complex.
  CHECK(nearest == std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_0", "mlx5_4", "mlx5_5",
                                            "mlx5_6", "mlx5_7"});
}

TEST_CASE("fixture b: GID tables with IPv6 and link-local entries before the IPv4 ones") {
  std::vector<std::string> w;
  auto hcas = read_hcas(fx("b-roce"), w);
  CHECK(w.empty());
  const Port& p = by_name(hcas, "mlx5_1").ports[0];
  REQUIRE(p.gids.size() == 6);
  CHECK(p.gids[5].index == 5);
  CHECK(p.gids[5].gid == "0000:0000:0000:0000:0000:ffff:0a14:000b");
  CHECK(p.gids[2].gid == "2001:0db8:0020:0000:0000:0000:0000:0011");
  CHECK(by_name(hcas, "mlx5_2").ports[0].gids.size() == 4);
  CHECK(by_name(hcas, "mlx5_0").ports[0].gids[3].gid == "0000:0000:0000:0000:0000:ffff:c633:6414");
}

TEST_CASE("fixture d: no HCAs, no GPUs, nothing to warn about") {
  std::vector<std::string> w;
  CHECK(read_hcas(fx("d-none"), w).empty());
  CHECK(read_gpus(fx("d-none"), w).empty());
  CHECK(w.empty());
  CHECK(read_hcas(fx("does-not-exist"), w).empty());
  CHECK(w.empty());
}

TEST_CASE("fixture e: damaged trees give warnings naming the path, and what was readable") {
  std::vector<std::string> w;
  auto hcas = read_hcas(fx("e-damaged"), w);
  REQUIRE(hcas.size() == 4);
  const Hca& h0 = by_name(hcas, "mlx5_0");
  CHECK(h0.node_guid.empty());
  CHECK_FALSE(h0.numa_node);
  const Port& p = h0.ports[0];
  CHECK(p.state == "ACTIVE");
  CHECK_FALSE(p.rate_gbps);
  CHECK_FALSE(p.lid);
  CHECK(p.netdev.empty());
  std::vector<int> idx;
  for (const auto& g : p.gids) idx.push_back(g.index);
  CHECK(idx == std::vector<int>{0, 1, 5, 6});  // 3 missing, 4 garbage, 2 and 7 empty
  CHECK(p.gids[2].type.empty());
  CHECK(p.counters.count("symbol_error") == 0);
  CHECK(p.counters.count("link_downed") == 1);
  CHECK(by_name(hcas, "mlx5_1").ports[0].state.empty());
  CHECK(by_name(hcas, "mlx5_2").ports.empty());
  CHECK(by_name(hcas, "mlx5_3").ports[0].link_layer.empty());

  CHECK(any_contains(w, "mlx5_0/node_guid"));
  CHECK(any_contains(w, "numa_node: not a NUMA node number: 'abc'"));
  CHECK(any_contains(w, "ports/1/rate: expected '<n> Gb/sec (...)', got 'fast'"));
  CHECK(any_contains(w, "ports/1/lid: expected a 16-bit LID like 0x1a, got '0xZZ'"));
  CHECK(any_contains(w, "ports/1/gids/4: not a GID: 'not-a-gid'"));
  CHECK(any_contains(w, "gid_attrs/types/5: GID 5 is set but its type is unreadable"));
  CHECK(any_contains(w, "mlx5_0/ports/1: RoCE port without a netdev"));
  CHECK(any_contains(w, "counters: counters not read: symbol_error ('lots')"));
  CHECK(any_contains(w, "mlx5_1/ports/1/state: expected '<n>: <NAME>' like '4: ACTIVE', got 'banana'"));
  CHECK(any_contains(w, "mlx5_2/ports"));
  CHECK(any_contains(w, "mlx5_3/ports/1/state"));
  CHECK(any_contains(w, "link_layer: expected InfiniBand or Ethernet, got 'Token Ring'"));

  w.clear();
  auto gpus = read_gpus(fx("e-damaged"), w);
  REQUIRE(gpus.size() == 1);
  CHECK(any_contains(w, "0000:05:00.0/device"));

  // Nothing here is a fabric, and the selection says so instead of guessing.
  auto s = select_fabric(hcas, NetState{}, {}, InspectOptions{});
  CHECK(s.fabric.kind == "none");
}

TEST_CASE("one sysfs pass reads what the two readers read, warnings in reading order") {
  namespace fs = std::filesystem;
  std::vector<std::string> roots;
  for (const auto& e : fs::directory_iterator(FA_FIXTURES_DIR))
    if (e.is_directory()) roots.push_back(e.path().string());
  std::sort(roots.begin(), roots.end());
  REQUIRE(roots.size() >= 6);  // a..f
  for (const auto& root : roots) {
    INFO(root);
    std::vector<std::string> w;
    auto hcas = read_hcas(root, w);
    auto gpus = read_gpus(root, w);
    CHECK(render(std::move(hcas), std::move(gpus), std::move(w)) == scan_text(root));
  }
  // The damaged tree warns from several HCAs and from the PCI scan: HCAs in
  // listing order, then PCI.
  std::vector<std::string> w;
  read_sysfs(fx("e-damaged"), w);
  REQUIRE(w.size() >= 3);
  CHECK(w.front().find("mlx5_0/") != std::string::npos);
  CHECK(w.back().find("bus/pci/devices") != std::string::npos);
}

TEST_CASE("random damage to a fixture never crashes and always renders") {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/fa-probes-fuzz-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  struct Cleanup {
    std::string dir;
    ~Cleanup() { fs::remove_all(dir); }
  } cleanup{tmpl};
  std::string root = std::string(tmpl) + "/b";
  fs::copy(fx("b-roce"), root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path().string());
  REQUIRE(files.size() > 100);
  // The network of the netns test, so damage reaches the selection too.
  NetState net;
  for (auto [n, a] : {std::pair{"ens3np0", 0x0a14000bu}, std::pair{"ens4np0", 0x0a14000cu},
                      std::pair{"ens5np0", 0x0a14000du}}) {
    NetLink l;
    l.name = n;
    l.up = true;
    l.addrs = {{a, 16}};
    net.links.push_back(l);
  }
  std::mt19937 rng(20261129);  // fixed seed: a failure reproduces
  const std::string alphabet = "0123456789abcdefx:: \n-GbsecACTIVE\xff\xc3\x01";
  for (int round = 0; round < 300; ++round) {
    const std::string& victim = files[rng() % files.size()];
    std::string junk;
    size_t len = rng() % 48;
    for (size_t i = 0; i < len; ++i) junk += alphabet[rng() % alphabet.size()];
    std::ofstream(victim, std::ios::trunc) << junk;
    std::vector<std::string> w;
    Report r;
    r.hcas = read_hcas(root, w);
    r.gpus.devices = read_gpus(root, w);
    InspectOptions o;
    o.provider_id = "p";
    auto s = select_fabric(r.hcas, net, {}, o);
    assign_nearest_hcas(r.gpus.devices, r.hcas, s.fabric.ports);
    r.fabric = s.fabric;
    r.nccl = s.nccl;
    r.warnings = w;
    std::string out;
    REQUIRE_NOTHROW(out = to_json(r).dump());
    REQUIRE_NOTHROW(to_table(r));
    REQUIRE_FALSE(out.empty());
  }
}

TEST_CASE("printable keeps UTF-8 and escapes the rest") {
  CHECK(printable("mlx5_0") == "mlx5_0");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(printable("a\xff"
                  "b") == "a\\xffb");
  CHECK(printable("\x01tab\t") == "\\x01tab\\x09");
  CHECK(printable("cut \xc3") == "cut \\xc3");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate is not UTF-8
}

// GPUDirect RDMA readiness from a sysfs tree and a procfs snapshot
// (fixtures i..l, written by make_fixtures.py), through discover() and the
// CLI, as the daemon and an operator see it.
namespace {

nlohmann::json gdr_of(const std::string& name) {
  InspectOptions o;
  o.sysfs_root = fx(name.c_str());
  o.proc_root = o.sysfs_root + ".proc";
  o.query_sm = false;
  return to_json(discover(o))["gpudirect"];
}

}  // namespace

TEST_CASE("GPUDirect readiness: peermem, dma-buf, neither with the reason, no GPU") {
  CHECK(gdr_of("i-gdr-peermem") ==
        nlohmann::json::parse(R"({"rdma": true, "via": "nvidia_peermem",
          "reason": "nvidia_peermem is loaded: the HCA reads and writes GPU memory directly"})"));
  auto j = gdr_of("j-gdr-dmabuf");
  CHECK(j["rdma"] == true);
  CHECK(j["via"] == "dma-buf");
  CHECK(j["reason"].get<std::string>().find("the open NVIDIA kernel module on kernel 6.1.0-18-amd64 (>= 5.12)") == 0);
  auto k = gdr_of("k-gdr-none");
  CHECK(k["rdma"] == false);
  CHECK(k["via"].is_null());
  CHECK(k["reason"] == "nvidia_peermem is not loaded and dma-buf is not available (the NVIDIA kernel module is the "
                       "proprietary flavour): NCCL stages GPU buffers through host memory; load it with `modprobe "
                       "nvidia_peermem`");
  auto l = gdr_of("l-gdr-old-kernel");
  CHECK(l["rdma"] == false);
  CHECK(l["reason"].get<std::string>().find("(kernel 5.10.0-28-amd64 is older than 5.12)") != std::string::npos);
  // d-none has no GPU (and no .proc tree): the question does not arise.
  CHECK(gdr_of("d-none") == nlohmann::json::parse(R"({"rdma": null, "via": null, "reason": "no NVIDIA GPU"})"));
}

TEST_CASE("GPUDirect readiness in inspect --json and the table (--proc-root)") {
  const char* bin = std::getenv("FA_BINARY");
  REQUIRE(bin != nullptr);
  auto run = [&](const std::string& args) {
    std::string out;
    FILE* f = ::popen((std::string(bin) + " inspect " + args).c_str(), "r");
    REQUIRE(f != nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    CHECK(::pclose(f) == 0);
    return out;
  };
  std::string root = fx("j-gdr-dmabuf");
  auto doc = nlohmann::json::parse(run("--json --sysfs-root " + root + " --proc-root " + root + ".proc"));
  CHECK(doc["gpudirect"]["via"] == "dma-buf");
  std::string table = run("--sysfs-root " + fx("k-gdr-none") + " --proc-root " + fx("k-gdr-none") + ".proc");
  CHECK(table.find("GPUDirect no RDMA (host copies)\n") != std::string::npos);
  CHECK(table.find("  gpudirect: nvidia_peermem is not loaded") != std::string::npos);
}
