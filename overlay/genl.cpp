// SPDX-License-Identifier: Apache-2.0
// The `wireguard` generic netlink family (include/uapi/linux/wireguard.h):
// building WG_CMD_SET_DEVICE requests split to a size bound, and decoding
// SET/GET messages with every attribute type- and length-checked. Pure: bytes
// in, bytes out; kernel.cpp does the sending.
#include <arpa/inet.h>
#include <linux/wireguard.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include <algorithm>
#include <cstring>

#include "common/secure.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

namespace {

// Puts one endpoint as the kernel expects it: a raw sockaddr_in/_in6.
bool put_endpoint(nl_msg* m, const Endpoint& e) {
  if (e.family == AF_INET) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(e.port);
    std::memcpy(&sa.sin_addr, e.addr.data(), 4);
    return nla_put(m, WGPEER_A_ENDPOINT, sizeof sa, &sa) == 0;
  }
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(e.port);
  std::memcpy(&sa.sin6_addr, e.addr.data(), 16);
  return nla_put(m, WGPEER_A_ENDPOINT, sizeof sa, &sa) == 0;
}

// The attributes a peer carries once, in the first message that names it.
bool put_peer_head(nl_msg* m, const Peer& p) {
  uint32_t flags = (p.remove ? WGPEER_F_REMOVE_ME : 0) | (p.update_only ? WGPEER_F_UPDATE_ONLY : 0) |
                   (p.replace_allowed_ips ? WGPEER_F_REPLACE_ALLOWEDIPS : 0);
  if (flags && nla_put_u32(m, WGPEER_A_FLAGS, flags) < 0) return false;
  if (p.remove) return true;
  if (p.endpoint && !put_endpoint(m, *p.endpoint)) return false;
  if (p.persistent_keepalive && nla_put_u16(m, WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL, *p.persistent_keepalive) < 0)
    return false;
  return true;
}

bool put_allowed_ip(nl_msg* m, const IpPrefix& a) {
  nlattr* n = nla_nest_start(m, NLA_F_NESTED);
  if (!n) return false;
  IpPrefix net = a.network();
  if (nla_put_u16(m, WGALLOWEDIP_A_FAMILY, static_cast<uint16_t>(net.family)) < 0 ||
      nla_put(m, WGALLOWEDIP_A_IPADDR, net.family == AF_INET ? 4 : 16, net.addr.data()) < 0 ||
      nla_put_u8(m, WGALLOWEDIP_A_CIDR_MASK, net.len) < 0) {
    nla_nest_cancel(m, n);
    return false;
  }
  nla_nest_end(m, n);
  return true;
}

}  // namespace

void WipedMsgFree::operator()(nl_msg* m) const {
  secure_wipe(nlmsg_hdr(m), nlmsg_get_max_size(m));
  nlmsg_free(m);
}

