// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "overlay/overlay.hpp"

using namespace fa::overlay;

namespace {
Key key(uint8_t n) {
  Key k{};
  k[0] = n;
  return k;
}
IpPrefix pfx(const char* s) { return *IpPrefix::parse(s); }
Endpoint ep(const char* s) { return *Endpoint::parse(s); }
Peer peer(uint8_t n, const char* endpoint, std::vector<const char*> ips, uint16_t ka = 0) {
  Peer p;
  p.public_key = key(n);
  p.endpoint = ep(endpoint);
  for (auto i : ips) p.allowed_ips.push_back(pfx(i));
  p.persistent_keepalive = ka;
  return p;
}
// What WireGuard does with a set request (replace_peers, remove,
// update_only, replace_allowed_ips): the oracle the diff is checked against.
Device merge(Device d, const Device& ch, const Key* = nullptr) {
  if (ch.private_key) d.private_key = ch.private_key;
  if (ch.listen_port) d.listen_port = ch.listen_port;
  if (ch.fwmark) d.fwmark = ch.fwmark;
  if (ch.replace_peers) d.peers.clear();
  std::map<Key, size_t> idx;
  for (size_t i = 0; i < d.peers.size(); ++i) idx[d.peers[i].public_key] = i;
  std::vector<bool> gone(d.peers.size(), false);
  for (const auto& c : ch.peers) {
    auto it = idx.find(c.public_key);
    if (c.remove) {
      if (it != idx.end()) {
        gone[it->second] = true;
        idx.erase(it);
      }
      continue;
    }
    if (it == idx.end()) {
      if (c.update_only) continue;
      Peer p;
      p.public_key = c.public_key;
      p.persistent_keepalive = 0;
      idx[c.public_key] = d.peers.size();
      d.peers.push_back(p);
      gone.push_back(false);
      it = idx.find(c.public_key);
    }
    Peer& p = d.peers[it->second];
    if (c.endpoint) p.endpoint = c.endpoint;
    if (c.persistent_keepalive) p.persistent_keepalive = c.persistent_keepalive;
    if (c.replace_allowed_ips) p.allowed_ips.clear();
    for (const auto& a : c.allowed_ips) {
      IpPrefix n = a.network();
      if (std::find(p.allowed_ips.begin(), p.allowed_ips.end(), n) == p.allowed_ips.end())
        p.allowed_ips.push_back(n);
    }
  }
  if (std::find(gone.begin(), gone.end(), true) != gone.end()) {
    std::vector<Peer> kept;
    kept.reserve(d.peers.size());
    for (size_t i = 0; i < d.peers.size(); ++i)
      if (!gone[i]) kept.push_back(std::move(d.peers[i]));
    d.peers = std::move(kept);
  }
  return d;
}

Device dev(std::vector<Peer> peers) {
  Device d;
  d.name = "wg0";
  d.private_key = key(99);
  d.listen_port = 51820;
  d.peers = std::move(peers);
  return d;
}
}  // namespace

TEST_CASE("prefixes and endpoints parse, print and reject", "[model]") {
  CHECK(pfx("10.42.0.1/24").str() == "10.42.0.1/24");
  CHECK(pfx("10.42.0.1/24").network().str() == "10.42.0.0/24");
  CHECK(pfx("10.42.0.7").len == 32);
  CHECK(pfx("fd00::1/64").network().str() == "fd00::/64");
  CHECK(pfx("10.42.0.0/24").contains(pfx("10.42.0.9/32")));
  CHECK_FALSE(pfx("10.42.0.0/24").contains(pfx("10.42.1.9/32")));
  CHECK_FALSE(pfx("10.42.0.0/24").contains(pfx("10.0.0.0/8")));
  CHECK_FALSE(IpPrefix::parse("10.42.0.1/33").ok());
  CHECK_FALSE(IpPrefix::parse("10.42.0/24").ok());
  CHECK_FALSE(IpPrefix::parse("10.42.0.1/2x").ok());
  CHECK(ep("192.0.2.1:51820").str() == "192.0.2.1:51820");
  CHECK(ep("[fd00::1]:7").str() == "[fd00::1]:7");
  CHECK(ep("[fd00::1]:7").family == AF_INET6);
  CHECK_FALSE(Endpoint::parse("192.0.2.1").ok());
  CHECK_FALSE(Endpoint::parse("192.0.2.1:0").ok());
  CHECK_FALSE(Endpoint::parse("192.0.2.1:65536").ok());
  CHECK_FALSE(Endpoint::parse("fd00::1:7").ok());
  CHECK_FALSE(Endpoint::parse("example.com:51820").ok());
  CHECK_FALSE(Endpoint::parse("[192.0.2.1]:5").ok());
}

