// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/wire.hpp"

#include <arpa/inet.h>

#include <charconv>
#include <cstdio>
#include <optional>
#include <vector>

namespace fa::rdma {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void put_hex(std::string& out, uint64_t v, int width) {
  for (int i = width - 1; i >= 0; --i) out += kHex[(v >> (4 * i)) & 0xf];
}

std::optional<unsigned> hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return std::nullopt;  // uppercase is not the canonical spelling
}

std::string shown(std::string_view v) {
  // Echo the offending input, bounded and printable, so an error line
  // never carries control bytes from a peer.
  std::string s;
  for (char c : v.substr(0, 64)) s += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (v.size() > 64) s += "...";
  return s;
}

Error bad(std::string_view field, std::string_view value, std::string_view accepted) {
  return Error{"side-channel record: field '" + std::string(field) + "' = '" + shown(value) +
               "' is not accepted (accepted: " + std::string(accepted) + ")"};
}

Result<uint64_t> fixed_hex(std::string_view field, std::string_view v, size_t width) {
  if (v.size() != width)
    return bad(field, v, std::to_string(width) + " lowercase hex digits");
  uint64_t out = 0;
  for (char c : v) {
    auto d = hex_digit(c);
    if (!d) return bad(field, v, std::to_string(width) + " lowercase hex digits");
    out = (out << 4) | *d;
  }
  return out;
}

Result<uint64_t> decimal(std::string_view field, std::string_view v, uint64_t lo, uint64_t hi) {
  std::string accepted = "decimal " + std::to_string(lo) + ".." + std::to_string(hi) + " without leading zeros";
  if (v.empty() || v.size() > 20 || (v.size() > 1 && v[0] == '0')) return bad(field, v, accepted);
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || p != v.data() + v.size() || out < lo || out > hi) return bad(field, v, accepted);
  return out;
}

std::vector<std::string_view> split_spaces(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t sp = line.find(' ', start);
    out.push_back(line.substr(start, sp == std::string_view::npos ? std::string_view::npos : sp - start));
    if (sp == std::string_view::npos) break;
    start = sp + 1;
  }
  return out;
}

// "key=value" with exactly this key.
Result<std::string_view> value_of(std::string_view token, std::string_view key) {
  if (token.size() <= key.size() || token.substr(0, key.size()) != key || token[key.size()] != '=')
    return Error{"side-channel record: expected field '" + std::string(key) + "=...', got '" + shown(token) + "'"};
  return token.substr(key.size() + 1);
}

std::string sanitise(std::string_view m) {
  std::string s;
  for (char c : m.substr(0, kMaxFailureMessage)) s += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s;
}

template <size_t N>
Result<std::array<uint8_t, N>> fixed_bytes(std::string_view field, std::string_view v) {
  std::array<uint8_t, N> out{};
  const std::string accepted = std::to_string(2 * N) + " lowercase hex digits";
  if (v.size() != 2 * N) return bad(field, v, accepted);
  for (size_t i = 0; i < N; ++i) {
    auto hi = hex_digit(v[2 * i]), lo = hex_digit(v[2 * i + 1]);
    if (!hi || !lo) return bad(field, v, accepted);
    out[i] = static_cast<uint8_t>(*hi << 4 | *lo);
  }
  return out;
}

template <size_t N>
void put_bytes(std::string& out, const std::array<uint8_t, N>& b) {
  for (uint8_t x : b) put_hex(out, x, 2);
}

// `kind key=<2N hex>`: the handshake's nonces and MACs.
template <size_t N>
Result<std::array<uint8_t, N>> one_hex_field(const std::vector<std::string_view>& t, std::string_view key) {
  if (t.size() != 3)
    return Error{"side-channel record: '" + std::string(t[1]) + "' takes 1 field, got " + std::to_string(t.size() - 2)};
  auto v = value_of(t[2], key);
  if (!v) return v.take_error();
  return fixed_bytes<N>(key, *v);
}

