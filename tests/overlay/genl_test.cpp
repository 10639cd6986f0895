// SPDX-License-Identifier: Apache-2.0
// SET_DEVICE splitting: build the messages for a large change set, decode
// them with the same checked parser used for kernel replies, compare.
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/wireguard.h>
#include <sys/socket.h>

#include <netlink/attr.h>
#include <netlink/genl/genl.h>

#include <catch2/catch.hpp>

#include <cstring>

#include "overlay/internal.hpp"
#include "tests/overlay/genl_bytes.hpp"

using namespace fa::overlay;

namespace {

Key key_of(size_t i, uint8_t salt = 0) {
  Key k{};
  std::memcpy(k.data(), &i, sizeof i);
  k[31] = salt;
  return k;
}

Device big_change(size_t n, size_t fat_peer, size_t fat_ips) {
  Device d;
  d.name = "wg-big";
  d.private_key = key_of(424242, 7);
  d.listen_port = 51820;
  for (size_t i = 0; i < n; ++i) {
    Peer p;
    p.public_key = key_of(i, 1);
    if (i % 7 == 3) {
      p.remove = true;
      d.peers.push_back(p);
      continue;
    }
    p.update_only = i % 5 == 1;
    p.replace_allowed_ips = !p.update_only || i % 2 == 0;
    std::string ep = i % 3 == 0
                         ? "[2001:db8::" + std::to_string(i % 9999 + 1) + "]:" + std::to_string(1000 + i)
                         : "192.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) + ":51820";
    p.endpoint = *Endpoint::parse(ep);
    if (i % 4 == 0) p.persistent_keepalive = static_cast<uint16_t>(i % 60);
    size_t nips = i == fat_peer ? fat_ips : 1 + i % 3;
    for (size_t j = 0; j < nips; ++j)
      p.allowed_ips.push_back(*IpPrefix::parse("10." + std::to_string(j / 256) + "." +
                                               std::to_string(j % 256) + "." + std::to_string(i % 256) +
                                               "/32"));
    if (i % 11 == 0) p.allowed_ips.push_back(*IpPrefix::parse("fd00:" + std::to_string(i) + "::/64"));
    d.peers.push_back(p);
  }
  return d;
}

void compare(const Device& want, const Device& got) {
  CHECK(got.name == want.name);
  CHECK(got.private_key == want.private_key);
  CHECK(got.listen_port == want.listen_port);
  CHECK(got.replace_peers == want.replace_peers);
  REQUIRE(got.peers.size() == want.peers.size());
  for (size_t i = 0; i < want.peers.size(); ++i) {
    const Peer& w = want.peers[i];
    const Peer& g = got.peers[i];
    INFO("peer " << i);
    REQUIRE(g.public_key == w.public_key);
    CHECK(g.remove == w.remove);
    if (w.remove) {
      CHECK(g.allowed_ips.empty());
      continue;
    }
    CHECK(g.update_only == w.update_only);
    CHECK(g.replace_allowed_ips == w.replace_allowed_ips);
    CHECK(g.endpoint == w.endpoint);
    CHECK(g.persistent_keepalive == w.persistent_keepalive);
    REQUIRE(g.allowed_ips.size() == w.allowed_ips.size());
    for (size_t j = 0; j < w.allowed_ips.size(); ++j) CHECK(g.allowed_ips[j] == w.allowed_ips[j].network());
  }
}

// Peers of one message, decoded alone.
Device decode_one(const std::vector<uint8_t>& m) {
  auto d = genl_parse_device({m});
  REQUIRE(d.ok());
  return *d;
}

}  // namespace

