// SPDX-License-Identifier: Apache-2.0
#include <arpa/inet.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <charconv>
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

TEST_CASE("IPv4 addresses parse exactly as inet_pton reads them", "[model]") {
  // Every string of 1-5 dot-separated parts from these, against glibc.
  const std::vector<std::string> parts = {"",    "0",   "00",  "01",  "7",    "10",   "99",
                                          "100", "255", "256", "999", "1000", "0255", "1a"};
  size_t tried = 0, accepted = 0;
  std::string first_mismatch;
  std::vector<size_t> idx;
  for (size_t n = 1; n <= 5; ++n) {
    idx.assign(n, 0);
    for (;;) {
      std::string c;
      for (size_t i = 0; i < n; ++i) c += (i ? "." : "") + parts[idx[i]];
      uint8_t ref[4];
      bool ok = inet_pton(AF_INET, c.c_str(), ref) == 1;
      auto got = IpPrefix::parse(c);
      ++tried;
      accepted += ok;
      bool same =
          got.ok() == ok &&
          (!ok || (got->family == AF_INET && got->len == 32 && std::memcmp(got->addr.data(), ref, 4) == 0));
      if (!same && first_mismatch.empty()) first_mismatch = "'" + c + "'";
      size_t i = 0;
      while (i < n && ++idx[i] == parts.size()) idx[i++] = 0;
      if (i == n) break;
    }
  }
  INFO("first mismatch: " << first_mismatch);
  CHECK(first_mismatch.empty());
  CHECK(tried == 14 + 14 * 14 + 14 * 14 * 14 + 14 * 14 * 14 * 14 + 14 * 14 * 14 * 14 * 14);
  CHECK(accepted == 6 * 6 * 6 * 6);  // four parts, each 0, 7, 10, 99, 100 or 255
  // Around the edges, and a NUL inside (JSON's \u0000), which a C string
  // would end at.
  for (const char* bad : {"1.2.3.4.", ".1.2.3.4", "1..2.3", " 1.2.3.4", "1.2.3.4 ", "+1.2.3.4", "1.2.3.-4"})
    CHECK_FALSE(IpPrefix::parse(bad).ok());
  CHECK_FALSE(IpPrefix::parse(std::string_view("10.42.0.2\0junk", 14)).ok());
  CHECK_FALSE(IpPrefix::parse(std::string_view("fd00::1\0junk", 12)).ok());
  CHECK(IpPrefix::parse("0.0.0.0").ok());
  CHECK(IpPrefix::parse("255.255.255.255/32")->str() == "255.255.255.255/32");
}