Result<Record> decode_endpoint(const std::vector<std::string_view>& t) {
  static constexpr std::string_view kKeys[] = {"lid", "qpn", "psn", "mtu", "gid", "rkey", "addr", "len"};
  if (t.size() != 2 + std::size(kKeys))
    return Error{"side-channel record: 'ep' takes " + std::to_string(std::size(kKeys)) + " fields, got " +
                 std::to_string(t.size() - 2)};
  std::string_view v[std::size(kKeys)];
  for (size_t i = 0; i < std::size(kKeys); ++i) {
    auto val = value_of(t[2 + i], kKeys[i]);
    if (!val) return val.take_error();
    v[i] = *val;
  }
  Endpoint e;
  auto lid = fixed_hex("lid", v[0], 4);
  if (!lid) return lid.take_error();
  e.lid = static_cast<uint16_t>(*lid);
  auto qpn = fixed_hex("qpn", v[1], 6);
  if (!qpn) return qpn.take_error();
  if (*qpn == 0) return bad("qpn", v[1], "a 24-bit QP number other than 0 (QP0 is the SMI)");
  e.qpn = static_cast<uint32_t>(*qpn);
  auto psn = fixed_hex("psn", v[2], 6);
  if (!psn) return psn.take_error();
  e.psn = static_cast<uint32_t>(*psn);
  auto mtu = decimal("mtu", v[3], 256, 4096);
  if (!mtu) return mtu.take_error();
  if (*mtu != 256 && *mtu != 512 && *mtu != 1024 && *mtu != 2048 && *mtu != 4096)
    return bad("mtu", v[3], "256, 512, 1024, 2048 or 4096");
  e.mtu = static_cast<uint32_t>(*mtu);
  auto gid = fixed_bytes<16>("gid", v[4]);
  if (!gid) return gid.take_error();
  e.gid = *gid;
  auto rkey = fixed_hex("rkey", v[5], 8);
  if (!rkey) return rkey.take_error();
  e.rkey = static_cast<uint32_t>(*rkey);
  auto addr = fixed_hex("addr", v[6], 16);
  if (!addr) return addr.take_error();
  e.addr = *addr;
  auto len = fixed_hex("len", v[7], 16);
  if (!len) return len.take_error();
  if (*len == 0 || *len > kMaxBufferBytes)
    return bad("len", v[7], "1.." + std::to_string(kMaxBufferBytes) + " bytes, as 16 hex digits");
  if (e.addr + *len < e.addr) return bad("addr", v[6], "an address where addr+len does not wrap");
  e.len = *len;
  return Record{e};
}

}  // namespace

std::string encode(const Record& r) {
  std::string out(kWireMagic);
  if (const auto* e = std::get_if<Endpoint>(&r)) {
    out += " ep lid=";
    put_hex(out, e->lid, 4);
    out += " qpn=";
    put_hex(out, e->qpn & 0xffffff, 6);
    out += " psn=";
    put_hex(out, e->psn & 0xffffff, 6);
    out += " mtu=" + std::to_string(e->mtu);
    out += " gid=" + gid_hex(e->gid);
    out += " rkey=";
    put_hex(out, e->rkey, 8);
    out += " addr=";
    put_hex(out, e->addr, 16);
    out += " len=";
    put_hex(out, e->len, 16);
  } else if (const auto* l = std::get_if<LatencyStart>(&r)) {
    out += " lat iters=" + std::to_string(l->iters);
  } else if (std::holds_alternative<Done>(r)) {
    out += " done";
  } else if (const auto* h = std::get_if<Hello>(&r)) {
    out += " hello nonce=";
    put_bytes(out, h->nonce);
  } else if (const auto* c = std::get_if<Challenge>(&r)) {
    out += " challenge nonce=";
    put_bytes(out, c->nonce);
  } else if (const auto* p = std::get_if<Proof>(&r)) {
    out += " auth mac=";
    put_bytes(out, p->mac);
  } else if (const auto* pl = std::get_if<Plan>(&r)) {
    out += " plan ms=" + std::to_string(pl->duration_ms) + " iters=" + std::to_string(pl->latency_iters);
  } else {
    const auto& f = std::get<Failure>(r);
    out += " err reason=" + std::string(reason_name(f.reason)) + " msg=" + sanitise(f.message);
  }
  return out;
}

