// SPDX-License-Identifier: Apache-2.0
// Addresses, endpoints and the pure diff (the model of wireguard-tools'
// syncconf: desired and observed are the same type, compared peer by peer).
#include <arpa/inet.h>
#include <endian.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <type_traits>
#include <unordered_map>

#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

namespace {

Result<unsigned> parse_uint(std::string_view s, unsigned max, const char* what) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v > max)
    return Error{std::string(what) + " must be an integer 0-" + std::to_string(max) + ", got '" +
                 std::string(s) + "'"};
  return v;
}

// A dotted quad exactly as inet_pton(AF_INET) takes it, at the start of
// [p, end): four decimal numbers 0-255 without leading zeros, three dots
// (tested against inet_pton). Returns where it ends, or nullptr. parse_ip
// then costs ~250 instructions a call instead of ~340 (callgrind), and a
// 1000-peer file has two addresses per peer.
const char* scan_ipv4(const char* p, const char* end, std::array<uint8_t, 16>& addr) {
  auto digit = [end](const char* q) { return q < end && static_cast<unsigned>(*q - '0') <= 9; };
  for (size_t octet = 0; octet < 4; ++octet) {
    if (octet > 0 && (p == end || *p++ != '.')) return nullptr;
    if (!digit(p)) return nullptr;
    unsigned v = static_cast<unsigned>(*p++ - '0');
    if (v != 0)  // a leading zero stands alone
      for (int k = 0; k < 2 && digit(p); ++k) v = v * 10 + static_cast<unsigned>(*p++ - '0');
    if (v > 255) return nullptr;
    addr[octet] = static_cast<uint8_t>(v);
  }
  return p;
}

bool parse_ipv4(std::string_view s, std::array<uint8_t, 16>& addr) {
  const char* end = s.data() + s.size();
  const char* p = scan_ipv4(s.data(), end, addr);
  return p != nullptr && p == end;  // (an empty view's data() may be null too)
}

// The usual shape of a prefix or an endpoint in one pass: a dotted quad,
// `sep`, then 1-5 decimal digits (what parse_uint takes, leading zeros
// included). Anything else is false, and the caller takes the general path,
// which also words the error: this only makes the common case cheaper
// (~220 instructions instead of ~400 for "10.42.0.2/32", two per peer).
bool parse_ipv4_with(std::string_view s, char sep, std::array<uint8_t, 16>& addr, unsigned& n) {
  const char* end = s.data() + s.size();
  const char* p = scan_ipv4(s.data(), end, addr);
  if (p == nullptr || p == end || *p++ != sep || p == end || end - p > 5) return false;
  unsigned v = 0;
  for (; p < end; ++p) {
    const unsigned d = static_cast<unsigned>(*p - '0');
    if (d > 9) return false;
    v = v * 10 + d;
  }
  n = v;
  return true;
}

bool parse_ip(std::string_view s, int& family, std::array<uint8_t, 16>& addr) {
  addr.fill(0);
  if (s.find(':') == std::string_view::npos) {
    family = AF_INET;
    return parse_ipv4(s, addr);
  }
  // inet_pton wants a C string; an address is at most 45 characters
  // (INET6_ADDRSTRLEN), so no heap copy per address of a 1000-peer file. A
  // NUL inside (JSON's \u0000) would end it early: refused.
  char z[INET6_ADDRSTRLEN + 1];
  if (s.size() >= sizeof z || s.find('\0') != std::string_view::npos) return false;
  std::copy(s.begin(), s.end(), z);
  z[s.size()] = '\0';
  family = AF_INET6;
  return inet_pton(AF_INET6, z, addr.data()) == 1;
}

// Writes the address at p (room for INET6_ADDRSTRLEN), returns the end.
// IPv4 is formatted with to_chars: glibc's inet_ntop goes through sprintf,
// ~2000 instructions per address, and a report lists every peer's endpoint
// and allowed IPs. IPv6 (zero-run compression) stays with inet_ntop.
char* put_ip(char* p, int family, const std::array<uint8_t, 16>& addr) {
  if (family == AF_INET) {
    for (int i = 0; i < 4; ++i) {
      if (i) *p++ = '.';
      p = std::to_chars(p, p + 3, addr[i]).ptr;
    }
    return p;
  }
  if (!inet_ntop(family, addr.data(), p, INET6_ADDRSTRLEN)) return p;
  return p + std::strlen(p);
}

// "addr" + sep + number, e.g. "10.0.0.1/32", "[fe80::1]:51820", appended.
void append_ip_with(std::string& out, int family, const std::array<uint8_t, 16>& addr, bool brackets,
                    char sep, unsigned n) {
  char buf[INET6_ADDRSTRLEN + 10];
  char* p = buf;
  if (brackets) *p++ = '[';
  p = put_ip(p, family, addr);
  if (brackets) *p++ = ']';
  *p++ = sep;
  p = std::to_chars(p, buf + sizeof buf, n).ptr;
  out.append(buf, p);
}

}  // namespace

