// SPDX-License-Identifier: Apache-2.0
// Writes the seeds made by the project's own encoders into OUT/<harness>/:
// WireGuard dump datagrams (genl_build_set), rtnetlink messages (libnl-
// route's request builders, which lay out RTM_NEW* as the kernel's dump
// answers do), the embedded default config, SMInfo replies (encode_sminfo), state files (dump_state and
// the journal's lines) and side-channel records (rdma::encode).
//   fuzz_seeds OUT     (the seeds in the tree: fuzz_seeds fuzz/corpus)
#include <arpa/inet.h>
#include <linux/rtnetlink.h>
#include <linux/wireguard.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/state.hpp"
#include "common/config.hpp"
#include "overlay/internal.hpp"
#include "probes/rdma/auth.hpp"
#include "probes/rdma/wire.hpp"
#include "probes/sminfo.hpp"

namespace ov = fa::overlay;
using Bytes = std::vector<uint8_t>;
using nlohmann::json;

namespace {

std::string g_out;

void write(const std::string& harness, const std::string& name, const void* data, size_t n) {
  std::filesystem::create_directories(g_out + "/" + harness);
  std::ofstream f(g_out + "/" + harness + "/" + name, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!f) {
    std::fprintf(stderr, "fuzz_seeds: cannot write %s/%s/%s\n", g_out.c_str(), harness.c_str(), name.c_str());
    std::exit(1);
  }
}
void write(const std::string& harness, const std::string& name, const std::string& s) { write(harness, name, s.data(), s.size()); }

// A binary seed as NAME.hex: '#' comment lines, then 16 bytes a line
// (fuzz/run.sh turns it back into bytes).
void write_hex(const std::string& harness, const std::string& name, const std::string& what, const uint8_t* p, size_t n) {
  std::string t = "# " + what + "\n# written by fuzz_seeds (fuzz/seeds.cpp); " + std::to_string(n) + " bytes\n";
  static const char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    t += kDigits[p[i] >> 4];
    t += kDigits[p[i] & 15];
    if (i % 16 == 15 || i + 1 == n)
      t += '\n';
    else if (i % 4 == 3)
      t += ' ';
  }
  write(harness, name + ".hex", t);
}
void write_hex(const std::string& harness, const std::string& name, const std::string& what, const Bytes& b) {
  write_hex(harness, name, what, b.data(), b.size());
}

void append(Bytes& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
  out.resize(NLMSG_ALIGN(out.size()));
}

// ------------------------------------------------------------- genl ---

constexpr uint32_t kPort = 0x1234, kSeq = 0x46410000;  // fuzz/genl.cpp's

Bytes nl_message(uint16_t type, uint16_t flags, const Bytes& payload) {
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(payload.size()));
  h.nlmsg_type = type;
  h.nlmsg_flags = flags;
  h.nlmsg_seq = kSeq;
  h.nlmsg_pid = kPort;
  Bytes m;
  append(m, &h, sizeof h);
  m.resize(NLMSG_HDRLEN);
  m.insert(m.end(), payload.begin(), payload.end());
  m.resize(NLMSG_ALIGN(m.size()));
  return m;
}

ov::Key key_of(uint8_t salt) {
  ov::Key k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(salt * 31 + i * 7);
  return k;
}

ov::Device device(size_t peers, size_t ips_per_peer) {
  ov::Device d;
  d.name = "wg0";
  d.private_key = key_of(1);
  d.listen_port = 51820;
  for (size_t i = 0; i < peers; ++i) {
    ov::Peer p;
    p.public_key = key_of(static_cast<uint8_t>(10 + i));
    p.endpoint = *ov::Endpoint::parse(i % 2 ? "[2001:db8::" + std::to_string(i + 1) + "]:51820"
                                            : "192.0.2." + std::to_string(i + 1) + ":51820");
    if (i % 3 == 0) p.persistent_keepalive = 25;
    for (size_t j = 0; j < ips_per_peer; ++j)
      p.allowed_ips.push_back(*ov::IpPrefix::parse("10.42." + std::to_string(j) + "." + std::to_string(i + 2) + "/32"));
    if (i == 1) p.allowed_ips.push_back(*ov::IpPrefix::parse("fd00:42::/64"));
    d.peers.push_back(p);
  }
  return d;
}