TEST_CASE("IPv4 prefixes and endpoints parse as inet_pton and a whole decimal number read them", "[model]") {
  // Addresses of four parts from these, each with every suffix below, as a
  // prefix and as an endpoint, against glibc's inet_pton and from_chars.
  const std::vector<std::string> parts = {"", "0", "00", "01", "7", "99", "255", "256", "1000", "1a"};
  const std::vector<std::string> numbers = {"",       "0",     "1",     "8",    "32", "33", "032", "00032",
                                            "000032", "65535", "65536", "0080", "8a", "-1", "+8"};
  size_t tried = 0, prefixes = 0, endpoints = 0;
  std::string first_mismatch;
  auto reference_number = [](const std::string& t, unsigned max, unsigned& v) {
    auto [q, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return !t.empty() && ec == std::errc() && q == t.data() + t.size() && v <= max;
  };
  for (size_t a = 0; a < parts.size(); ++a)
    for (size_t b = 0; b < parts.size(); ++b)
      for (size_t c = 0; c < parts.size(); ++c)
        for (size_t d = 0; d < parts.size(); ++d) {
          const std::string ip = parts[a] + "." + parts[b] + "." + parts[c] + "." + parts[d];
          uint8_t ref[4];
          const bool ip_ok = inet_pton(AF_INET, ip.c_str(), ref) == 1;
          for (const auto& num : numbers) {
            unsigned v = 0;
            ++tried;
            const bool pfx_ok = ip_ok && reference_number(num, 32, v);
            auto p = IpPrefix::parse(ip + "/" + num);
            prefixes += pfx_ok;
            if ((p.ok() != pfx_ok ||
                 (pfx_ok &&
                  (p->family != AF_INET || p->len != v || std::memcmp(p->addr.data(), ref, 4) != 0 ||
                   std::any_of(p->addr.begin() + 4, p->addr.end(), [](uint8_t x) { return x != 0; })))) &&
                first_mismatch.empty())
              first_mismatch = "prefix '" + ip + "/" + num + "'";
            const bool ep_ok = ip_ok && reference_number(num, 65535, v) && v != 0;
            auto e = Endpoint::parse(ip + ":" + num);
            endpoints += ep_ok;
            if ((e.ok() != ep_ok || (ep_ok && (e->family != AF_INET || e->port != v ||
                                               std::memcmp(e->addr.data(), ref, 4) != 0))) &&
                first_mismatch.empty())
              first_mismatch = "endpoint '" + ip + ":" + num + "'";
          }
        }
  INFO("first mismatch: " << first_mismatch);
  CHECK(first_mismatch.empty());
  CHECK(tried == 10 * 10 * 10 * 10 * 15);
  // Parts 0, 7, 99 and 255; lengths 0, 1, 8, 32, 032, 00032 and 000032;
  // ports 1, 8, 32, 33, 032, 00032, 000032, 65535 and 0080.
  CHECK(prefixes == 4 * 4 * 4 * 4 * 7);
  CHECK(endpoints == 4 * 4 * 4 * 4 * 9);
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
  // Printing straight into a buffer gives what str() gives.
  for (const char* s :
       {"10.42.0.1/24", "0.0.0.0/0", "255.255.255.255/32", "fd00::1/64", "::/0", "2001:db8::/32"}) {
    std::string out = "x=";
    pfx(s).append_to(out);
    CHECK(out == "x=" + pfx(s).str());
  }
  for (const char* s : {"192.0.2.1:51820", "1.2.3.4:1", "[fd00::1]:7", "[2001:db8::42]:65535"}) {
    std::string out = "y=";
    ep(s).append_to(out);
    CHECK(out == "y=" + ep(s).str());
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
  for (bool by_move : {false, true}) {
    INFO("by_move " << by_move);
    Device w = want;
    Device ch = by_move ? diff(cur, std::move(w)) : diff(cur, std::as_const(w));
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

TEST_CASE("merge(current, diff(current, desired)) holds the desired peers", "[diff]") {
  Device cur =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"}),
           peer(4, "192.0.2.4:51820", {"10.42.0.5/32"}, 25)});
  Device want =
      dev({peer(1, "192.0.2.9:51820", {"10.42.0.2/32", "10.42.0.66/32"}),
           peer(3, "[2001:db8::3]:51820", {"10.42.0.4/32"}), peer(4, "192.0.2.4:51820", {"10.42.0.5/32"})});
  want.listen_port = 4000;
  Device got = merge(cur, diff(cur, want));
  CHECK(got.listen_port == 4000);
  CHECK(is_noop(diff(got, want)));
  REQUIRE(got.peers.size() == 3);
  CHECK(got.peers[2].public_key == key(3));
  CHECK(got.peers[0].allowed_ips.size() == 2);
  CHECK(got.peers[1].persistent_keepalive == 0);
  // update_only never creates a peer; remove of an unknown peer is harmless.
  Device ch;
  Peer ghost;
  ghost.public_key = key(77);
  ghost.update_only = true;
  ghost.endpoint = ep("192.0.2.77:1");
  Peer rm;
  rm.public_key = key(78);
  rm.remove = true;
  ch.peers = {ghost, rm};
  CHECK(merge(cur, ch).peers.size() == 3);
}

TEST_CASE("diff of a desired device given up equals diff of a kept one, and takes only its allowed IPs",
          "[diff]") {
  Device cur =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"}),
           peer(4, "192.0.2.4:51820", {"10.42.0.5/32"}, 25), peer(5, "192.0.2.5:51820", {"10.42.0.6/32"})});
  Device want = dev({peer(1, "192.0.2.9:51820", {"10.42.0.2/32"}),
                     peer(3, "[2001:db8::3]:51820", {"10.42.0.4/32", "fd00::4/128"}),
                     peer(4, "192.0.2.4:51820", {"10.42.0.5/32"}, 25),
                     peer(5, "192.0.2.5:51820", {"10.42.0.6/32", "10.42.1.0/24"}),
                     peer(6, "192.0.2.6:51820", {"10.42.0.7/32"}, 15)});
  want.listen_port = 4000;
  want.private_key = key(99);
  const Device kept = want;
  Device by_copy = diff(cur, kept);
  Device by_move = diff(cur, std::move(want));
  auto text = [](const Peer& p) {
    std::string t = key_to_base64(p.public_key) + (p.endpoint ? " " + p.endpoint->str() : "") +
                    " ka=" + (p.persistent_keepalive ? std::to_string(*p.persistent_keepalive) : "-") +
                    " rm=" + std::to_string(p.remove) + " up=" + std::to_string(p.update_only) +
                    " repl=" + std::to_string(p.replace_allowed_ips);
    for (const auto& n : p.allowed_ips) t += " " + n.str();
    return t;
  };
  CHECK(by_move.listen_port == by_copy.listen_port);
  CHECK(by_move.private_key == by_copy.private_key);
  REQUIRE(by_move.peers.size() == by_copy.peers.size());
  REQUIRE(by_copy.peers.size() == 5);  // 1 endpoint, 3 new, 5 allowed IPs, 6 new, 2 removed
  for (size_t i = 0; i < by_copy.peers.size(); ++i) CHECK(text(by_move.peers[i]) == text(by_copy.peers[i]));
  // The given-up device keeps its keys and key order; only the allowed IPs
  // that went into the change are gone (peer 3's and 5's and 6's).
  REQUIRE(want.peers.size() == kept.peers.size());
  for (size_t i = 0; i < want.peers.size(); ++i) CHECK(want.peers[i].public_key == kept.peers[i].public_key);
  CHECK(want.private_key == key(99));
  CHECK(want.peers[0].allowed_ips.size() == 1);  // unchanged peer 1: its list was only compared
  CHECK(want.peers[1].allowed_ips.empty());
  CHECK(want.peers[3].allowed_ips.empty());
  CHECK(want.peers[4].allowed_ips.empty());
}