std::vector<WipedMsg> genl_build_set(const Device& ch, uint16_t family_id, size_t max_bytes) {
  // A request's peer list is one nested attribute, whose length is 16 bits.
  max_bytes = std::min<size_t>(max_bytes, 0xffff);
  std::vector<WipedMsg> out;
  size_t pi = 0;  // next peer to place
  size_t ii = 0;  // next allowed IP of peer pi (0: the peer's head is not sent yet)
  bool first = true;
  for (;;) {
    WipedMsg msg(nlmsg_alloc_size(max_bytes));
    if (!msg) return {};
    nl_msg* m = msg.get();
    if (!genlmsg_put(m, NL_AUTO_PORT, NL_AUTO_SEQ, family_id, 0, NLM_F_REQUEST | NLM_F_ACK, WG_CMD_SET_DEVICE,
                     WG_GENL_VERSION) ||
        nla_put_string(m, WGDEVICE_A_IFNAME, ch.name.c_str()) < 0)
      return {};
    if (first) {
      // Device-wide settings go once, in the first message.
      if ((ch.private_key && nla_put(m, WGDEVICE_A_PRIVATE_KEY, kKeyLen, ch.private_key->data()) < 0) ||
          (ch.listen_port && nla_put_u16(m, WGDEVICE_A_LISTEN_PORT, *ch.listen_port) < 0) ||
          (ch.fwmark && nla_put_u32(m, WGDEVICE_A_FWMARK, *ch.fwmark) < 0) ||
          (ch.replace_peers && nla_put_u32(m, WGDEVICE_A_FLAGS, WGDEVICE_F_REPLACE_PEERS) < 0))
        return {};
    }
    size_t progress = 0;
    if (pi < ch.peers.size()) {
      nlattr* peers = nla_nest_start(m, WGDEVICE_A_PEERS | NLA_F_NESTED);
      if (!peers) return {};
      for (; pi < ch.peers.size(); ++pi, ii = 0) {
        const Peer& p = ch.peers[pi];
        nlattr* pn = nla_nest_start(m, NLA_F_NESTED);
        if (!pn) break;
        if (nla_put(m, WGPEER_A_PUBLIC_KEY, kKeyLen, p.public_key.data()) < 0 || (ii == 0 && !put_peer_head(m, p))) {
          nla_nest_cancel(m, pn);
          break;
        }
        if (!p.remove && ii < p.allowed_ips.size()) {
          nlattr* ips = nla_nest_start(m, WGPEER_A_ALLOWEDIPS | NLA_F_NESTED);
          if (!ips) {
            nla_nest_cancel(m, pn);
            break;
          }
          size_t placed = 0;
          for (; ii < p.allowed_ips.size(); ++ii, ++placed)
            if (!put_allowed_ip(m, p.allowed_ips[ii])) break;
          if (placed == 0) {
            nla_nest_cancel(m, pn);  // nothing of this peer fits: all of it goes to the next message
            break;
          }
          nla_nest_end(m, ips);
          if (ii < p.allowed_ips.size()) {
            // Resume this peer in the next message from allowed IP ii,
            // without its head (no second REPLACE_ALLOWEDIPS).
            nla_nest_end(m, pn);
            ++progress;
            break;
          }
        }
        nla_nest_end(m, pn);
        ++progress;
      }
      nla_nest_end(m, peers);
    }
    // A message that carries no peer and no device setting means max_bytes
    // cannot hold even one peer: give up rather than loop.
    if (progress == 0 && !first) return {};
    out.push_back(std::move(msg));
    first = false;
    if (pi >= ch.peers.size()) break;
  }
  return out;
}