TEST_CASE("genl: 1000 peers split over page-sized SET_DEVICE messages decode back to the input", "[genl]") {
  Device want = big_change(1000, 500, 400);  // peer 500 alone needs more than one page
  auto msgs = fa_test::bytes_of(genl_build_set(want, 0x1234, 4096));
  REQUIRE(msgs.size() > 10);
  size_t resumed = 0;
  for (size_t i = 0; i < msgs.size(); ++i) {
    INFO("message " << i);
    CHECK(msgs[i].size() <= 4096);
    nlmsghdr h;
    std::memcpy(&h, msgs[i].data(), sizeof h);
    CHECK(h.nlmsg_type == 0x1234);
    CHECK(h.nlmsg_len == msgs[i].size());
    CHECK((h.nlmsg_flags & (NLM_F_REQUEST | NLM_F_ACK)) == (NLM_F_REQUEST | NLM_F_ACK));
    Device one = decode_one(msgs[i]);
    CHECK(one.name == "wg-big");
    // Device-wide settings travel only in the first message.
    CHECK(one.private_key.has_value() == (i == 0));
    CHECK(one.listen_port.has_value() == (i == 0));
    REQUIRE_FALSE(one.peers.empty());
    if (i > 0) {
      Device prev = decode_one(msgs[i - 1]);
      if (prev.peers.back().public_key == one.peers.front().public_key) {
        ++resumed;
        // A resumed peer must not repeat REPLACE_ALLOWEDIPS: that would drop
        // the allowed IPs sent in the message before.
        CHECK_FALSE(one.peers.front().replace_allowed_ips);
        CHECK_FALSE(one.peers.front().endpoint);
      }
    }
  }
  CHECK(resumed >= 2);  // the fat peer spans at least three messages
  auto got = genl_parse_device(msgs);
  REQUIRE(got.ok());
  compare(want, *got);
}

TEST_CASE("genl: only the request that carries the private key is wiped when freed", "[genl]") {
  Device want = big_change(200, 0, 1);
  REQUIRE(want.private_key);
  auto msgs = genl_build_set(want, 0x1234, 4096);
  REQUIRE(msgs.size() > 2);
  for (size_t i = 0; i < msgs.size(); ++i) {
    INFO("message " << i);
    CHECK(msgs[i].get_deleter().secret == (i == 0));
  }
  want.private_key.reset();  // peers alone: nothing secret in any request
  auto plain = genl_build_set(want, 0x1234, 4096);
  REQUIRE(plain.size() > 2);
  for (const auto& m : plain) CHECK_FALSE(m.get_deleter().secret);
}

TEST_CASE("genl: nests carry NLA_F_NESTED and a tiny limit fails instead of looping", "[genl]") {
  Device d = big_change(3, 99, 0);
  auto msgs = fa_test::bytes_of(genl_build_set(d, 20, 4096));
  REQUIRE(msgs.size() == 1);
  // Find WGDEVICE_A_PEERS among the top-level attributes.
  const auto& m = msgs[0];
  size_t off = NLMSG_HDRLEN + 4;  // genlmsghdr
  bool found = false;
  while (off + 4 <= m.size()) {
    uint16_t len, type;
    std::memcpy(&len, &m[off], 2);
    std::memcpy(&type, &m[off + 2], 2);
    if ((type & NLA_TYPE_MASK) == WGDEVICE_A_PEERS) {
      found = true;
      CHECK((type & NLA_F_NESTED) != 0);
    }
    off += NLA_ALIGN(len);
  }
  CHECK(found);
  CHECK(genl_build_set(d, 20, 128).empty());
  // An empty change set still names the device.
  Device empty;
  empty.name = "wg0";
  auto e = fa_test::bytes_of(genl_build_set(empty, 20, 4096));
  REQUIRE(e.size() == 1);
  CHECK(decode_one(e[0]).name == "wg0");
}