TEST_CASE("an address with a NUL inside is refused, not read up to the NUL", "[model]") {
  // JSON's \u0000 ends a C string: "10.42.0.2\u0000junk" would read as 10.42.0.2.
  CHECK_FALSE(IpPrefix::parse(std::string_view("10.42.0.2\0junk", 14)).ok());
  CHECK_FALSE(IpPrefix::parse(std::string_view("fd00::1\0junk", 12)).ok());
  CHECK_FALSE(Endpoint::parse(std::string_view("10.42.0.2\0:51820", 16)).ok());
  for (const char* bad : {"1.2.3.4.", ".1.2.3.4", "1..2.3", " 1.2.3.4", "1.2.3.4 ", "01.2.3.4", "1.2.3.4/032x"})
    CHECK_FALSE(IpPrefix::parse(bad).ok());
  CHECK(IpPrefix::parse("255.255.255.255/32")->str() == "255.255.255.255/32");
  CHECK(IpPrefix::parse("10.0.0.1/032")->len == 32);
}

TEST_CASE("network() and contains() agree with bit-by-bit masking at every prefix length", "[model]") {
  // Reference: bit i of the address (big-endian) kept iff i < len.
  auto ref_network = [](const IpPrefix& p) {
    IpPrefix n = p;
    for (unsigned i = 0; i < 128; ++i)
      if (i >= p.len) n.addr[i / 8] &= static_cast<uint8_t>(~(0x80u >> (i % 8)));
    return n;
  };
  uint32_t seed = 12345;
  auto rnd = [&seed] { return static_cast<uint8_t>((seed = seed * 1103515245u + 12345u) >> 16); };
  for (int family : {AF_INET, AF_INET6}) {
    unsigned width = family == AF_INET ? 32 : 128;
    for (int round = 0; round < 20; ++round) {
      IpPrefix a;
      a.family = family;
      for (unsigned i = 0; i < width / 8; ++i) a.addr[i] = rnd();
      for (unsigned len = 0; len <= width; ++len) {
        a.len = static_cast<uint8_t>(len);
        IpPrefix n = a.network();
        REQUIRE(n.addr == ref_network(a).addr);
        CHECK(n.len == len);
        // An address inside: the network with random host bits, any longer prefix.
        IpPrefix in = n;
        for (unsigned i = len; i < width; ++i)
          if (rnd() & 1) in.addr[i / 8] |= static_cast<uint8_t>(0x80u >> (i % 8));
        in.len = static_cast<uint8_t>(len + (width - len) / 2);
        CHECK(a.contains(in));
        CHECK(n.contains(in));
        // Outside: one bit inside the prefix flipped; or a shorter prefix; or the other family.
        if (len > 0) {
          IpPrefix out = in;
          unsigned bit = rnd() % len;
          out.addr[bit / 8] ^= static_cast<uint8_t>(0x80u >> (bit % 8));
          CHECK_FALSE(a.contains(out));
          IpPrefix shorter = n;
          shorter.len = static_cast<uint8_t>(len - 1);
          CHECK_FALSE(a.contains(shorter));
        }
        IpPrefix other = in;
        other.family = family == AF_INET ? AF_INET6 : AF_INET;
        CHECK_FALSE(a.contains(other));
      }
    }
  }
}

TEST_CASE("diff: identical state is a no-op", "[diff]") {
  Device a =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"})});
  Device b = a;
  std::reverse(b.peers.begin(), b.peers.end());
  CHECK(is_noop(diff(a, b)));
}

TEST_CASE("diff: add and remove touch only those peers", "[diff]") {
  Device cur =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"})});
  Device want =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(3, "192.0.2.3:51820", {"10.42.0.4/32"})});
  Device ch = diff(cur, want);
  REQUIRE(ch.peers.size() == 2);
  CHECK_FALSE(ch.replace_peers);
  CHECK_FALSE(ch.private_key);
  CHECK_FALSE(ch.listen_port);
  const Peer& add = ch.peers[0];
  CHECK(add.public_key == key(3));
  CHECK_FALSE(add.remove);
  CHECK_FALSE(add.update_only);
  CHECK(add.endpoint->str() == "192.0.2.3:51820");
  CHECK(add.allowed_ips.size() == 1);
  // Nothing a new peer does not need: no REPLACE, no zero keepalive.
  CHECK_FALSE(add.replace_allowed_ips);
  CHECK_FALSE(add.persistent_keepalive);
  const Peer& rm = ch.peers[1];
  CHECK(rm.public_key == key(2));
  CHECK(rm.remove);
  CHECK(rm.allowed_ips.empty());
}