namespace {

// Each check names the attribute, so a kernel/ABI surprise is diagnosable.
Error bad(const char* what, int len) {
  return Error{std::string("genl: malformed ") + what + " (length " + std::to_string(len) + ")", EPROTO};
}

Status parse_allowed_ip(const nlattr* attr, Peer& p) {
  int family = -1, cidr = -1;
  std::array<uint8_t, 16> addr{};
  int addr_len = -1;
  nlattr* a;
  int rem;
  nla_for_each_nested(a, attr, rem) {
    int len = nla_len(a);
    switch (nla_type(a)) {
      case WGALLOWEDIP_A_FAMILY:
        if (len != 2) return bad("WGALLOWEDIP_A_FAMILY", len);
        family = nla_get_u16(a);
        break;
      case WGALLOWEDIP_A_IPADDR:
        if (len != 4 && len != 16) return bad("WGALLOWEDIP_A_IPADDR", len);
        std::memcpy(addr.data(), nla_data(a), static_cast<size_t>(len));
        addr_len = len;
        break;
      case WGALLOWEDIP_A_CIDR_MASK:
        if (len != 1) return bad("WGALLOWEDIP_A_CIDR_MASK", len);
        cidr = nla_get_u8(a);
        break;
      default:
        break;  // newer kernels may add attributes: ignore, as wg(8) does
    }
  }
  if (!((family == AF_INET && addr_len == 4 && cidr >= 0 && cidr <= 32) ||
        (family == AF_INET6 && addr_len == 16 && cidr >= 0 && cidr <= 128)))
    return Error{"genl: allowed IP with inconsistent family/address/cidr", EPROTO};
  IpPrefix ip;
  ip.family = family;
  ip.addr = addr;
  ip.len = static_cast<uint8_t>(cidr);
  p.allowed_ips.push_back(ip);
  return {};
}

Status parse_peer(const nlattr* attr, Peer& p, bool& have_key) {
  nlattr* a;
  int rem;
  nla_for_each_nested(a, attr, rem) {
    int len = nla_len(a);
    switch (nla_type(a)) {
      case WGPEER_A_PUBLIC_KEY:
        if (len != static_cast<int>(kKeyLen)) return bad("WGPEER_A_PUBLIC_KEY", len);
        std::memcpy(p.public_key.data(), nla_data(a), kKeyLen);
        have_key = true;
        break;
      case WGPEER_A_PRESHARED_KEY:
        if (len != static_cast<int>(kKeyLen)) return bad("WGPEER_A_PRESHARED_KEY", len);
        break;  // not part of our model; never copied anywhere
      case WGPEER_A_FLAGS: {
        if (len != 4) return bad("WGPEER_A_FLAGS", len);
        uint32_t f = nla_get_u32(a);
        if (f & ~static_cast<uint32_t>(__WGPEER_F_ALL)) return Error{"genl: unknown peer flags", EPROTO};
        p.remove = f & WGPEER_F_REMOVE_ME;
        p.update_only = f & WGPEER_F_UPDATE_ONLY;
        p.replace_allowed_ips = f & WGPEER_F_REPLACE_ALLOWEDIPS;
        break;
      }
      case WGPEER_A_ENDPOINT: {
        Endpoint e;
        if (len == sizeof(sockaddr_in)) {
          sockaddr_in sa;
          std::memcpy(&sa, nla_data(a), sizeof sa);
          if (sa.sin_family != AF_INET) return bad("WGPEER_A_ENDPOINT (family)", len);
          e.family = AF_INET;
          std::memcpy(e.addr.data(), &sa.sin_addr, 4);
          e.port = ntohs(sa.sin_port);
        } else if (len == sizeof(sockaddr_in6)) {
          sockaddr_in6 sa;
          std::memcpy(&sa, nla_data(a), sizeof sa);
          if (sa.sin6_family != AF_INET6) return bad("WGPEER_A_ENDPOINT (family)", len);
          e.family = AF_INET6;
          std::memcpy(e.addr.data(), &sa.sin6_addr, 16);
          e.port = ntohs(sa.sin6_port);
        } else {
          return bad("WGPEER_A_ENDPOINT", len);
        }
        p.endpoint = e;
        break;
      }
      case WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL:
        if (len != 2) return bad("WGPEER_A_PERSISTENT_KEEPALIVE_INTERVAL", len);
        p.persistent_keepalive = nla_get_u16(a);
        break;
      case WGPEER_A_LAST_HANDSHAKE_TIME: {
        // struct __kernel_timespec: two signed 64-bit fields.
        if (len != 16) return bad("WGPEER_A_LAST_HANDSHAKE_TIME", len);
        int64_t t[2];
        std::memcpy(t, nla_data(a), sizeof t);
        p.last_handshake_sec = t[0];
        p.last_handshake_nsec = t[1];
        break;
      }
      case WGPEER_A_RX_BYTES:
        if (len != 8) return bad("WGPEER_A_RX_BYTES", len);
        p.rx_bytes = nla_get_u64(a);
        break;
      case WGPEER_A_TX_BYTES:
        if (len != 8) return bad("WGPEER_A_TX_BYTES", len);
        p.tx_bytes = nla_get_u64(a);
        break;
      case WGPEER_A_PROTOCOL_VERSION:
        if (len != 4) return bad("WGPEER_A_PROTOCOL_VERSION", len);
        break;
      case WGPEER_A_ALLOWEDIPS: {
        nlattr* ip;
        int rem2;
        nla_for_each_nested(ip, a, rem2) {
          if (auto s = parse_allowed_ip(ip, p); !s) return s;
        }
        if (rem2 != 0) return bad("WGPEER_A_ALLOWEDIPS (trailing bytes)", rem2);
        break;
      }
      default:
        break;
    }
  }
  if (rem != 0) return bad("peer (trailing bytes)", rem);
  return {};
}

}  // namespace