Result<Record> decode(std::string_view line) {
  if (line.size() > kMaxRecordBytes)
    return Error{"side-channel record: " + std::to_string(line.size()) + " bytes, longer than the " +
                 std::to_string(kMaxRecordBytes) + " accepted"};
  for (char c : line)
    if (c < 0x20 || c >= 0x7f)
      return Error{"side-channel record: contains a non-printable byte (accepted: printable ASCII)"};
  auto t = split_spaces(line);
  if (t[0] != kWireMagic)
    return bad("magic", t[0], std::string(kWireMagic));
  if (t.size() < 2) return Error{"side-channel record: no kind after '" + std::string(kWireMagic) + "'"};
  const std::string_view kind = t[1];
  if (kind == "ep") return decode_endpoint(t);
  if (kind == "lat") {
    if (t.size() != 3) return Error{"side-channel record: 'lat' takes 1 field, got " + std::to_string(t.size() - 2)};
    auto v = value_of(t[2], "iters");
    if (!v) return v.take_error();
    auto n = decimal("iters", *v, 1, kMaxLatencyIters);
    if (!n) return n.take_error();
    return Record{LatencyStart{static_cast<uint32_t>(*n)}};
  }
  if (kind == "done") {
    if (t.size() != 2) return Error{"side-channel record: 'done' takes no fields"};
    return Record{Done{}};
  }
  if (kind == "err") {
    // The message is the rest of the line and may contain spaces.
    if (t.size() < 4) return Error{"side-channel record: 'err' takes reason= and msg="};
    auto rv = value_of(t[2], "reason");
    if (!rv) return rv.take_error();
    auto reason = reason_from_name(*rv);
    if (!reason || *reason == Reason::kNone) return bad("reason", *rv, "a failure reason name from docs/probe.md");
    size_t msg_at = kWireMagic.size() + 1 + kind.size() + 1 + t[2].size() + 1;
    std::string_view rest = line.substr(msg_at);
    if (rest.substr(0, 4) != "msg=") return Error{"side-channel record: expected field 'msg=...', got '" + shown(rest) + "'"};
    rest.remove_prefix(4);
    if (rest.size() > kMaxFailureMessage)
      return bad("msg", rest, "at most " + std::to_string(kMaxFailureMessage) + " bytes");
    return Record{Failure{*reason, std::string(rest)}};
  }
  if (kind == "hello") {
    auto n = one_hex_field<32>(t, "nonce");
    if (!n) return n.take_error();
    return Record{Hello{*n}};
  }
  if (kind == "challenge") {
    auto n = one_hex_field<32>(t, "nonce");
    if (!n) return n.take_error();
    return Record{Challenge{*n}};
  }
  if (kind == "auth") {
    auto m = one_hex_field<32>(t, "mac");
    if (!m) return m.take_error();
    return Record{Proof{*m}};
  }
  if (kind == "plan") {
    if (t.size() != 4) return Error{"side-channel record: 'plan' takes 2 fields, got " + std::to_string(t.size() - 2)};
    auto ms = value_of(t[2], "ms");
    if (!ms) return ms.take_error();
    auto d = decimal("ms", *ms, kMinDurationMs, kMaxDurationMs);
    if (!d) return d.take_error();
    auto it = value_of(t[3], "iters");
    if (!it) return it.take_error();
    auto n = decimal("iters", *it, 1, kMaxLatencyIters);
    if (!n) return n.take_error();
    return Record{Plan{static_cast<uint32_t>(*d), static_cast<uint32_t>(*n)}};
  }
  return bad("kind", kind, "ep, lat, done, err, hello, challenge, auth, plan");
}

std::string gid_hex(const Gid& g) {
  std::string s;
  for (uint8_t b : g) put_hex(s, b, 2);
  return s;
}

std::string gid_text(const Gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(AF_INET6, g.data(), buf, sizeof buf)) return gid_hex(g);
  return buf;
}

}  // namespace fa::rdma