// genl_build_set appends attributes itself (genl.cpp, Attrs): the same
// request built attribute by attribute with libnl's own nla_put and
// nla_nest_*, every kind of attribute once (IPv4 and IPv6 endpoints and
// allowed IPs, odd-sized payloads that need padding, flags, a removed
// peer), must match it byte for byte, padding included.
TEST_CASE("genl: requests are byte for byte what libnl's nla_put builds", "[genl]") {
  Device d;
  d.name = "wg-odd5";  // 8 bytes with its NUL; "wg0" below: 4
  d.private_key = key_of(9, 9);
  d.listen_port = 51820;
  d.fwmark = 0x2a;
  d.replace_peers = true;
  Peer a;
  a.public_key = key_of(1);
  a.endpoint = *Endpoint::parse("192.0.2.1:51820");
  a.persistent_keepalive = 25;
  a.allowed_ips = {*IpPrefix::parse("10.42.0.2/32"), *IpPrefix::parse("fd00::7/64")};
  Peer b;
  b.public_key = key_of(2);
  b.update_only = true;
  b.replace_allowed_ips = true;
  b.endpoint = *Endpoint::parse("[2001:db8::1]:1000");
  b.allowed_ips = {*IpPrefix::parse("10.42.1.0/24")};
  Peer c;
  c.public_key = key_of(3);
  c.remove = true;
  d.peers = {a, b, c};

  // A reference request, the bytes of one with its name put by libnl.
  auto start_ref = [](const char* name) {
    nl_msg* m = nlmsg_alloc_size(4096);
    REQUIRE(m);
    REQUIRE(genlmsg_put(m, NL_AUTO_PORT, NL_AUTO_SEQ, 0x1234, 0, NLM_F_REQUEST | NLM_F_ACK, WG_CMD_SET_DEVICE,
                        WG_GENL_VERSION));
    REQUIRE(nla_put_string(m, WGDEVICE_A_IFNAME, name) == 0);
    return m;
  };
  auto bytes_of_ref = [](nl_msg* m) {
    const nlmsghdr* h = nlmsg_hdr(m);
    std::vector<uint8_t> out(reinterpret_cast<const uint8_t*>(h),
                             reinterpret_cast<const uint8_t*>(h) + h->nlmsg_len);
    nlmsg_free(m);
    return out;
  };
  nl_msg* ref = start_ref("wg-odd5");
  REQUIRE(nla_put(ref, WGDEVICE_A_PRIVATE_KEY, 32, d.private_key->data()) == 0);
  REQUIRE(nla_put_u16(ref, WGDEVICE_A_LISTEN_PORT, 51820) == 0);
  REQUIRE(nla_put_u32(ref, WGDEVICE_A_FWMARK, 0x2a) == 0);
  REQUIRE(nla_put_u32(ref, WGDEVICE_A_FLAGS, WGDEVICE_F_REPLACE_PEERS) == 0);
  nlattr* peers = nla_nest_start(ref, WGDEVICE_A_PEERS | NLA_F_NESTED);
  auto put_ips = [&](const Peer& p) {
    nlattr* ips = nla_nest_start(ref, WGPEER_A_ALLOWEDIPS | NLA_F_NESTED);
    for (const auto& ip : p.allowed_ips) {
      nlattr* one = nla_nest_start(ref, NLA_F_NESTED);
      IpPrefix net = ip.network();
      nla_put_u16(ref, WGALLOWEDIP_A_FAMILY, static_cast<uint16_t>(net.family));
      nla_put(ref, WGALLOWEDIP_A_IPADDR, net.family == AF_INET ? 4 : 16, net.addr.data());
      nla_put_u8(ref, WGALLOWEDIP_A_CIDR_MASK, net.len);
      nla_nest_end(ref, one);
    }
    nla_nest_end(ref, ips);
  };
  nlattr* pa = nla_nest_start(ref, NLA_F_NESTED);
  nla_put(ref, WGPEER_A_PUBLIC_KEY, 32, a.public_key.data());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(51820);
  std::memcpy(&sa.sin_addr, a.endpoint->addr.data(), 4);
  nla_put(ref, WGPEER_A_ENDPOINT, sizeof sa, &sa);
  nla_put_u16(ref, WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL, 25);
  put_ips(a);
  nla_nest_end(ref, pa);
  nlattr* pb = nla_nest_start(ref, NLA_F_NESTED);
  nla_put(ref, WGPEER_A_PUBLIC_KEY, 32, b.public_key.data());
  nla_put_u32(ref, WGPEER_A_FLAGS, WGPEER_F_UPDATE_ONLY | WGPEER_F_REPLACE_ALLOWEDIPS);
  sockaddr_in6 sa6{};
  sa6.sin6_family = AF_INET6;
  sa6.sin6_port = htons(1000);
  std::memcpy(&sa6.sin6_addr, b.endpoint->addr.data(), 16);
  nla_put(ref, WGPEER_A_ENDPOINT, sizeof sa6, &sa6);
  put_ips(b);
  nla_nest_end(ref, pb);
  nlattr* pc = nla_nest_start(ref, NLA_F_NESTED);
  nla_put(ref, WGPEER_A_PUBLIC_KEY, 32, c.public_key.data());
  nla_put_u32(ref, WGPEER_A_FLAGS, WGPEER_F_REMOVE_ME);
  nla_nest_end(ref, pc);
  nla_nest_end(ref, peers);
  const std::vector<uint8_t> want = bytes_of_ref(ref);

  auto got = fa_test::bytes_of(genl_build_set(d, 0x1234, 4096));
  REQUIRE(got.size() == 1);
  // The sequence number and port are libnl's to fill in at send time.
  CHECK(got[0] == want);

  // A name whose length needs padding, and no peers: the empty peer list is
  // not sent (libnl drops an empty nest).
  Device e;
  e.name = "wg0";
  e.listen_port = 1;
  nl_msg* ref2 = start_ref("wg0");
  nla_put_u16(ref2, WGDEVICE_A_LISTEN_PORT, 1);
  const std::vector<uint8_t> want2 = bytes_of_ref(ref2);
  auto got2 = fa_test::bytes_of(genl_build_set(e, 0x1234, 4096));
  REQUIRE(got2.size() == 1);
  CHECK(got2[0] == want2);
}

