// SPDX-License-Identifier: Apache-2.0
// Pure decisions on data: parsing, natural order, NCCL_IB_HCA, GID choice,
// fabric identity, PCIe affinity.
#include <catch2/catch.hpp>

#include <random>

#include <algorithm>

#include "probes/logic.hpp"

using namespace fa::probes;

namespace {

uint32_t ip(const char* s) {
  unsigned a, b, c, d;
  REQUIRE(std::sscanf(s, "%u.%u.%u.%u", &a, &b, &c, &d) == 4);
  return a << 24 | b << 16 | c << 8 | d;
}

std::string v4gid(const char* s) {
  uint32_t a = ip(s);
  char buf[40];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%04x:%04x", a >> 16, a & 0xffff);
  return buf;
}

const char* kLL = "fe80:0000:0000:0000:0e42:a1ff:fe66:0010";
const char* kV6 = "2001:0db8:0020:0000:0000:0000:0000:0011";

Port roce_port(const std::string& nd, std::vector<Gid> gids, const std::string& state = "ACTIVE") {
  Port p;
  p.port = 1;
  p.state = state;
  p.phys_state = "LinkUp";
  p.link_layer = "Ethernet";
  p.netdev = nd;
  p.gids = std::move(gids);
  return p;
}

// GIDs: link-local v1/v2 at 0/1, optional IPv6 global at 2/3, then IPv4.
std::vector<Gid> gids_with(const std::string& nd, const char* v4, bool with_v6) {
  std::vector<Gid> g = {{0, kLL, "IB/RoCE v1", nd}, {1, kLL, "RoCE v2", nd}};
  int i = 2;
  if (with_v6) {
    g.push_back({i++, kV6, "IB/RoCE v1", nd});
    g.push_back({i++, kV6, "RoCE v2", nd});
  }
  g.push_back({i++, v4gid(v4), "IB/RoCE v1", nd});
  g.push_back({i++, v4gid(v4), "RoCE v2", nd});
  return g;
}

Hca hca(const std::string& name, std::vector<Port> ports) {
  Hca h;
  h.name = name;
  h.ports = std::move(ports);
  return h;
}

NetLink up_link(const std::string& name, const char* addr, int plen) {
  NetLink l;
  l.name = name;
  l.up = true;
  if (addr) l.addrs.push_back({ip(addr), plen});
  return l;
}

// Fixture (b) as data: internet card mlx5_0 with its RoCE v2 IPv4 GID at 3,
// fabric cards at 5, 3, 5.
std::vector<Hca> roce_node() {
  return {hca("mlx5_0", {roce_port("enp1s0f0np0", gids_with("enp1s0f0np0", "198.51.100.20", false))}),
          hca("mlx5_1", {roce_port("ens3np0", gids_with("ens3np0", "10.20.0.11", true))}),
          hca("mlx5_2", {roce_port("ens4np0", gids_with("ens4np0", "10.20.0.12", false))}),
          hca("mlx5_3", {roce_port("ens5np0", gids_with("ens5np0", "10.20.0.13", true))})};
}

NetState roce_net() {
  NetState n;
  n.links = {up_link("enp1s0f0np0", "198.51.100.20", 24), up_link("ens3np0", "10.20.0.11", 16),
             up_link("ens4np0", "10.20.0.12", 16), up_link("ens5np0", "10.20.0.13", 16)};
  n.default_route_ifs = {"enp1s0f0np0"};
  return n;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(),
                     [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

Hca ib_hca(const std::string& name, const std::string& state, uint32_t sm_lid,
           const char* prefix = "fe80:0000:0000:0000") {
  Port p;
  p.port = 1;
  p.state = state;
  p.link_layer = "InfiniBand";
  p.sm_lid = sm_lid;
  p.lid = 0x11;
  p.gids = {{0, std::string(prefix) + ":a088:c203:00b1:2c40", "IB/RoCE v1", ""}};
  return hca(name, {p});
}

}  // namespace

TEST_CASE("rate parsing reads the kernel's rate text") {
  CHECK(parse_rate_gbps("400 Gb/sec (4X NDR)") == Approx(400));
  CHECK(parse_rate_gbps("10 Gb/sec (1X FDR10)") == Approx(10));  // rxe, from the real sample
  CHECK(parse_rate_gbps("2.5 Gb/sec (1X SDR)") == Approx(2.5));
  CHECK(parse_rate_gbps("53.125 Gb/sec (1X HDR)") == Approx(53.125));
  CHECK(parse_rate_gbps("200 Gb/sec (4X HDR)\n") == Approx(200));
  for (const char* bad : {"", "fast", "400", "400 Mb/sec (4X NDR)", "-5 Gb/sec (4X)", "Gb/sec",
                          "0 Gb/sec (x)", "4OO Gb/sec (4X NDR)"})
    CHECK_FALSE(parse_rate_gbps(bad).has_value());
}

TEST_CASE("numbered states and LIDs") {
  auto s = parse_numbered_state("4: ACTIVE");
  REQUIRE(s);
  CHECK(s->first == 4);
  CHECK(s->second == "ACTIVE");
  CHECK(parse_numbered_state("5: LinkUp")->second == "LinkUp");
  CHECK(parse_numbered_state("4: Port Configuration Training")->second == "Port Configuration Training");
  for (const char* bad : {"", "banana", ": ACTIVE", "4:", "x: ACTIVE", "4: ACT;IVE"})
    CHECK_FALSE(parse_numbered_state(bad));
  CHECK(parse_uint("0x1a") == 26u);
  CHECK(parse_uint("0x0") == 0u);
  CHECK(parse_uint("17") == 17u);
  CHECK_FALSE(parse_uint("0xZZ"));
  CHECK_FALSE(parse_uint(""));
  CHECK(parse_counter("18446744073709551615") == UINT64_MAX);
  CHECK_FALSE(parse_counter("lots"));
  CHECK_FALSE(parse_counter("-1"));
}

TEST_CASE("GID text") {
  // The real rxe0 sample: GID 1 is ::ffff:192.168.77.1.
  CHECK(gid_ipv4("0000:0000:0000:0000:0000:ffff:c0a8:4d01") == ip("192.168.77.1"));
  CHECK_FALSE(gid_ipv4("fe80:0000:0000:0000:1c95:bcff:fea6:281c"));
  CHECK_FALSE(gid_ipv4("0000:0000:0000:0000:0000:fffe:c0a8:4d01"));
  CHECK_FALSE(gid_ipv4("not-a-gid"));
  CHECK(is_zero_gid("0000:0000:0000:0000:0000:0000:0000:0000"));
  CHECK_FALSE(is_valid_gid("0000:0000:0000:0000:0000:0000:0000"));
  CHECK(gid_subnet_prefix("fe80:0000:0000:0000:1c95:bcff:fea6:281c") == "fe80:0000:0000:0000");
  CHECK(ipv4_segment(ip("10.20.0.11"), 16) == "10.20.0.0/16");
  CHECK(ipv4_segment(ip("10.30.0.5"), 24) == "10.30.0.0/24");
  CHECK(ipv4_segment(ip("10.30.0.5"), 32) == "10.30.0.5/32");
  CHECK(ipv4_segment(ip("10.30.0.5"), 0) == "0.0.0.0/0");
}

TEST_CASE("natural order puts mlx5_2 before mlx5_10") {
  std::vector<std::string> v = {"mlx5_10", "mlx5_2", "mlx5_1", "mlx5_11", "mlx5_0", "ib0", "mlx4_3"};
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return natural_less(a, b); });
  CHECK(v == std::vector<std::string>{"ib0", "mlx4_3", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10", "mlx5_11"});
  CHECK(natural_less("mlx5_2:1", "mlx5_10:1"));
  CHECK(natural_less("mlx5_1:1", "mlx5_1:2"));
  CHECK_FALSE(natural_less("mlx5_10", "mlx5_9"));
  CHECK_FALSE(natural_less("a", "a"));
}

TEST_CASE("NCCL_IB_HCA is an exact-match list in natural order") {
  CHECK(format_nccl_ib_hca({"mlx5_10:1", "mlx5_2:1", "mlx5_1:1", "mlx5_2:1"}) ==
        "=mlx5_1:1,mlx5_2:1,mlx5_10:1");
  CHECK(format_nccl_ib_hca({"mlx5_0:1"}) == "=mlx5_0:1");
}

namespace {

// NCCL's documented NCCL_IB_HCA matching: comma-separated `dev[:port]`
// entries, each a prefix of the device name, unless the value starts with
// '=' (exact names). A missing port matches every port.
bool nccl_selects(std::string env, const std::string& dev, int port) {
  bool exact = !env.empty() && env[0] == '=';
  if (exact) env.erase(0, 1);
  size_t start = 0;
  while (start <= env.size()) {
    size_t end = env.find(',', start);
    std::string e = env.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string name = e.substr(0, e.find(':'));
    int p = e.find(':') == std::string::npos ? -1 : std::stoi(e.substr(e.find(':') + 1));
    bool name_ok = exact ? dev == name : dev.rfind(name, 0) == 0;
    if (name_ok && (p == -1 || p == port)) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

}  // namespace

TEST_CASE(
    "NCCL_IB_HCA selects exactly the fabric ports: without '=' mlx5_1 would also pick mlx5_10 and mlx5_11") {
  std::vector<std::string> fabric = {"mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_4:1",
                                     "mlx5_5:1", "mlx5_6:1", "mlx5_7:1"};
  std::string env = format_nccl_ib_hca(fabric);
  std::vector<std::string> devices = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3",  "mlx5_4",
                                      "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11"};
  std::vector<std::string> picked, picked_prefix;
  for (const auto& d : devices) {
    if (nccl_selects(env, d, 1)) picked.push_back(d + ":1");
    if (nccl_selects(env.substr(1), d, 1)) picked_prefix.push_back(d + ":1");
  }
  CHECK(picked == fabric);
  CHECK(std::count(picked_prefix.begin(), picked_prefix.end(), "mlx5_10:1") == 1);
  CHECK(std::count(picked_prefix.begin(), picked_prefix.end(), "mlx5_11:1") == 1);
}

TEST_CASE("RoCE: GID index of the fabric address, never the internet-facing card") {
  InspectOptions o;
  o.provider_id = "prov-1";
  auto s = select_fabric(roce_node(), roce_net(), {}, o);
  CHECK(s.fabric.kind == "roce");
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_1:1", "mlx5_2:1", "mlx5_3:1"});
  CHECK(s.nccl.ib_hca == "=mlx5_1:1,mlx5_2:1,mlx5_3:1");
  CHECK(s.nccl.ib_gid_index == "5");  // most common; the internet card's RoCE v2 IPv4 GID is 3
  CHECK(s.fabric.segment == "10.20.0.0/16");
  CHECK(s.fabric.address == "10.20.0.11");
  CHECK(s.fabric.netdev == "ens3np0");
  CHECK(s.fabric.id == "roce:prov-1:10.20.0.0/16");
  CHECK(any_contains(s.warnings, "mlx5_2:1 (GID 3)"));
  CHECK(any_contains(s.warnings, "NCCL_IB_ADDR_RANGE=10.20.0.0/16"));
  CHECK_FALSE(any_contains(s.warnings, "mlx5_1:1 (GID"));
}

TEST_CASE("RoCE: agreeing ports give no GID warning") {
  auto hcas = roce_node();
  hcas.erase(hcas.begin() + 2);  // drop mlx5_2, the odd one
  InspectOptions o;
  o.provider_id = "p";
  auto s = select_fabric(hcas, roce_net(), {}, o);
  CHECK(s.nccl.ib_gid_index == "5");
  CHECK_FALSE(any_contains(s.warnings, "disagree"));
}

TEST_CASE("RoCE: without the default route on it, the slower internet card is no rail and is left out") {
  auto net = roce_net();
  net.default_route_ifs.clear();
  InspectOptions o;
  o.provider_id = "p";
  auto node = roce_node();
  node[0].ports[0].rate_gbps = 25;  // as fixture b: the internet card at 25G, the fabric at 200G
  for (size_t i = 1; i < node.size(); ++i) node[i].ports[0].rate_gbps = 200;
  auto s = select_fabric(node, net, {}, o);
  CHECK(s.fabric.segment == "10.20.0.0/16");
  CHECK(s.fabric.id == "roce:p:10.20.0.0/16");
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_1:1", "mlx5_2:1", "mlx5_3:1"});
  CHECK(any_contains(s.warnings, "RoCE segment 198.51.100.0/24 (mlx5_0:1) left out of the fabric"));
  // Where rates cannot be compared, it is taken for a rail: the id then says so.
  auto s2 = select_fabric(roce_node(), net, {}, o);
  CHECK(s2.fabric.id == "roce:p:10.20.0.0/16,198.51.100.0/24");
}

TEST_CASE("RoCE: down netdevs, missing addresses and unknown netdevs are not fabric") {
  auto net = roce_net();
  net.links[1].up = false;     // ens3np0 down
  net.links[2].addrs.clear();  // ens4np0 lost its address
  net.links.pop_back();        // ens5np0 vanished
  InspectOptions o;
  auto s = select_fabric(roce_node(), net, {}, o);
  CHECK(s.fabric.kind == "none");
  CHECK_FALSE(s.nccl.ib_hca);
  std::string why;
  for (const auto& [k, v] : s.reasons)
    if (k == "fabric") why = v;
  CHECK(why.find("ens3np0): netdev is down") != std::string::npos);
  CHECK(why.find("does not hold that address") != std::string::npos);
  CHECK(why.find("not found over rtnetlink") != std::string::npos);
  CHECK(why.find("carries the default route") != std::string::npos);
}

TEST_CASE("RoCE: provider_id unset gives a null id and says why") {
  auto s = select_fabric(roce_node(), roce_net(), {}, InspectOptions{});
  CHECK(s.fabric.kind == "roce");
  CHECK_FALSE(s.fabric.id);
  CHECK(any_contains(s.warnings, "provider_id is not set"));
}

TEST_CASE("RoCE: a pinned netdev and an HCA allow-list restrict the choice") {
  InspectOptions o;
  o.provider_id = "p";
  o.fabric_netdev = "ens5np0";
  auto s = select_fabric(roce_node(), roce_net(), {}, o);
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_3:1"});
  CHECK(s.nccl.ib_gid_index == "5");

  InspectOptions o2;
  o2.hcas = {"mlx5_2", "mlx5_3:1"};
  s = select_fabric(roce_node(), roce_net(), {}, o2);
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_2:1", "mlx5_3:1"});

  InspectOptions o3;
  o3.fabric_netdev = "eth9";
  s = select_fabric(roce_node(), roce_net(), {}, o3);
  CHECK(s.fabric.kind == "none");
  CHECK(any_contains(s.warnings, "configured fabric.netdev eth9"));

  // Pinning the default-route card is the operator's call: allowed, with a warning.
  InspectOptions o4;
  o4.fabric_netdev = "enp1s0f0np0";
  s = select_fabric(roce_node(), roce_net(), {}, o4);
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_0:1"});
  CHECK(s.nccl.ib_gid_index == "3");
  CHECK(any_contains(s.warnings, "carries the default route"));
}

TEST_CASE("RoCE: fabric address on a VLAN netdev over the port") {
  std::string nd = "ens1f0np0", vl = "ens1f0np0.100";
  std::vector<Gid> g = {{0, kLL, "IB/RoCE v1", nd},
                        {1, kLL, "RoCE v2", nd},
                        {2, kLL, "IB/RoCE v1", vl},
                        {3, kLL, "RoCE v2", vl},
                        {4, v4gid("10.30.0.5"), "IB/RoCE v1", vl},
                        {5, v4gid("10.30.0.5"), "RoCE v2", vl}};
  NetState net;
  net.links = {up_link(nd, nullptr, 0), up_link(vl, "10.30.0.5", 24), up_link("eno1", "192.0.2.50", 24)};
  net.default_route_ifs = {"eno1"};
  auto s = select_fabric({hca("mlx5_0", {roce_port(nd, g)})}, net, {}, InspectOptions{});
  CHECK(s.fabric.netdev == vl);
  CHECK(s.nccl.ib_gid_index == "5");
  CHECK(s.fabric.segment == "10.30.0.0/24");
}

// An SM as an SMInfoRecord: GUID, priority, state (3 master, 2 standby).
static smp::SmInfoRecord smr(uint64_t guid, uint8_t prio, uint8_t state, uint32_t lid = 1) {
  smp::SmInfoRecord r;
  r.lid = lid;
  r.info.guid = guid;
  r.info.priority = prio;
  r.info.sm_state = state;
  return r;
}

// What a port learns: the master's SMInfo and the SA's table.
static SmLookup looked_up(const smp::SmInfoRecord& master, std::vector<smp::SmInfoRecord> table) {
  SmLookup l;
  l.guid = master.info.guid;
  l.master = master.info;
  l.records = std::move(table);
  return l;
}

TEST_CASE("InfiniBand: fabric id from subnet prefix and the SM that would take over last") {
  std::vector<Hca> h = {ib_hca("mlx5_0", "ACTIVE", 1), ib_hca("mlx5_1", "ACTIVE", 1),
                        ib_hca("mlx5_2", "DOWN", 0)};
  auto m = smr(0x0002c90300a1b2c3ull, 14, 3);
  auto sb = smr(0x0002c90300a1b2d0ull, 5, 2, 7);
  std::vector<std::pair<std::string, SmLookup>> sm = {{"mlx5_0:1", looked_up(m, {m, sb})},
                                                      {"mlx5_1:1", looked_up(m, {sb, m})}};
  auto s = select_fabric(h, NetState{}, sm, InspectOptions{});
  CHECK(s.fabric.kind == "infiniband");
  CHECK(s.fabric.id == "ib:fe80000000000000:0002c90300a1b2d0");
  CHECK(s.fabric.sm_guid == "0x0002c90300a1b2c3");
  REQUIRE(s.fabric.sms.size() == 2);
  CHECK(s.fabric.sms[0].guid == "0x0002c90300a1b2c3");
  CHECK(s.fabric.sms[0].state == "master");
  CHECK(s.fabric.sms[1].guid == "0x0002c90300a1b2d0");
  CHECK(s.fabric.sms[1].lid == 7u);
  CHECK(s.fabric.sms[1].priority == 5);
  CHECK(s.fabric.sms[1].state == "standby");
  CHECK(s.fabric.sm_lid == 1u);
  CHECK(s.fabric.subnet_prefix == "fe80:0000:0000:0000");
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"});
  CHECK_FALSE(s.nccl.ib_gid_index);
  // A second machine of the same fabric prints the same id; another fabric's SMs, another id.
  auto s2 = select_fabric({ib_hca("mlx5_4", "ACTIVE", 1)}, NetState{}, {{"mlx5_4:1", looked_up(m, {m, sb})}},
                          InspectOptions{});
  CHECK(s2.fabric.id == s.fabric.id);
  auto other = smr(0x0002c90300ffffffull, 0, 3);
  auto s3 = select_fabric({ib_hca("mlx5_0", "ACTIVE", 1)}, NetState{},
                          {{"mlx5_0:1", looked_up(other, {other})}}, InspectOptions{});
  CHECK(s3.fabric.id == "ib:fe80000000000000:0002c90300ffffff");
  // The master killed, the standby took over: the same id.
  auto took_over = smr(sb.info.guid, 5, 3, 7);
  auto s4 = select_fabric({ib_hca("mlx5_0", "ACTIVE", 7)}, NetState{},
                          {{"mlx5_0:1", looked_up(took_over, {took_over})}}, InspectOptions{});
  CHECK(s4.fabric.id == s.fabric.id);
  CHECK(s4.fabric.sm_guid == "0x0002c90300a1b2d0");
}

TEST_CASE("InfiniBand: takeover order and the SM that names the fabric") {
  // Equal priorities (OpenSM's default 0): the lowest GUID is master, the
  // highest names the fabric.
  auto o = sms_in_takeover_order({smr(0x30, 0, 2), smr(0x10, 0, 3), smr(0x20, 0, 2)}, std::nullopt, 1);
  REQUIRE(o.size() == 3);
  CHECK(o[0].info.guid == 0x10);
  CHECK(o[1].info.guid == 0x20);
  CHECK(o[2].info.guid == 0x30);
  CHECK(fabric_anchor_sm(o)->info.guid == 0x30);
  // Priority first: a low-priority SM names the fabric whatever its GUID.
  o = sms_in_takeover_order({smr(0x10, 0, 2), smr(0x20, 9, 3), smr(0x30, 9, 2)}, std::nullopt, 1);
  CHECK(o[0].info.guid == 0x20);
  CHECK(fabric_anchor_sm(o)->info.guid == 0x10);
  // The master's SMInfo joins a table that lacks it, and leads; a GUID listed twice counts once.
  auto m = smr(0x50, 3, 3, 9);
  o = sms_in_takeover_order({smr(0x40, 15, 2), smr(0x40, 15, 2)}, m.info, 9);
  REQUIRE(o.size() == 2);
  CHECK(o[0].info.guid == 0x50);
  CHECK(o[0].lid == 9u);
  CHECK(fabric_anchor_sm(o)->info.guid == 0x50);
  CHECK(fabric_anchor_sm({}) == nullptr);

  // Whatever the SMs, killing the master and letting the next one take over
  // (again and again, down to one SM) never changes the SM that names the
  // fabric. Lowest-GUID or master-GUID rules fail this on the first round.
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::vector<smp::SmInfoRecord> sms;
    int n = 2 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i)
      sms.push_back(smr(1 + rng() % 64, static_cast<uint8_t>(rng() % 3), 2, static_cast<uint32_t>(i + 1)));
    auto ordered = sms_in_takeover_order(sms, std::nullopt, 1);
    if (ordered.size() < 2) continue;
    uint64_t anchor = fabric_anchor_sm(ordered)->info.guid;
    while (ordered.size() > 1) {
      ordered.erase(ordered.begin());  // the master dies, the next takes over
      ordered = sms_in_takeover_order(ordered, std::nullopt, 1);
      INFO("round " << round << ", " << ordered.size() << " SMs left");
      REQUIRE(fabric_anchor_sm(ordered)->info.guid == anchor);
    }
  }
}

TEST_CASE("InfiniBand: without the SA's SM table the id is null and says why") {
  SmLookup l;
  l.guid = 0x0002c90300a1b2c3ull;
  l.master = smr(0x0002c90300a1b2c3ull, 0, 3).info;
  l.sa_error = "SMInfoRecord via mlx5_0:1: umad_recv from LID 1: Connection timed out";
  auto s = select_fabric({ib_hca("mlx5_0", "ACTIVE", 1)}, NetState{}, {{"mlx5_0:1", l}}, InspectOptions{});
  CHECK(s.fabric.kind == "infiniband");
  CHECK_FALSE(s.fabric.id);
  CHECK(s.fabric.sm_guid == "0x0002c90300a1b2c3");
  CHECK(any_contains(s.warnings, "fabric.id is null: the SA's table of subnet managers could not be read"));
  CHECK(any_contains(s.warnings, "Connection timed out"));
}

TEST_CASE("InfiniBand: ports of two fabrics, most ACTIVE ports wins") {
  std::vector<Hca> h = {ib_hca("mlx5_0", "ACTIVE", 1), ib_hca("mlx5_1", "ACTIVE", 1),
                        ib_hca("mlx5_2", "ACTIVE", 1)};
  std::vector<std::pair<std::string, SmLookup>> sm = {
      {"mlx5_0:1", looked_up(smr(0x11, 0, 3), {smr(0x11, 0, 3)})},
      {"mlx5_1:1", looked_up(smr(0x22, 0, 3), {smr(0x22, 0, 3)})},
      {"mlx5_2:1", looked_up(smr(0x22, 0, 3), {smr(0x22, 0, 3)})}};
  auto s = select_fabric(h, NetState{}, sm, InspectOptions{});
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_1:1", "mlx5_2:1"});
  CHECK(s.fabric.sm_guid == "0x0000000000000022");
  CHECK(any_contains(s.warnings, "several fabrics"));
  CHECK(any_contains(s.warnings, "mlx5_0:1"));
}

TEST_CASE("InfiniBand: SM GUID unknown gives a null id and the reason") {
  auto s = select_fabric({ib_hca("mlx5_0", "ACTIVE", 1)}, NetState{},
                         {{"mlx5_0:1", SmLookup{std::nullopt, "umad_open_port: No such device", {}, {}, ""}}},
                         InspectOptions{});
  CHECK(s.fabric.kind == "infiniband");
  CHECK_FALSE(s.fabric.id);
  CHECK_FALSE(s.fabric.sm_guid);
  CHECK(any_contains(s.warnings, "sm_guid unknown: umad_open_port: No such device"));
}

TEST_CASE("IPv4 segments and the one covering them") {
  CHECK(parse_ipv4_segment("10.0.3.0/24") == std::pair<uint32_t, int>{ip("10.0.3.0"), 24});
  CHECK(parse_ipv4_segment("10.0.3.7/24") == std::pair<uint32_t, int>{ip("10.0.3.0"), 24});
  CHECK_FALSE(parse_ipv4_segment("10.0.3/24"));
  CHECK_FALSE(parse_ipv4_segment("10.0.3.0/33"));
  CHECK_FALSE(parse_ipv4_segment("10.0.3.256/24"));
  CHECK(covering_segment({"10.0.0.0/24", "10.0.7.0/24", "10.0.3.0/24"}) == "10.0.0.0/21");
  CHECK(covering_segment({"10.0.8.0/24", "10.0.9.0/24"}) == "10.0.8.0/23");
  CHECK(covering_segment({"10.20.0.0/16"}) == "10.20.0.0/16");
  CHECK(covering_segment({"10.0.0.0/24", "192.168.0.0/24"}) == "0.0.0.0/0");
  CHECK(roce_fabric_id("p", {"10.0.0.0/24", "10.0.1.0/24"}) == "roce:p:10.0.0.0/24,10.0.1.0/24");
}

TEST_CASE("RoCE: rails on their own segments are one fabric, a slower segment is not a rail") {
  std::vector<Hca> hcas;
  NetState net;
  for (int k = 0; k < 4; ++k) {
    std::string nd = "rail" + std::to_string(k);
    std::string addr = "10.0." + std::to_string(k) + ".11";
    Port p = roce_port(nd, gids_with(nd, addr.c_str(), false), k == 2 ? "DOWN" : "ACTIVE");
    p.rate_gbps = 400;
    hcas.push_back(hca("mlx5_" + std::to_string(k), {p}));
    net.links.push_back(up_link(nd, addr.c_str(), 24));
  }
  Port slow = roce_port("mgmt0", gids_with("mgmt0", "172.16.0.5", false));
  slow.rate_gbps = 25;
  hcas.push_back(hca("mlx5_9", {slow}));
  net.links.push_back(up_link("mgmt0", "172.16.0.5", 16));
  InspectOptions o;
  o.provider_id = "p";
  auto s = select_fabric(hcas, net, {}, o);
  CHECK(s.fabric.kind == "roce");
  CHECK(s.fabric.ports == std::vector<std::string>{"mlx5_0:1", "mlx5_1:1", "mlx5_3:1"});
  // The DOWN rail stays in the id: a link going down does not move the host to another fabric.
  CHECK(s.fabric.id == "roce:p:10.0.0.0/24,10.0.1.0/24,10.0.2.0/24,10.0.3.0/24");
  REQUIRE(s.fabric.rails.size() == 4);
  CHECK(s.fabric.rails[2].ports[0].state == "DOWN");
  CHECK(any_contains(s.warnings, "rail 10.0.2.0/24 has no ACTIVE port: mlx5_2:1 (DOWN)"));
  CHECK(any_contains(
      s.warnings, "RoCE segment 172.16.0.0/16 (mlx5_9:1) left out of the fabric: 25 Gb/s against 400 Gb/s"));
  CHECK_FALSE(any_contains(s.warnings, "several fabrics"));
}

TEST_CASE("no HCAs: kind none, NCCL_SOCKET_IFNAME still set") {
  InspectOptions o;
  o.socket_ifname = "wg7";
  auto s = select_fabric({}, NetState{}, {}, o);
  CHECK(s.fabric.kind == "none");
  CHECK(s.nccl.socket_ifname == "wg7");
  CHECK_FALSE(s.nccl.ib_hca);
}

TEST_CASE("PCIe affinity: deepest common upstream bridge") {
  const char* gpu = "pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:00.0/0000:12:00.0";
  const char* nic_same_switch = "pci0000:00/0000:00:01.0/0000:10:00.0/0000:11:01.0/0000:13:00.0";
  const char* nic_same_root = "pci0000:00/0000:00:02.0/0000:20:00.0/0000:21:01.0/0000:23:00.0";
  const char* nic_other_socket = "pci0000:80/0000:80:01.0/0000:90:00.0/0000:91:01.0/0000:93:00.0";
  CHECK(common_upstream_depth(gpu, nic_same_switch) == 3);
  CHECK(common_upstream_depth(gpu, nic_same_root) == 1);
  CHECK(common_upstream_depth(gpu, nic_other_socket) == 0);
  CHECK(common_upstream_depth("", nic_same_root) == 0);

  auto mk = [](const char* name, const char* path, int numa) {
    Hca h;
    h.name = name;
    h.pci_path = path;
    h.numa_node = numa;
    return h;
  };
  std::vector<Hca> hcas = {mk("mlx5_10", nic_other_socket, 1), mk("mlx5_2", nic_same_root, 0),
                           mk("mlx5_0", nic_same_switch, 0)};
  std::vector<GpuDevice> g(2);
  g[0].pci_path = gpu;
  g[0].numa_node = 0;
  g[1].pci_path = "pci0000:80/0000:80:02.0/0000:a0:00.0/0000:a1:00.0/0000:a2:00.0";
  g[1].numa_node = 1;
  assign_nearest_hcas(g, hcas, {"mlx5_0:1", "mlx5_2:1", "mlx5_10:1"});
  CHECK(g[0].nearest_hca == "mlx5_0");
  CHECK(g[1].nearest_hca == "mlx5_10");
  // mlx5_0 not a fabric HCA (its port is DOWN): the next nearest is on the same root complex.
  assign_nearest_hcas(g, hcas, {"mlx5_2:1", "mlx5_10:1"});
  CHECK(g[0].nearest_hca == "mlx5_2");
  assign_nearest_hcas(g, hcas, {});
  CHECK(g[0].nearest_hca.empty());
}

TEST_CASE("GPU identification") {
  CHECK(gpu_vendor("0x10de", "0x030200") == "nvidia");
  CHECK(gpu_vendor("0x10de", "0x030000") == "nvidia");
  CHECK(gpu_vendor("0x10de", "0x068000") == "");  // NVSwitch is a bridge, not a GPU
  CHECK(gpu_vendor("0x1002", "0x120000") == "amd");
  CHECK(gpu_vendor("0x1a03", "0x030000") == "");  // BMC VGA
  CHECK(gpu_model("0x10de", "0x2330") == "H100 SXM5 80GB");
  CHECK(gpu_model("0x1002", "0x74a1") == "Instinct MI300X");
  CHECK(gpu_model("0x10de", "0x9999") == "0x10de:0x9999");
}

TEST_CASE("GPUDirect readiness on data: which module, which flavour, which kernel") {
  GpuDirectInputs in;
  CHECK_FALSE(gpudirect_readiness(in).ready.has_value());  // no NVIDIA GPU
  in.nvidia_gpus = 8;
  CHECK(gpudirect_readiness(in).reason == "the nvidia kernel module is not loaded (module/nvidia)");
  in.nvidia_module = true;
  in.peer_module = "nv_peer_mem";  // MLNX_OFED's older module counts the same
  CHECK(gpudirect_readiness(in).via == "nvidia_peermem");
  in.peer_module.clear();
  // Nothing readable in procfs: both unknowns are named.
  auto g = gpudirect_readiness(in);
  CHECK(g.ready == false);
  CHECK(g.reason.find("(the NVIDIA driver flavour is unknown (driver/nvidia/version unreadable) and the kernel "
                      "release is unknown)") != std::string::npos);
  in.driver_version = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build";
  in.kernel_release = "5.12.0";
  CHECK(gpudirect_readiness(in).via == "dma-buf");  // 5.12 is the first with dma-buf MRs
  in.kernel_release = "5.11.22";
  CHECK(gpudirect_readiness(in).ready == false);
  in.kernel_release = "6.12.1-amd64";
  in.driver_version = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.161.07";
  CHECK(gpudirect_readiness(in).reason.find("proprietary flavour") != std::string::npos);
}