// The dump answer the kernel gives for `d`: GET_DEVICE messages of the
// family, NLM_F_MULTI, then NLMSG_DONE; all in one datagram.
Bytes dump_of(const ov::Device& d, size_t max_bytes, uint16_t extra_flags = 0) {
  Bytes out;
  for (auto& m : ov::genl_build_set(d, 0x1c, max_bytes)) {
    nlmsghdr* h = nlmsg_hdr(m.get());
    h->nlmsg_flags = NLM_F_MULTI | extra_flags;
    h->nlmsg_seq = kSeq;
    h->nlmsg_pid = kPort;
    static_cast<genlmsghdr*>(nlmsg_data(h))->cmd = WG_CMD_GET_DEVICE;
    append(out, h, h->nlmsg_len);
  }
  int zero = 0;
  Bytes done = nl_message(NLMSG_DONE, NLM_F_MULTI, Bytes(reinterpret_cast<uint8_t*>(&zero),
                                                         reinterpret_cast<uint8_t*>(&zero) + sizeof zero));
  out.insert(out.end(), done.begin(), done.end());
  return out;
}

void genl_seeds() {
  write_hex("genl", "no-peers", "WG_CMD_GET_DEVICE dump of wg0 without peers, then NLMSG_DONE",
            dump_of(device(0, 0), 4096));
  write_hex("genl", "three-peers", "a dump of wg0 with three peers of two allowed IPs each, then NLMSG_DONE",
            dump_of(device(3, 2), 4096));
  write_hex("genl", "split-peer", "a dump whose second peer continues in the next message (512-byte messages)",
            dump_of(device(2, 40), 512));
  write_hex("genl", "torn", "a dump flagged NLM_F_DUMP_INTR (the device changed during the dump)",
            dump_of(device(1, 1), 4096, NLM_F_DUMP_INTR));
  nlmsgerr e{};
  e.error = -ENODEV;
  write_hex("genl", "error-enodev", "NLMSG_ERROR -ENODEV (no such device)",
        nl_message(NLMSG_ERROR, 0, Bytes(reinterpret_cast<uint8_t*>(&e), reinterpret_cast<uint8_t*>(&e) + sizeof e)));
}

// ------------------------------------------------------------- rtnl ---

Bytes bytes_of(nl_msg* m) {
  Bytes b;
  nlmsghdr* h = nlmsg_hdr(m);
  h->nlmsg_flags = NLM_F_MULTI;
  append(b, h, h->nlmsg_len);
  nlmsg_free(m);
  return b;
}

Bytes link_msg(const char* name, int ifindex, unsigned mtu, bool up, const char* kind) {
  rtnl_link* l = rtnl_link_alloc();
  rtnl_link_set_name(l, name);
  rtnl_link_set_ifindex(l, ifindex);
  rtnl_link_set_mtu(l, mtu);
  if (up) rtnl_link_set_flags(l, IFF_UP | IFF_RUNNING);
  if (kind) rtnl_link_set_type(l, kind);
  nl_msg* m = nullptr;
  if (rtnl_link_build_add_request(l, 0, &m) < 0) std::abort();
  rtnl_link_put(l);
  nlmsg_hdr(m)->nlmsg_type = RTM_NEWLINK;
  return bytes_of(m);
}

Bytes addr_msg(int ifindex, const char* text) {
  rtnl_addr* a = rtnl_addr_alloc();
  nl_addr* local = nullptr;
  if (nl_addr_parse(text, AF_UNSPEC, &local) < 0) std::abort();
  rtnl_addr_set_ifindex(a, ifindex);
  rtnl_addr_set_family(a, nl_addr_get_family(local));
  rtnl_addr_set_local(a, local);
  rtnl_addr_set_prefixlen(a, nl_addr_get_prefixlen(local));
  nl_addr_put(local);
  nl_msg* m = nullptr;
  if (rtnl_addr_build_add_request(a, 0, &m) < 0) std::abort();
  rtnl_addr_put(a);
  return bytes_of(m);
}

