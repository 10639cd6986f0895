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

namespace {

// What the common MAD header of a reply must say; the error names the field.
Status check_header(std::span<const uint8_t> m, uint64_t tid, uint8_t cls, uint8_t cls_version,
                    uint8_t method, uint16_t attr, const char* what) {
  auto field = [&](size_t off, size_t n) { return get_be(m, off, n); };
  std::string w = what;
  if (field(0, 1) != kBaseVersion || field(1, 1) != cls || field(2, 1) != cls_version)
    return Error{w + " reply: base version " + std::to_string(field(0, 1)) + ", class " +
                 std::to_string(field(1, 1)) + ", class version " + std::to_string(field(2, 1)) +
                 "; expected 1, " + std::to_string(cls) + ", " + std::to_string(cls_version)};
  if (field(3, 1) != method)
    return Error{w + " reply: method " + std::to_string(field(3, 1)) + ", expected " +
                 std::to_string(method)};
  if (field(16, 2) != attr)
    return Error{w + " reply: attribute " + std::to_string(field(16, 2)) + ", expected " +
                 std::to_string(attr)};
  // The kernel's MAD layer (ib_umad) writes its agent id into the upper 32
  // bits of a request's TID; only the lower 32 bits are ours to match.
  if (field(12, 4) != (tid & 0xffffffffull))
    return Error{w + " reply: transaction id does not match the request"};
  if (auto st = field(4, 2); st != 0) {
    char b[8];
    std::snprintf(b, sizeof b, "0x%04x", static_cast<unsigned>(st));
    return Error{w + " reply: MAD status " + b};
  }
  return {};
}

SmInfo read_sminfo(std::span<const uint8_t> d) {
  SmInfo s;
  s.guid = get_be(d, 0, 8);
  s.sm_key = get_be(d, 8, 8);
  s.act_count = static_cast<uint32_t>(get_be(d, 16, 4));
  uint8_t b20 = static_cast<uint8_t>(get_be(d, 20, 1));
  s.priority = b20 >> 4;
  s.sm_state = b20 & 0x0f;
  return s;
}

}  // namespace

Result<SmInfo> decode_sminfo_response(std::span<const uint8_t> m, uint64_t tid) {
  if (m.size() < kSmpDataOffset + 21)
    return Error{"SMInfo reply too short: " + std::to_string(m.size()) + " bytes, need at least 85"};
  if (auto ok =
          check_header(m, tid, kClassSubnLidRouted, kClassVersion, kMethodGetResp, kAttrSmInfo, "SMInfo");
      !ok)
    return ok.error();
  return read_sminfo(m.subspan(kSmpDataOffset));
}

std::array<uint8_t, kMadSize> encode_sminfo_record_gettable(uint64_t tid) {
  std::array<uint8_t, kMadSize> m{};
  put_be(m, 0, 1, kBaseVersion);
  put_be(m, 1, 1, kClassSubnAdm);
  put_be(m, 2, 1, kSaClassVersion);
  put_be(m, 3, 1, kMethodGetTable);
  put_be(m, 8, 8, tid);
  put_be(m, 16, 2, kAttrSmInfoRecord);
  // RMPP header, SM_Key, AttributeOffset and ComponentMask stay 0: a
  // one-packet request that matches every record.
  return m;
}

std::vector<uint8_t> encode_sminfo_records_reply(uint64_t tid, const std::vector<SmInfoRecord>& recs) {
  constexpr size_t kRec = 32;
  std::vector<uint8_t> m(kSaDataOffset + kRec * recs.size());
  put_be(m, 0, 1, kBaseVersion);
  put_be(m, 1, 1, kClassSubnAdm);
  put_be(m, 2, 1, kSaClassVersion);
  put_be(m, 3, 1, kMethodGetTableResp);
  put_be(m, 8, 8, tid);
  put_be(m, 16, 2, kAttrSmInfoRecord);
  put_be(m, 24, 1, 1);     // RMPP version 1
  put_be(m, 25, 1, 1);     // type DATA
  put_be(m, 26, 1, 0x07);  // flags: active, first, last
  put_be(m, 44, 2, kRec / 8);
  for (size_t i = 0; i < recs.size(); ++i) {
    std::span<uint8_t> r(m.data() + kSaDataOffset + kRec * i, kRec);
    put_be(r, 0, 2, recs[i].lid);
    encode_sminfo(r.subspan(4), recs[i].info);
  }
  return m;
}

Result<std::vector<SmInfoRecord>> decode_sminfo_records(std::span<const uint8_t> m, uint64_t tid) {
  if (m.size() < kSaDataOffset)
    return Error{"SMInfoRecord reply too short: " + std::to_string(m.size()) + " bytes, need at least 56"};
  if (auto ok = check_header(m, tid, kClassSubnAdm, kSaClassVersion, kMethodGetTableResp, kAttrSmInfoRecord,
                             "SMInfoRecord");
      !ok)
    return ok.error();
  size_t size = get_be(m, 44, 2) * 8;
  std::vector<SmInfoRecord> out;
  if (m.size() == kSaDataOffset) return out;  // no SM at all: a table of none
  if (size < 25)
    return Error{"SMInfoRecord reply: attribute offset " + std::to_string(size / 8) +
                 " (8-byte words) is smaller than a record (25 bytes)"};
  for (size_t off = kSaDataOffset; off + size <= m.size(); off += size) {
    auto r = m.subspan(off, size);
    SmInfoRecord rec;
    rec.lid = static_cast<uint32_t>(get_be(r, 0, 2));
    rec.info = read_sminfo(r.subspan(4));
    // A MAD is padded to 256 bytes where nothing reports its length: an
    // all-zero record is padding, not an SM (no port has GUID 0).
    if (rec.info.guid == 0) continue;
    out.push_back(rec);
  }
  return out;
}

std::string sm_state_name(uint8_t state) {
  static const char* const kNames[] = {"not active", "discovering", "standby", "master"};
  if (state < 4) return kNames[state];
  return "unknown (" + std::to_string(state) + ")";
}

}  // namespace fa::probes::smp