TEST_CASE("diff of a first push given up equals diff of a kept one, in the desired list's own storage",
          "[diff]") {
  Device cur = dev({});
  Device want =
      dev({peer(1, "192.0.2.1:51820", {"10.42.0.2/32"}, 25), peer(2, "192.0.2.2:51820", {"10.42.0.3/32"}),
           peer(3, "[2001:db8::3]:51820", {"10.42.0.4/32", "fd00::4/128"})});
  want.peers[1].remove = true;  // flags of a desired peer do not reach the change
  want.peers[1].rx_bytes = 7;
  const Device kept = want;
  const Peer* storage = want.peers.data();
  Device by_copy = diff(cur, kept);
  Device by_move = diff(cur, std::move(want));
  REQUIRE(by_copy.peers.size() == 3);
  REQUIRE(by_move.peers.size() == 3);
  CHECK(by_move.peers.data() == storage);
  CHECK(want.peers.empty());
  CHECK(by_move.private_key == by_copy.private_key);
  CHECK(by_move.listen_port == by_copy.listen_port);
  for (size_t i = 0; i < 3; ++i) {
    const Peer& m = by_move.peers[i];
    const Peer& c = by_copy.peers[i];
    CHECK(m.public_key == c.public_key);
    CHECK(m.endpoint == c.endpoint);
    CHECK(m.allowed_ips == c.allowed_ips);
    CHECK(m.persistent_keepalive == c.persistent_keepalive);
    CHECK(m.remove == c.remove);
    CHECK(m.update_only == c.update_only);
    CHECK(m.replace_allowed_ips == c.replace_allowed_ips);
    CHECK(m.rx_bytes == c.rx_bytes);
  }
  CHECK_FALSE(by_move.peers[1].remove);
  CHECK(by_move.peers[1].rx_bytes == 0);
  CHECK(by_move.peers[0].persistent_keepalive == 25);
  CHECK_FALSE(by_move.peers[1].persistent_keepalive);  // 0: not sent for a new peer
  CHECK(by_move.peers[2].allowed_ips.size() == 2);
}