Result<Device> genl_parse_device(const std::vector<std::vector<uint8_t>>& msgs) {
  Device d;
  for (const auto& buf : msgs) {
    if (buf.size() < NLMSG_HDRLEN + GENL_HDRLEN) return bad("message", static_cast<int>(buf.size()));
    // Copy into aligned storage: the libnl accessors read u32/u64 in place.
    std::vector<uint64_t> aligned((buf.size() + 7) / 8);
    std::copy(buf.begin(), buf.end(), reinterpret_cast<uint8_t*>(aligned.data()));
    auto* h = reinterpret_cast<nlmsghdr*>(aligned.data());
    if (h->nlmsg_len > buf.size() || h->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN)
      return bad("nlmsghdr", static_cast<int>(h->nlmsg_len));
    auto* g = static_cast<genlmsghdr*>(nlmsg_data(h));
    if (g->cmd != WG_CMD_GET_DEVICE && g->cmd != WG_CMD_SET_DEVICE)
      return Error{"genl: unexpected command " + std::to_string(g->cmd), EPROTO};
    nlattr* a;
    int rem;
    nla_for_each_attr(a, genlmsg_attrdata(g, 0), genlmsg_attrlen(g, 0), rem) {
      int len = nla_len(a);
      switch (nla_type(a)) {
        case WGDEVICE_A_IFINDEX:
          if (len != 4) return bad("WGDEVICE_A_IFINDEX", len);
          break;
        case WGDEVICE_A_IFNAME: {
          auto* s = static_cast<const char*>(nla_data(a));
          if (len < 1 || len > IFNAMSIZ || s[len - 1] != '\0') return bad("WGDEVICE_A_IFNAME", len);
          d.name = s;
          break;
        }
        case WGDEVICE_A_PRIVATE_KEY: {
          if (len != static_cast<int>(kKeyLen)) return bad("WGDEVICE_A_PRIVATE_KEY", len);
          Key k;
          std::memcpy(k.data(), nla_data(a), kKeyLen);
          // The kernel sends an all-zero key for "none set".
          if (k != Key{}) d.private_key = k;
          break;
        }
        case WGDEVICE_A_PUBLIC_KEY: {
          if (len != static_cast<int>(kKeyLen)) return bad("WGDEVICE_A_PUBLIC_KEY", len);
          Key k;
          std::memcpy(k.data(), nla_data(a), kKeyLen);
          if (k != Key{}) d.public_key = k;
          break;
        }
        case WGDEVICE_A_FLAGS: {
          if (len != 4) return bad("WGDEVICE_A_FLAGS", len);
          uint32_t f = nla_get_u32(a);
          if (f & ~static_cast<uint32_t>(__WGDEVICE_F_ALL))
            return Error{"genl: unknown device flags", EPROTO};
          d.replace_peers = f & WGDEVICE_F_REPLACE_PEERS;
          break;
        }
        case WGDEVICE_A_LISTEN_PORT:
          if (len != 2) return bad("WGDEVICE_A_LISTEN_PORT", len);
          d.listen_port = nla_get_u16(a);
          break;
        case WGDEVICE_A_FWMARK:
          if (len != 4) return bad("WGDEVICE_A_FWMARK", len);
          d.fwmark = nla_get_u32(a);
          break;
        case WGDEVICE_A_PEERS: {
          nlattr* pa;
          int prem;
          bool first_in_msg = true;
          nla_for_each_nested(pa, a, prem) {
            Peer p;
            bool have_key = false;
            if (auto s = parse_peer(pa, p, have_key); !s) return s.take_error();
            if (!have_key) return Error{"genl: peer without WGPEER_A_PUBLIC_KEY", EPROTO};
            // A dump (or our split SET) continues a peer whose allowed IPs did
            // not fit: same key as the previous message's last peer.
            if (first_in_msg && !d.peers.empty() && d.peers.back().public_key == p.public_key) {
              Peer& last = d.peers.back();
              last.allowed_ips.insert(last.allowed_ips.end(), p.allowed_ips.begin(), p.allowed_ips.end());
              if (p.endpoint) last.endpoint = p.endpoint;
              if (p.persistent_keepalive) last.persistent_keepalive = p.persistent_keepalive;
            } else {
              d.peers.push_back(std::move(p));
            }
            first_in_msg = false;
          }
          if (prem != 0) return bad("WGDEVICE_A_PEERS (trailing bytes)", prem);
          break;
        }
        default:
          break;
      }
    }
    if (rem != 0) return bad("message (trailing bytes)", rem);
  }
  if (d.private_key && !d.public_key) {
    auto pub = public_key_of(*d.private_key);
    if (pub) d.public_key = *pub;
  }
  return d;
}

}  // namespace fa::overlay