Result<IpPrefix> IpPrefix::parse(std::string_view s) {
  IpPrefix p;
  if (unsigned n; parse_ipv4_with(s, '/', p.addr, n) && n <= 32) {
    p.family = AF_INET;
    p.len = static_cast<uint8_t>(n);
    return p;
  }
  auto slash = s.find('/');
  std::string_view ip = s.substr(0, slash);
  if (!parse_ip(ip, p.family, p.addr))
    return Error{"expected an IPv4 or IPv6 address with optional /prefix, got '" + std::string(s) + "'"};
  unsigned max = p.family == AF_INET ? 32 : 128;
  if (slash == std::string_view::npos) {
    p.len = static_cast<uint8_t>(max);
  } else {
    auto n = parse_uint(s.substr(slash + 1), max, "prefix length");
    if (!n) return n.take_error();
    p.len = static_cast<uint8_t>(*n);
  }
  return p;
}

std::string IpPrefix::str() const {
  std::string s;
  append_to(s);
  return s;
}

void IpPrefix::append_to(std::string& out) const { append_ip_with(out, family, addr, false, '/', len); }

namespace {

// The address bytes as two big-endian 64-bit words with every bit past the
// first `bits` cleared (bits past the family's width, 32 or 128, too).
std::array<uint64_t, 2> masked(const IpPrefix& p, unsigned bits) {
  bits = std::min(bits, p.family == AF_INET ? 32u : 128u);
  std::array<uint64_t, 2> w;
  std::memcpy(w.data(), p.addr.data(), 16);
  for (unsigned k = 0; k < 2; ++k) {
    unsigned b = bits > 64 * k ? std::min(bits - 64 * k, 64u) : 0;
    uint64_t keep = b == 0 ? 0 : b == 64 ? ~uint64_t{0} : ~uint64_t{0} << (64 - b);
    w[k] = be64toh(w[k]) & keep;
  }
  return w;
}

}  // namespace

IpPrefix IpPrefix::network() const {
  IpPrefix n = *this;
  auto w = masked(*this, len);
  for (auto& x : w) x = htobe64(x);
  std::memcpy(n.addr.data(), w.data(), 16);
  return n;
}

bool IpPrefix::contains(const IpPrefix& inner) const {
  if (inner.family != family || inner.len < len) return false;
  return masked(inner, len) == masked(*this, len);
}

Result<Endpoint> Endpoint::parse(std::string_view s) {
  Endpoint e;
  if (unsigned n; parse_ipv4_with(s, ':', e.addr, n) && n >= 1 && n <= 65535) {
    e.family = AF_INET;
    e.port = static_cast<uint16_t>(n);
    return e;
  }
  std::string_view host, port;  // (parse_ip clears what the quick path wrote)
  auto accepted = [s] {
    return "expected IPv4:port or [IPv6]:port with port 1-65535, got '" + std::string(s) + "'";
  };
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return Error{accepted()};
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
    if (!parse_ip(host, e.family, e.addr) || e.family != AF_INET6) return Error{accepted()};
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) return Error{accepted()};
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (!parse_ip(host, e.family, e.addr) || e.family != AF_INET) return Error{accepted()};
  }
  auto p = parse_uint(port, 65535, "port");
  if (!p || *p == 0) return Error{accepted()};
  e.port = static_cast<uint16_t>(*p);
  return e;
}

std::string Endpoint::str() const {
  std::string s;
  append_to(s);
  return s;
}

void Endpoint::append_to(std::string& out) const {
  append_ip_with(out, family, addr, family == AF_INET6, ':', port);
}

