// SPDX-License-Identifier: Apache-2.0
#include "probes/sminfo.hpp"

#include <cstdio>

namespace fa::probes::smp {

uint64_t get_be(std::span<const uint8_t> buf, size_t off, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v = v << 8 | buf[off + i];
  return v;
}

void put_be(std::span<uint8_t> buf, size_t off, size_t bytes, uint64_t v) {
  for (size_t i = 0; i < bytes; ++i) buf[off + bytes - 1 - i] = static_cast<uint8_t>(v >> (8 * i));
}

std::array<uint8_t, kMadSize> encode_sminfo_get(uint64_t tid) {
  std::array<uint8_t, kMadSize> m{};
  put_be(m, 0, 1, kBaseVersion);
  put_be(m, 1, 1, kClassSubnLidRouted);
  put_be(m, 2, 1, kClassVersion);
  put_be(m, 3, 1, kMethodGet);
  put_be(m, 8, 8, tid);
  put_be(m, 16, 2, kAttrSmInfo);
  put_be(m, 20, 4, 0);  // attribute modifier
  put_be(m, 24, 8, 0);  // M_Key
  return m;
}

void encode_sminfo(std::span<uint8_t> d, const SmInfo& s) {
  put_be(d, 0, 8, s.guid);
  put_be(d, 8, 8, s.sm_key);
  put_be(d, 16, 4, s.act_count);
  put_be(d, 20, 1, static_cast<uint64_t>((s.priority & 0x0f) << 4 | (s.sm_state & 0x0f)));
}

Result<SmInfo> decode_sminfo_response(std::span<const uint8_t> m, uint64_t tid) {
  if (m.size() < kSmpDataOffset + 21)
    return Error{"SMInfo reply too short: " + std::to_string(m.size()) + " bytes, need at least 85"};
  auto field = [&](size_t off, size_t n) { return get_be(m, off, n); };
  if (field(0, 1) != kBaseVersion || field(1, 1) != kClassSubnLidRouted || field(2, 1) != kClassVersion)
    return Error{"SMInfo reply: not a LID-routed SMP v1 (base " + std::to_string(field(0, 1)) + ", class " +
                 std::to_string(field(1, 1)) + ", class version " + std::to_string(field(2, 1)) + ")"};
  if (field(3, 1) != kMethodGetResp)
    return Error{"SMInfo reply: method " + std::to_string(field(3, 1)) + ", expected GetResp (129)"};
  if (field(16, 2) != kAttrSmInfo)
    return Error{"SMInfo reply: attribute " + std::to_string(field(16, 2)) + ", expected SMInfo (32)"};
  // The kernel's MAD layer (ib_umad) writes its agent id into the upper 32
  // bits of a request's TID; only the lower 32 bits are ours to match.
  if (field(12, 4) != (tid & 0xffffffffull))
    return Error{"SMInfo reply: transaction id does not match the request"};
  if (auto st = field(4, 2); st != 0) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%04x", static_cast<unsigned>(st));
    return Error{std::string("SMInfo reply: MAD status ") + b};
  }
  auto d = m.subspan(kSmpDataOffset);
  SmInfo s;
  s.guid = get_be(d, 0, 8);
  s.sm_key = get_be(d, 8, 8);
  s.act_count = static_cast<uint32_t>(get_be(d, 16, 4));
  uint8_t b20 = static_cast<uint8_t>(get_be(d, 20, 1));
  s.priority = b20 >> 4;
  s.sm_state = b20 & 0x0f;
  return s;
}

std::string sm_state_name(uint8_t state) {
  static const char* const kNames[] = {"not active", "discovering", "standby", "master"};
  if (state < 4) return kNames[state];
  return "unknown (" + std::to_string(state) + ")";
}

}  // namespace fa::probes::smp
