// SPDX-License-Identifier: Apache-2.0
// SubnGet(SMInfo): the LID-routed SMP that asks a subnet manager who it is.
// Encoded and decoded with field helpers over a byte buffer in network
// order, never by overlaying structs, so the layout is the spec's and is
// checked against hand-laid bytes (tests/probes/sminfo_test.cpp).
//
// SMP (IBA 14.2.1.1, LID routed), 256 bytes:
//   0 BaseVersion=1  1 MgmtClass=0x01  2 ClassVersion=1  3 Method (Get=0x01, GetResp=0x81)
//   4 Status(16)  6 ClassSpecific(16)  8 TransactionID(64)  16 AttributeID(16)=0x0020
//   18 reserved(16)  20 AttributeModifier(32)  24 M_Key(64)  32 reserved(256 bits)
//   64 SMP data (64 bytes)  128 reserved (128 bytes)
// SMInfo (IBA 14.2.5.13), at SMP data offset 0:
//   0 GUID(64)  8 SM_Key(64)  16 ActCount(32)  20 Priority(4 high bits) | SMState(4 low bits)
//
// SubnAdmGetTable(SMInfoRecord): every SM of the subnet, as the SA knows them.
// SA MAD (IBA 15.2.1.1), 256 bytes on the wire:
//   0..23 the common MAD header as above (MgmtClass=0x03, ClassVersion=2,
//   Method GetTable=0x12, GetTableResp=0x92, AttributeID=0x0018)
//   24 RMPP header (12 bytes: version, type, RRespTime|flags, status, data1, data2)
//   36 SM_Key(64)  44 AttributeOffset(16, record size in 8-byte words)  46 reserved(16)
//   48 ComponentMask(64)  56 records
// SMInfoRecord (IBA 15.2.5.16): 0 LID(16)  2 reserved(16)  4 SMInfo (21 bytes), padded
// to AttributeOffset * 8 bytes (32 for OpenSM).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace fa::probes::smp {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kSmpDataOffset = 64;
inline constexpr uint8_t kBaseVersion = 1;
inline constexpr uint8_t kClassSubnLidRouted = 0x01;
inline constexpr uint8_t kClassVersion = 1;
inline constexpr uint8_t kMethodGet = 0x01;
inline constexpr uint8_t kMethodGetResp = 0x81;
inline constexpr uint16_t kAttrSmInfo = 0x0020;

struct SmInfo {
  uint64_t guid = 0;
  uint64_t sm_key = 0;
  uint32_t act_count = 0;
  uint8_t priority = 0;  // 0..15
  uint8_t sm_state = 0;  // 0 not active, 1 discovering, 2 standby, 3 master
};

// Big-endian field helpers over a MAD buffer.
uint64_t get_be(std::span<const uint8_t> buf, size_t off, size_t bytes);
void put_be(std::span<uint8_t> buf, size_t off, size_t bytes, uint64_t v);

// The request: SubnGet(SMInfo), attribute modifier 0, M_Key 0.
std::array<uint8_t, kMadSize> encode_sminfo_get(uint64_t tid);

// Checks a reply is GetResp(SMInfo) for tid with status 0, then reads SMInfo.
// Only the lower 32 bits of the TID are compared: the kernel puts its agent
// id into the upper 32 bits of every request it sends.
Result<SmInfo> decode_sminfo_response(std::span<const uint8_t> mad, uint64_t tid);

// SMInfo fields of a reply body (tests build replies with it).
void encode_sminfo(std::span<uint8_t> smp_data, const SmInfo& info);

// "master", "standby", ...; unknown values print with their number.
std::string sm_state_name(uint8_t state);

inline constexpr uint8_t kClassSubnAdm = 0x03;
inline constexpr uint8_t kSaClassVersion = 2;
inline constexpr uint8_t kMethodGetTable = 0x12;
inline constexpr uint8_t kMethodGetTableResp = 0x92;
inline constexpr uint16_t kAttrSmInfoRecord = 0x0018;
inline constexpr size_t kSaDataOffset = 56;
inline constexpr uint32_t kGsiQkey = 0x80010000;  // QP1's well-known Q_Key

struct SmInfoRecord {
  uint32_t lid = 0;  // the SM's port LID
  SmInfo info;
};

// The request: SubnAdmGetTable(SMInfoRecord), component mask 0 (all SMs).
std::array<uint8_t, kMadSize> encode_sminfo_record_gettable(uint64_t tid);

// Checks a reply is GetTableResp(SMInfoRecord) for tid with status 0, then
// reads its records. `mad` is the whole reply as received (one MAD, or the
// reassembled RMPP payload): its length says how many records there are.
Result<std::vector<SmInfoRecord>> decode_sminfo_records(std::span<const uint8_t> mad, uint64_t tid);

// A GetTableResp carrying these records (tests build replies with it).
std::vector<uint8_t> encode_sminfo_records_reply(uint64_t tid, const std::vector<SmInfoRecord>& recs);

}  // namespace fa::probes::smp