namespace {
IpList sorted_nets(IpList v) {
  // The kernel stores allowed IPs masked; compare the way it will hold them.
  for (auto& p : v) p = p.network();
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

bool same_nets(const IpList& a, const IpList& b) {
  // The common case, one /32 per peer, without two sorted copies.
  if (a.size() == 1 && b.size() == 1) return a[0].network() == b[0].network();
  return sorted_nets(a) == sorted_nets(b);
}
}  // namespace

namespace {
// diff() of a desired device the caller keeps (Desired = const Device) or
// gives up (Device: its peers' allowed-IP lists move into the change instead
// of being copied, which for 1000 new peers is 1000 allocations and frees
// fewer).
template <class Desired>
Device diff_of(const Device& current, Desired& desired) {
  constexpr bool kMove = !std::is_const_v<Desired>;
  auto take = [](auto& nets) -> IpList {
    if constexpr (kMove)
      return std::move(nets);
    else
      return nets;
  };
  Device ch;
  ch.name = desired.name.empty() ? current.name : desired.name;
  if (desired.private_key && (!current.private_key || *current.private_key != *desired.private_key))
    ch.private_key = desired.private_key;
  if (desired.listen_port && current.listen_port != desired.listen_port) ch.listen_port = desired.listen_port;
  if (desired.fwmark && current.fwmark.value_or(0) != *desired.fwmark) ch.fwmark = desired.fwmark;

  // A new peer starts with no allowed IPs and keepalive off: neither
  // REPLACE_ALLOWEDIPS nor a zero keepalive would change anything, and on
  // the UAPI each is a line wireguard-go parses per peer (~0.5 ms of its
  // 18 ms for 250 new peers). Should another writer add the same key between
  // our read and this message, the next apply's diff repairs it.
  auto added = [&take](auto& d) {
    Peer add;
    add.public_key = d.public_key;
    add.endpoint = d.endpoint;
    add.allowed_ips = take(d.allowed_ips);
    if (d.persistent_keepalive.value_or(0) != 0) add.persistent_keepalive = d.persistent_keepalive;
    return add;
  };
  if constexpr (kMove) {
    // A first push (no peer yet): every desired peer is new, and the change
    // is built in the desired list's own storage, as the loop below would
    // build each new peer (1000 peers: a 150 KB list not allocated, filled
    // and freed).
    if (current.peers.empty()) {
      for (auto& d : desired.peers) d = added(d);
      ch.peers = std::move(desired.peers);
      return ch;
    }
  }
  // Current peers by key, to their index; the lookup of each desired peer
  // also marks the current peer that stays, so those that go are the
  // unmarked ones (no second table of the desired keys).
  std::unordered_map<Key, size_t, KeyHash> have;
  have.reserve(current.peers.size());
  for (size_t i = 0; i < current.peers.size(); ++i) have[current.peers[i].public_key] = i;
  std::vector<bool> stays(current.peers.size());
  if (current.peers.empty()) ch.peers.reserve(desired.peers.size());  // every desired peer is new
  bool any_stays = false;
  for (auto& d : desired.peers) {
    auto it = have.find(d.public_key);
    if (it == have.end()) {
      ch.peers.push_back(added(d));
      continue;
    }
    stays[it->second] = any_stays = true;
    const Peer& c = current.peers[it->second];
    Peer up;
    up.public_key = d.public_key;
    up.update_only = true;
    bool changed = false;
    // An observed endpoint that WireGuard learned from the peer's own packets
    // (roaming) differs from the pushed one only when the control plane
    // changed it or the peer moved; both deserve the push.
    if (d.endpoint && c.endpoint != d.endpoint) {
      up.endpoint = d.endpoint;
      changed = true;
    }
    uint16_t want_ka = d.persistent_keepalive.value_or(0);
    if (d.persistent_keepalive && c.persistent_keepalive.value_or(0) != want_ka) {
      up.persistent_keepalive = want_ka;
      changed = true;
    }
    if (!same_nets(c.allowed_ips, d.allowed_ips)) {
      up.allowed_ips = take(d.allowed_ips);
      up.replace_allowed_ips = true;
      changed = true;
    }
    if (changed) ch.peers.push_back(std::move(up));
  }
  // No current peer stays (the node is handed to another cluster, or its
  // list is emptied): one REPLACE_PEERS removes exactly what a REMOVE_ME per
  // peer would, and no session that should live is reset, as none does. The
  // kernel then removes the peers together (wg_peer_remove_all: one RCU
  // grace period for all instead of one per peer): emptying 250 peers in the
  // lab, read included, 24.6 -> 19.2 ms (`wg setconf` 14 ms); wireguard-go
  // likewise (RemoveAllPeers).
  if (!any_stays && !current.peers.empty()) {
    ch.replace_peers = true;
    return ch;
  }
  for (size_t i = 0; i < current.peers.size(); ++i) {
    if (stays[i]) continue;
    Peer rm;
    rm.public_key = current.peers[i].public_key;
    rm.remove = true;
    ch.peers.push_back(std::move(rm));
  }
  return ch;
}
}  // namespace

Device diff(const Device& current, const Device& desired) { return diff_of(current, desired); }
Device diff(const Device& current, Device&& desired) { return diff_of(current, desired); }

bool is_noop(const Device& ch) {
  return !ch.private_key && !ch.listen_port && !ch.fwmark && !ch.replace_peers && ch.peers.empty();
}

Device merge(Device d, const Device& ch, const Key* new_public_key) {
  if (ch.private_key) {
    d.private_key = ch.private_key;
    d.public_key.reset();
    if (new_public_key)
      d.public_key = *new_public_key;
    else if (auto pub = public_key_of(*ch.private_key))
      d.public_key = *pub;
  }
  if (ch.listen_port) d.listen_port = ch.listen_port;
  if (ch.fwmark) d.fwmark = ch.fwmark;
  if (ch.replace_peers) d.peers.clear();
  std::unordered_map<Key, size_t, KeyHash> idx;
  idx.reserve(d.peers.size() + ch.peers.size());
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

}  // namespace fa::overlay