// Each request's buffer is sized to what is left of the change, at most the
// bound (libnl zeroes all of it): its size must be an upper bound of what
// the peers take, or a change would split into more requests than the bound
// asks for.
TEST_CASE("genl: a request's buffer is what the rest of the change needs, at most the bound", "[genl]") {
  Device all = big_change(300, 100, 40);  // ~40 KB of attributes
  auto one = genl_build_set(all, 0x1234, 60000);
  REQUIRE(one.size() == 1);  // the estimate never falls short
  const size_t used = nlmsg_hdr(one[0].get())->nlmsg_len;
  CHECK(nlmsg_get_max_size(one[0].get()) >= used);
  CHECK(nlmsg_get_max_size(one[0].get()) < 2 * used);
  CHECK(genl_parse_device(fa_test::bytes_of(one)).ok());

  Device small = big_change(1, 99, 0);
  auto s = genl_build_set(small, 0x1234, 16 * 1024);
  REQUIRE(s.size() == 1);
  CHECK(nlmsg_get_max_size(s[0].get()) < 512);

  for (const auto& m : genl_build_set(all, 0x1234, 4096)) CHECK(nlmsg_get_max_size(m.get()) <= 4096);
  // A bound past what a nested attribute's 16-bit length can say is held
  // to it: the requests split instead of carrying a corrupt nest.
  Device huge = big_change(1000, 500, 400);
  auto big = genl_build_set(huge, 0x1234, 1 << 20);
  REQUIRE(big.size() >= 2);
  for (const auto& m : big) CHECK(nlmsg_hdr(m.get())->nlmsg_len <= 0xffff);
  auto back = genl_parse_device(fa_test::bytes_of(big));
  REQUIRE(back.ok());
  compare(huge, *back);
}

TEST_CASE("genl: decoder refuses bad lengths and truncation", "[genl]") {
  Device d = big_change(2, 99, 0);
  auto msgs = fa_test::bytes_of(genl_build_set(d, 20, 4096));
  REQUIRE(msgs.size() == 1);
  auto m = msgs[0];
  // Truncated buffer: nlmsg_len now exceeds it.
  auto cut = m;
  cut.resize(cut.size() - 9);
  CHECK_FALSE(genl_parse_device({cut}).ok());
  // Shrink the private key attribute to 31 bytes while keeping the framing
  // consistent: the checked parser must refuse it.
  size_t off = NLMSG_HDRLEN + 4;
  while (off + 4 <= m.size()) {
    uint16_t len, type;
    std::memcpy(&len, &m[off], 2);
    std::memcpy(&type, &m[off + 2], 2);
    if (type == WGDEVICE_A_PRIVATE_KEY) {
      uint16_t shorter = static_cast<uint16_t>(len - 1);
      std::memcpy(&m[off], &shorter, 2);
      break;
    }
    off += NLA_ALIGN(len);
  }
  auto r = genl_parse_device({m});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message, Catch::Contains("WGDEVICE_A_PRIVATE_KEY"));
}