TEST_CASE("diff: when no current peer stays, the peer list is replaced in one step", "[diff]") {
  Device cur =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"})});
  Device want =
      dev({peer(3, "192.0.2.3:51820", {"10.42.0.4/32"}), peer(4, "192.0.2.4:51820", {"10.42.0.5/32"}, 25)});
  {
    Device w = want;
    Device ch = diff(cur, w);
    CHECK(ch.replace_peers);
    REQUIRE(ch.peers.size() == 2);  // the new peers only: no remove entry
    CHECK(ch.peers[0].public_key == key(3));
    CHECK(ch.peers[1].public_key == key(4));
    for (const auto& p : ch.peers) {
      CHECK_FALSE(p.remove);
      CHECK_FALSE(p.update_only);
    }
    CHECK(ch.peers[1].persistent_keepalive == 25);
    Device after = merge(cur, ch);
    REQUIRE(after.peers.size() == 2);
    CHECK(is_noop(diff(after, want)));
  }
  // Emptying the list: the flag alone.
  Device none = dev({});
  Device empty = diff(cur, none);
  CHECK(empty.replace_peers);
  CHECK(empty.peers.empty());
  CHECK_FALSE(is_noop(empty));
  CHECK(merge(cur, empty).peers.empty());
  // One current peer stays, unchanged or changed: per-peer removal, never
  // the flag (it would reset that peer's session).
  for (const char* endpoint : {"192.0.2.2:51820", "192.0.2.22:51820"}) {
    INFO(endpoint);
    Device keep = dev({peer(2, endpoint, {"10.42.0.3/32"}), peer(3, "192.0.2.3:51820", {"10.42.0.4/32"})});
    Device ch = diff(cur, keep);
    CHECK_FALSE(ch.replace_peers);
    size_t removes = 0;
    for (const auto& p : ch.peers)
      if (p.remove) {
        CHECK(p.public_key == key(1));
        ++removes;
      }
    CHECK(removes == 1);
  }
  // A device without peers has nothing to replace.
  CHECK_FALSE(diff(none, want).replace_peers);
  CHECK_FALSE(diff(none, Device(want)).replace_peers);
}

TEST_CASE("diff: endpoint change sends only the endpoint of that peer", "[diff]") {
  Device cur =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"})});
  Device want = cur;
  want.peers[1].endpoint = ep("192.0.2.22:51821");
  Device ch = diff(cur, want);
  REQUIRE(ch.peers.size() == 1);
  CHECK(ch.peers[0].public_key == key(2));
  CHECK(ch.peers[0].update_only);
  CHECK_FALSE(ch.peers[0].replace_allowed_ips);
  CHECK(ch.peers[0].allowed_ips.empty());
  CHECK_FALSE(ch.peers[0].persistent_keepalive);
  CHECK(ch.peers[0].endpoint->str() == "192.0.2.22:51821");
}

TEST_CASE("diff: allowed-IP change replaces that peer's list only", "[diff]") {
  Device cur =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"})});
  Device want = cur;
  want.peers[0].allowed_ips.push_back(pfx("10.42.0.128/25"));
  Device ch = diff(cur, want);
  REQUIRE(ch.peers.size() == 1);
  CHECK(ch.peers[0].public_key == key(1));
  CHECK(ch.peers[0].update_only);
  CHECK(ch.peers[0].replace_allowed_ips);
  CHECK(ch.peers[0].allowed_ips.size() == 2);
  CHECK_FALSE(ch.peers[0].endpoint);
  // Host bits and order do not count as a change: the kernel stores them masked.
  Device same = cur;
  same.peers[0].allowed_ips = {pfx("10.42.0.2/32")};
  cur.peers[0].allowed_ips = {pfx("10.42.0.2/32")};
  CHECK(is_noop(diff(cur, same)));
}

TEST_CASE("diff: a new peer carries a keepalive only when it is on", "[diff]") {
  Device cur = dev({});
  Device want = dev(
      {peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}, 25), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"}, 0)});
  Device ch = diff(cur, want);
  REQUIRE(ch.peers.size() == 2);
  CHECK(ch.peers[0].persistent_keepalive == 25);
  CHECK_FALSE(ch.peers[1].persistent_keepalive);
  // What the device holds afterwards is the desired state either way.
  Device after = merge(cur, ch, nullptr);
  REQUIRE(after.peers.size() == 2);
  CHECK(after.peers[0].persistent_keepalive == 25);
  CHECK(after.peers[1].persistent_keepalive == 0);
  CHECK(is_noop(diff(after, want)));
}

TEST_CASE("diff: keepalive, key and port changes", "[diff]") {
  Device cur = dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}, 0)});
  Device want = dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}, 25)});
  want.listen_port = 51821;
  want.private_key = key(98);
  Device ch = diff(cur, want);
  CHECK(ch.listen_port == 51821);
  CHECK(ch.private_key == key(98));
  REQUIRE(ch.peers.size() == 1);
  CHECK(ch.peers[0].persistent_keepalive == 25);
  CHECK_FALSE(ch.peers[0].endpoint);
}

