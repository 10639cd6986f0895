// SPDX-License-Identifier: Apache-2.0
// Addresses, endpoints and the pure diff (the model of wireguard-tools'
// syncconf: desired and observed are the same type, compared peer by peer).
#include <arpa/inet.h>
#include <endian.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
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

// inet_pton wants a C string; a NUL inside the view (JSON's \u0000) is refused.
bool parse_ip(std::string_view s, int family, std::array<uint8_t, 16>& addr) {
  if (s.size() > INET6_ADDRSTRLEN || s.find('\0') != std::string_view::npos) return false;
  addr.fill(0);
  return inet_pton(family, std::string(s).c_str(), addr.data()) == 1;
}

std::string ip_str(int family, const std::array<uint8_t, 16>& addr) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(family, addr.data(), buf, sizeof buf)) return "?";
  return buf;
}

}  // namespace

Result<IpPrefix> IpPrefix::parse(std::string_view s) {
  IpPrefix p;
  auto slash = s.find('/');
  std::string_view ip = s.substr(0, slash);
  p.family = ip.find(':') == std::string_view::npos ? AF_INET : AF_INET6;
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

std::string IpPrefix::str() const { return ip_str(family, addr) + "/" + std::to_string(len); }

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
  auto accepted = [s] {
    return Error{"expected IPv4:port or [IPv6]:port with port 1-65535, got '" + std::string(s) + "'"};
  };
  Endpoint e;
  std::string_view host, port;
  if (!s.empty() && s[0] == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close + 1 >= s.size() || s[close + 1] != ':') return accepted();
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
    e.family = AF_INET6;
  } else {
    auto colon = s.rfind(':');
    if (colon == std::string_view::npos) return accepted();
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    e.family = AF_INET;
  }
  if (!parse_ip(host, e.family, e.addr)) return accepted();
  auto p = parse_uint(port, 65535, "port");
  if (!p || *p == 0) return accepted();
  e.port = static_cast<uint16_t>(*p);
  return e;
}

std::string Endpoint::str() const {
  std::string ip = ip_str(family, addr);
  if (family == AF_INET6) ip = "[" + ip + "]";
  return ip + ":" + std::to_string(port);
}

namespace {
// The kernel stores allowed IPs masked; compare the way it will hold them.
std::vector<IpPrefix> sorted_nets(std::vector<IpPrefix> v) {
  for (auto& p : v) p = p.network();
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}
}  // namespace

Device diff(const Device& current, const Device& desired) {
  Device ch;
  ch.name = desired.name.empty() ? current.name : desired.name;
  if (desired.private_key && (!current.private_key || *current.private_key != *desired.private_key))
    ch.private_key = desired.private_key;
  if (desired.listen_port && current.listen_port != desired.listen_port) ch.listen_port = desired.listen_port;
  if (desired.fwmark && current.fwmark.value_or(0) != *desired.fwmark) ch.fwmark = desired.fwmark;

  std::unordered_map<Key, size_t, KeyHash> have;
  have.reserve(current.peers.size());
  for (size_t i = 0; i < current.peers.size(); ++i) have[current.peers[i].public_key] = i;
  std::vector<bool> stays(current.peers.size());
  bool any_stays = false;
  for (const auto& d : desired.peers) {
    auto it = have.find(d.public_key);
    if (it == have.end()) {
      // A new peer starts with no allowed IPs and keepalive off: it needs
      // neither REPLACE_ALLOWEDIPS nor a zero keepalive.
      Peer add;
      add.public_key = d.public_key;
      add.endpoint = d.endpoint;
      add.allowed_ips = d.allowed_ips;
      if (d.persistent_keepalive.value_or(0) != 0) add.persistent_keepalive = d.persistent_keepalive;
      ch.peers.push_back(std::move(add));
      continue;
    }
    stays[it->second] = any_stays = true;
    const Peer& c = current.peers[it->second];
    Peer up;
    up.public_key = d.public_key;
    up.update_only = true;
    bool changed = false;
    // An endpoint WireGuard learned from the peer's own packets (roaming)
    // differs from the pushed one only when the control plane changed it or
    // the peer moved; both deserve the push.
    if (d.endpoint && c.endpoint != d.endpoint) {
      up.endpoint = d.endpoint;
      changed = true;
    }
    uint16_t want_ka = d.persistent_keepalive.value_or(0);
    if (d.persistent_keepalive && c.persistent_keepalive.value_or(0) != want_ka) {
      up.persistent_keepalive = want_ka;
      changed = true;
    }
    if (sorted_nets(c.allowed_ips) != sorted_nets(d.allowed_ips)) {
      up.allowed_ips = d.allowed_ips;
      up.replace_allowed_ips = true;
      changed = true;
    }
    if (changed) ch.peers.push_back(std::move(up));
  }
  // No current peer stays: one REPLACE_PEERS removes exactly what a
  // REMOVE_ME per peer would, and resets no session that should live.
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

bool is_noop(const Device& ch) {
  return !ch.private_key && !ch.listen_port && !ch.fwmark && !ch.replace_peers && ch.peers.empty();
}

}  // namespace fa::overlay