Bytes default_route_msg(int family, std::vector<int> ifindexes) {
  rtnl_route* r = rtnl_route_alloc();
  nl_addr* dst = nullptr;
  if (nl_addr_parse(family == AF_INET ? "0.0.0.0/0" : "::/0", family, &dst) < 0) std::abort();
  rtnl_route_set_family(r, static_cast<uint8_t>(family));
  rtnl_route_set_dst(r, dst);
  nl_addr_put(dst);
  rtnl_route_set_table(r, RT_TABLE_MAIN);
  rtnl_route_set_type(r, RTN_UNICAST);
  rtnl_route_set_protocol(r, RTPROT_BOOT);
  rtnl_route_set_scope(r, RT_SCOPE_UNIVERSE);
  for (int ifi : ifindexes) {
    rtnl_nexthop* nh = rtnl_route_nh_alloc();
    rtnl_route_nh_set_ifindex(nh, ifi);
    rtnl_route_add_nexthop(r, nh);
  }
  nl_msg* m = nullptr;
  if (rtnl_route_build_add_request(r, 0, &m) < 0) std::abort();
  rtnl_route_put(r);
  return bytes_of(m);
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

void rtnl_seeds() {
  write_hex("rtnl", "wg0-link-and-addrs", "RTM_NEWLINK wg0 (wireguard), its RTM_NEWADDRs, an address of another link",
        cat({link_msg("wg0", 5, 1420, true, "wireguard"), addr_msg(5, "10.42.0.1/24"), addr_msg(5, "fd00:42::1/64"),
             addr_msg(7, "10.20.0.11/16")}));
  write_hex("rtnl", "roce-host", "lo and two RoCE ports, their addresses, IPv4 and IPv6 default routes",
        cat({link_msg("lo", 1, 65536, true, nullptr), link_msg("ens1f0", 2, 9000, true, nullptr),
             link_msg("ens1f1", 3, 9000, false, nullptr), addr_msg(1, "127.0.0.1/8"), addr_msg(2, "10.20.0.11/16"),
             addr_msg(3, "10.21.0.11/16"), default_route_msg(AF_INET, {2}), default_route_msg(AF_INET6, {2})}));
  write_hex("rtnl", "multipath-default", "two links and a default route with two nexthops (RTA_MULTIPATH)",
        cat({link_msg("eth0", 2, 1500, true, nullptr), link_msg("eth1", 3, 1500, true, nullptr),
             addr_msg(2, "192.0.2.10/24"), default_route_msg(AF_INET, {2, 3})}));
  write_hex("rtnl", "vlan-link", "a VLAN link and its address", cat({link_msg("ens1f0.100", 9, 9000, true, "vlan"), addr_msg(9, "10.30.0.5/24")}));
}

// ----------------------------------------------------------- sminfo ---

void sminfo_seeds() {
  namespace smp = fa::probes::smp;
  constexpr uint64_t kTid = 0x00000001c0ffee42;  // fuzz/sminfo.cpp's
  auto reply = [&](uint8_t state, uint16_t status, uint16_t attr) {
    auto m = smp::encode_sminfo_get(kTid);
    smp::put_be(m, 3, 1, smp::kMethodGetResp);
    smp::put_be(m, 4, 2, status);
    smp::put_be(m, 16, 2, attr);
    smp::SmInfo info{0x0002c90300a1b2c3, 0, 4242, 14, state};
    smp::encode_sminfo(std::span<uint8_t>(m).subspan(smp::kSmpDataOffset), info);
    return m;
  };
  auto m = reply(3, 0, smp::kAttrSmInfo);
  write_hex("sminfo", "master", "GetResp(SMInfo), SM state master", m.data(), m.size());
  m = reply(2, 0, smp::kAttrSmInfo);
  write_hex("sminfo", "standby", "GetResp(SMInfo), SM state standby", m.data(), m.size());
  m = reply(3, 0x001c, smp::kAttrSmInfo);
  write_hex("sminfo", "status-unsupported", "GetResp(SMInfo) with MAD status 0x001c", m.data(), m.size());
  m = reply(3, 0, 0x0015);
  write_hex("sminfo", "port-info-attribute", "GetResp of attribute PortInfo, not SMInfo", m.data(), m.size());
  m = smp::encode_sminfo_get(kTid);
  write_hex("sminfo", "request-echoed", "the SubnGet(SMInfo) request itself, not an answer", m.data(), m.size());
}

// ------------------------------------------------------------ state ---

ov::DesiredMesh mesh(size_t peers) {
  json doc = {{"cluster_id", "c1"}, {"address", "10.42.0.1/24"}, {"listen_port", 51820}, {"mtu", 1420}};
  json ps = json::array();
  const char* keys[] = {"xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=",
                        "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="};
  for (size_t i = 0; i < peers; ++i)
    ps.push_back({{"public_key", keys[i]},
                  {"endpoint", "192.0.2." + std::to_string(i + 2) + ":51820"},
                  {"allowed_ips", {"10.42.0." + std::to_string(i + 2) + "/32"}}});
  doc["peers"] = ps;
  auto r = ov::parse_desired(doc);
  if (!r.ok()) std::abort();
  return *r.value;
}

void state_seeds() {
  using fa::agent::PersistedState;
  write("state", "no-mesh", fa::agent::dump_state(PersistedState{}, 1));
  write("state", "mesh", fa::agent::dump_state(PersistedState{mesh(2), std::nullopt}, 3));
  // A DELETE cut short: the removal recorded before the interface went.
  write("state", "removing",
        fa::agent::dump_state(PersistedState{std::nullopt, fa::agent::Removal{"wg0", "/run/netns/pod-1"}}, 5));
  // The journal after the snapshot, past an empty line (fuzz/state.cpp).
  const std::string snap = fa::agent::dump_state(PersistedState{mesh(2), std::nullopt}, 4);
  const std::string head = json{{"serial", 4}}.dump() + "\n";
  ov::DesiredPeer added = mesh(3).peers[2];
  json add = {{"cluster_id", "c1"}, {"peers", {ov::to_json(added)}}, {"remove", json::array()}};
  json rm = {{"cluster_id", "c1"}, {"peers", json::array()}, {"remove", {"xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="}}};
  write("state", "journal", snap + "\n" + head + add.dump() + "\n" + rm.dump() + "\n");
  write("state", "journal-cut-line", snap + "\n" + head + add.dump() + "\n" + rm.dump().substr(0, 30));
  write("state", "journal-other-serial", snap + "\n" + json{{"serial", 3}}.dump() + "\n" + add.dump() + "\n");
}

// -------------------------------------------------------- rdma_wire ---

void rdma_seeds() {
  namespace rd = fa::rdma;
  rd::Endpoint e;
  e.lid = 0x0012;
  e.qpn = 0x00a1b2;
  e.psn = 0x0c0ffe;
  e.mtu = 4096;
  e.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x02, 0xc9, 0xff, 0xfe, 0x00, 0x11, 0x22};
  e.rkey = 0x1f2e3d4c;
  e.addr = 0x00007f3a12340000;
  e.len = 64ull << 20;
  write("rdma_wire", "endpoint", rd::encode(e));
  rd::Endpoint roce = e;
  roce.lid = 0;
  roce.mtu = 1024;
  roce.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 20, 0, 11};
  write("rdma_wire", "endpoint-roce", rd::encode(roce));
  write("rdma_wire", "latency", rd::encode(rd::LatencyStart{1000}));
  write("rdma_wire", "done", rd::encode(rd::Done{}));
  write("rdma_wire", "failure", rd::encode(rd::Failure{rd::Reason::kQpRtrFailed, "ibv_modify_qp INIT->RTR: Invalid argument"}));
  // The handshake and a sealed record, with fuzz/rdma_wire.cpp's key and nonces.
  const rd::Key key = rd::Key::from_bytes(std::vector<uint8_t>(32, 0x5a));
  const rd::Nonce nc{7}, ns{1, 2, 3};
  write("rdma_wire", "hello", rd::encode(rd::Hello{nc}));
  write("rdma_wire", "challenge", rd::encode(rd::Challenge{ns}));
  write("rdma_wire", "proof", rd::encode(rd::Proof{rd::client_proof(key, nc, ns)}));
  write("rdma_wire", "plan", rd::encode(rd::Plan{10000, 1000}));
  write("rdma_wire", "sealed-endpoint",
        rd::seal(rd::session_key(key, nc, ns), rd::Direction::kToServer, 3, rd::encode(e)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds OUT (e.g. fuzz/corpus)\n");
    return 2;
  }
  g_out = argv[1];
  genl_seeds();
  rtnl_seeds();
  sminfo_seeds();
  state_seeds();
  rdma_seeds();
  write("config", "embedded-defaults", std::string(fa::kEmbeddedDefaultsYaml));
  return 0;
}
