// SPDX-License-Identifier: Apache-2.0
// WireGuard's cross-platform UAPI text protocol (wireguard-go's socket):
// key=value lines, keys in hex, a blank line ends a message. The parser takes
// text, not a socket, so it is table-tested.
#include <charconv>

#include "common/secure.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

namespace {

template <class T>
Result<T> parse_num(std::string_view key, std::string_view v, T max) {
  T n{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || n > max)
    return Error{"UAPI: " + std::string(key) + "=" + std::string(v) + " is not an integer 0-" +
                 std::to_string(max)};
  return n;
}

}  // namespace

std::string uapi_set_request(const Device& ch) {
  std::string s;
  auto line = [&s](std::string_view key, const std::string& value) {
    s.append(key).append("=").append(value).append("\n");
  };
  // One buffer that never moves (the caller wipes it once sent): no copy of
  // the private key is left behind in a freed one.
  size_t bound = 160;
  for (const auto& p : ch.peers) bound += 212 + 55 * p.allowed_ips.size();
  s.reserve(bound);
  s += "set=1\n";
  // wireguard-go applies the lines in order: a new private key before a
  // replace_peers line would have it derive a secret with every peer about
  // to go.
  if (ch.replace_peers) s += "replace_peers=true\n";
  if (ch.private_key) {
    std::string hex = key_to_hex(*ch.private_key);
    line("private_key", hex);
    secure_wipe(hex.data(), hex.size());
  }
  if (ch.listen_port) line("listen_port", std::to_string(*ch.listen_port));
  if (ch.fwmark) line("fwmark", std::to_string(*ch.fwmark));
  for (const auto& p : ch.peers) {
    line("public_key", key_to_hex(p.public_key));
    if (p.remove) {
      s += "remove=true\n";
      continue;
    }
    if (p.update_only) s += "update_only=true\n";
    if (p.endpoint) line("endpoint", p.endpoint->str());
    if (p.persistent_keepalive) line("persistent_keepalive_interval", std::to_string(*p.persistent_keepalive));
    if (p.replace_allowed_ips) s += "replace_allowed_ips=true\n";
    for (const auto& a : p.allowed_ips) line("allowed_ip", a.network().str());
  }
  s += "\n";
  return s;
}

Result<Device> uapi_parse_get(std::string_view reply) {
  Device d;
  Peer* peer = nullptr;
  bool saw_errno = false;
  size_t pos = 0;
  while (pos < reply.size()) {
    size_t nl = reply.find('\n', pos);
    if (nl == std::string_view::npos) return Error{"UAPI: reply ends inside a line"};
    std::string_view line = reply.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) break;
    auto eq = line.find('=');
    if (eq == std::string_view::npos) return Error{"UAPI: line without '=': " + std::string(line)};
    std::string_view k = line.substr(0, eq), v = line.substr(eq + 1);
    auto key = [&](std::string_view val) -> Result<Key> {
      auto r = key_from_hex(val);
      if (!r) return Error{"UAPI: " + std::string(k) + ": " + r.error().message};
      return r;
    };
    if (k == "errno") {
      auto e = parse_num<int>(k, v, 4095);
      if (!e) return e.take_error();
      if (*e != 0) return Error::from_errno("UAPI get failed", *e);
      saw_errno = true;
    } else if (k == "public_key") {
      auto pk = key(v);
      if (!pk) return pk.take_error();
      d.peers.emplace_back();
      peer = &d.peers.back();
      peer->public_key = *pk;
      peer->persistent_keepalive = 0;
    } else if (!peer) {
      if (k == "private_key") {
        auto pk = key(v);
        if (!pk) return pk.take_error();
        d.private_key = *pk;
      } else if (k == "listen_port") {
        auto n = parse_num<uint16_t>(k, v, 65535);
        if (!n) return n.take_error();
        d.listen_port = *n;
      } else if (k == "fwmark") {
        auto n = parse_num<uint32_t>(k, v, UINT32_MAX);
        if (!n) return n.take_error();
        d.fwmark = *n;
      } else {
        return Error{"UAPI: unexpected device key '" + std::string(k) + "'"};
      }
    } else if (k == "preshared_key" || k == "protocol_version") {
      // Not part of our model: presence is enough.
    } else if (k == "endpoint") {
      // A link-local endpoint carries a scope ("[fe80::1%eth0]:51820"); our
      // model has no scope, so it is dropped for display and diffing.
      std::string ep(v);
      if (auto pct = ep.find('%'); pct != std::string::npos && ep[0] == '[')
        ep.erase(pct, ep.find(']') - pct);
      auto e = Endpoint::parse(ep);
      if (!e) return Error{"UAPI: endpoint: " + e.error().message};
      peer->endpoint = *e;
    } else if (k == "persistent_keepalive_interval") {
      auto n = parse_num<uint16_t>(k, v, 65535);
      if (!n) return n.take_error();
      peer->persistent_keepalive = *n;
    } else if (k == "allowed_ip") {
      auto a = IpPrefix::parse(v);
      if (!a || v.find('/') == std::string_view::npos)
        return Error{"UAPI: bad allowed_ip '" + std::string(v) + "'"};
      peer->allowed_ips.push_back(*a);
    } else if (k == "last_handshake_time_sec") {
      auto n = parse_num<int64_t>(k, v, INT64_MAX);
      if (!n) return n.take_error();
      peer->last_handshake_sec = *n;
    } else if (k == "last_handshake_time_nsec") {
      auto n = parse_num<int64_t>(k, v, 999999999);
      if (!n) return n.take_error();
      peer->last_handshake_nsec = *n;
    } else if (k == "rx_bytes") {
      auto n = parse_num<uint64_t>(k, v, UINT64_MAX);
      if (!n) return n.take_error();
      peer->rx_bytes = *n;
    } else if (k == "tx_bytes") {
      auto n = parse_num<uint64_t>(k, v, UINT64_MAX);
      if (!n) return n.take_error();
      peer->tx_bytes = *n;
    } else {
      return Error{"UAPI: unexpected peer key '" + std::string(k) + "'"};
    }
  }
  if (!saw_errno) return Error{"UAPI: reply has no errno line"};
  // UAPI carries no public key of the device: derived here, as the kernel
  // reports it.
  if (d.private_key)
    if (auto pub = public_key_of(*d.private_key)) d.public_key = *pub;
  return d;
}

Status uapi_parse_set_reply(std::string_view reply) {
  if (reply.substr(0, 6) != "errno=") return Error{"UAPI: unexpected reply to set"};
  auto nl = reply.find('\n');
  if (nl == std::string_view::npos) return Error{"UAPI: reply to set ends inside a line"};
  auto e = parse_num<int>("errno", reply.substr(6, nl - 6), 4095);
  if (!e) return e.take_error();
  if (*e != 0) return Error::from_errno("UAPI set refused", *e);
  return {};
}

}  // namespace fa::overlay
