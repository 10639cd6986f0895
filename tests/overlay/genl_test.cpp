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

// A peer list is one nested attribute with a 16-bit length: a bound past
// it is held to it, and the requests split instead of carrying a corrupt nest.
TEST_CASE("genl: a bound above 64 KiB is held to what a nest's length can say", "[genl]") {
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
