// SPDX-License-Identifier: Apache-2.0
// SubnGet(SMInfo) against bytes laid out by hand from the InfiniBand spec:
// SMP header (14.2.1.1, LID routed) and SMInfo (14.2.5.13):
//   GUID 8 bytes | SM_Key 8 bytes | ActCount 4 bytes | Priority:4 SMState:4
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <array>
#include <vector>

#include "probes/sminfo.hpp"
#include "probes/umad_io.hpp"

using namespace fa::probes;

namespace {

std::array<uint8_t, 256> hand_reply() {
  std::array<uint8_t, 256> m{};
  m[0] = 0x01;  // BaseVersion
  m[1] = 0x01;  // MgmtClass: subnet management, LID routed
  m[2] = 0x01;  // ClassVersion
  m[3] = 0x81;  // Method: GetResp
  m[4] = 0x00;  // Status
  m[5] = 0x00;
  const uint8_t tid[8] = {0x00, 0x00, 0x00, 0x00, 0xde, 0xad, 0xbe, 0xef};
  for (int i = 0; i < 8; ++i) m[8 + i] = tid[i];
  m[16] = 0x00;  // AttributeID 0x0020 = SMInfo
  m[17] = 0x20;
  // SMP data at 64.
  const uint8_t guid[8] = {0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0xb2, 0xc3};
  for (int i = 0; i < 8; ++i) m[64 + i] = guid[i];
  const uint8_t key[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
  for (int i = 0; i < 8; ++i) m[72 + i] = key[i];
  m[80] = 0x00;  // ActCount 0x00012345
  m[81] = 0x01;
  m[82] = 0x23;
  m[83] = 0x45;
  m[84] = 0xe3;  // Priority 14 (high nibble), SMState 3 = master (low nibble)
  return m;
}

}  // namespace

TEST_CASE("SubnGet(SMInfo) request bytes") {
  auto m = smp::encode_sminfo_get(0x0123456789abcdefull);
  std::array<uint8_t, 256> want{};
  want[0] = 0x01;
  want[1] = 0x01;
  want[2] = 0x01;
  want[3] = 0x01;  // Get
  const uint8_t tid[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  for (int i = 0; i < 8; ++i) want[8 + i] = tid[i];
  want[17] = 0x20;
  CHECK(m == want);
}

TEST_CASE("SMInfo reply decodes field by field") {
  auto m = hand_reply();
  auto r = smp::decode_sminfo_response(m, 0xdeadbeefull);
  REQUIRE(r.ok());
  CHECK(r->guid == 0x0002c90300a1b2c3ull);
  CHECK(r->sm_key == 0x1122334455667788ull);
  CHECK(r->act_count == 0x00012345u);
  CHECK(r->priority == 14);
  CHECK(r->sm_state == 3);
  CHECK(smp::sm_state_name(r->sm_state) == "master");
  CHECK(smp::sm_state_name(9) == "unknown (9)");
}

TEST_CASE("SMInfo encode lays out the same bytes") {
  std::array<uint8_t, 64> d{};
  smp::encode_sminfo(d, {0x0002c90300a1b2c3ull, 0x1122334455667788ull, 0x12345, 14, 3});
  auto m = hand_reply();
  CHECK(std::equal(d.begin(), d.begin() + 21, m.begin() + 64));
  CHECK(std::all_of(d.begin() + 21, d.end(), [](uint8_t b) { return b == 0; }));
}

TEST_CASE("SMInfo replies that are not ours are refused") {
  auto m = hand_reply();
  CHECK_FALSE(smp::decode_sminfo_response(m, 0xdeadbef0ull).ok());  // other transaction
  auto kernel_tid = m;
  kernel_tid[8] = 0x00;  // ib_umad's agent id in the upper 32 bits: still our reply
  kernel_tid[10] = 0x01;
  kernel_tid[11] = 0x7f;
  CHECK(smp::decode_sminfo_response(kernel_tid, 0xdeadbeefull).ok());
  auto bad = m;
  bad[3] = 0x01;  // a Get, not a GetResp
  CHECK(smp::decode_sminfo_response(bad, 0xdeadbeefull).error().message.find("method") != std::string::npos);
  bad = m;
  bad[17] = 0x15;  // PortInfo
  CHECK(smp::decode_sminfo_response(bad, 0xdeadbeefull).error().message.find("attribute") !=
        std::string::npos);
  bad = m;
  bad[5] = 0x0c;  // status: unsupported attribute/modifier
  CHECK(smp::decode_sminfo_response(bad, 0xdeadbeefull).error().message.find("0x000c") != std::string::npos);
  bad = m;
  bad[1] = 0x81;  // directed route class
  CHECK_FALSE(smp::decode_sminfo_response(bad, 0xdeadbeefull).ok());
  std::vector<uint8_t> short_mad(m.begin(), m.begin() + 80);
  CHECK(smp::decode_sminfo_response(short_mad, 0xdeadbeefull).error().message.find("too short") !=
        std::string::npos);
}

// SubnAdmGetTable(SMInfoRecord) as OpenSM answers it (IBA 15.2.1.1 SA MAD,
// 15.2.5.16 SMInfoRecord; OpenSM pads each record to 32 bytes).
std::vector<uint8_t> hand_table(size_t pad_to = 0) {
  std::vector<uint8_t> m(56 + 2 * 32);
  m[0] = 0x01;  // BaseVersion
  m[1] = 0x03;  // MgmtClass: subnet administration
  m[2] = 0x02;  // ClassVersion 2
  m[3] = 0x92;  // GetTableResp
  const uint8_t tid[8] = {0x00, 0x00, 0x00, 0x07, 0xca, 0xfe, 0x00, 0x01};
  for (int i = 0; i < 8; ++i) m[8 + i] = tid[i];
  m[16] = 0x00;  // AttributeID 0x0018 = SMInfoRecord
  m[17] = 0x18;
  m[24] = 0x01;  // RMPP version 1
  m[25] = 0x01;  // DATA
  m[26] = 0x07;  // active | first | last
  m[45] = 0x04;  // AttributeOffset: 4 x 8 bytes
  // Record 0 at 56: LID 1, master 0x0002c90300a10001, priority 10.
  m[57] = 0x01;
  const uint8_t g0[8] = {0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0x00, 0x01};
  for (int i = 0; i < 8; ++i) m[60 + i] = g0[i];
  m[76] = 0x00;  // ActCount 0x000000a0
  m[79] = 0xa0;
  m[80] = 0xa3;  // priority 10, master
  // Record 1 at 88: LID 3, standby 0x0002c90300a10003, priority 5.
  m[89] = 0x03;
  const uint8_t g1[8] = {0x00, 0x02, 0xc9, 0x03, 0x00, 0xa1, 0x00, 0x03};
  for (int i = 0; i < 8; ++i) m[92 + i] = g1[i];
  m[112] = 0x52;  // priority 5, standby
  if (pad_to > m.size()) m.resize(pad_to, 0);
  return m;
}

TEST_CASE("SubnAdmGetTable(SMInfoRecord) request bytes") {
  auto m = smp::encode_sminfo_record_gettable(0x0000000700000042ull);
  std::array<uint8_t, 256> want{};
  want[0] = 0x01;
  want[1] = 0x03;
  want[2] = 0x02;
  want[3] = 0x12;  // GetTable
  want[11] = 0x07;
  want[15] = 0x42;
  want[17] = 0x18;
  // RMPP header, SM_Key, AttributeOffset, ComponentMask: all zero (every record).
  CHECK(m == want);
}

TEST_CASE("SMInfoRecord table decodes record by record") {
  for (size_t pad : {size_t{0}, size_t{256}}) {  // exact (RMPP, umad2sim) and padded to one MAD
    INFO("padded to " << pad);
    auto r = smp::decode_sminfo_records(hand_table(pad), 0xcafe0001ull);
    REQUIRE(r.ok());
    REQUIRE(r->size() == 2);
    CHECK((*r)[0].lid == 1u);
    CHECK((*r)[0].info.guid == 0x0002c90300a10001ull);
    CHECK((*r)[0].info.act_count == 0xa0u);
    CHECK((*r)[0].info.priority == 10);
    CHECK((*r)[0].info.sm_state == 3);
    CHECK((*r)[1].lid == 3u);
    CHECK((*r)[1].info.guid == 0x0002c90300a10003ull);
    CHECK((*r)[1].info.priority == 5);
    CHECK((*r)[1].info.sm_state == 2);
  }
  // The encoder lays out the same bytes (tests and fuzzers build replies with it).
  auto want = hand_table();
  auto recs = *smp::decode_sminfo_records(want, 0xcafe0001ull);
  CHECK(smp::encode_sminfo_records_reply(0x00000007cafe0001ull, recs) == want);
  // A table of none.
  std::vector<uint8_t> none(want.begin(), want.begin() + 56);
  CHECK(smp::decode_sminfo_records(none, 0xcafe0001ull)->empty());
}

TEST_CASE("SMInfoRecord replies that are not a table of SMs are refused") {
  auto m = hand_table();
  CHECK(smp::decode_sminfo_records(m, 0xcafe0002ull).error().message.find("transaction") !=
        std::string::npos);
  auto bad = m;
  bad[3] = 0x81;  // a GetResp
  CHECK(smp::decode_sminfo_records(bad, 0xcafe0001ull).error().message.find("method 129") !=
        std::string::npos);
  bad = m;
  bad[17] = 0x11;  // NodeRecord
  CHECK(smp::decode_sminfo_records(bad, 0xcafe0001ull).error().message.find("attribute 17") !=
        std::string::npos);
  bad = m;
  bad[4] = 0x03;  // SA status 3: no records (class-specific bits 8..15)
  CHECK(smp::decode_sminfo_records(bad, 0xcafe0001ull).error().message.find("0x0300") != std::string::npos);
  bad = m;
  bad[45] = 0x02;  // records of 16 bytes cannot hold an SMInfo
  CHECK(smp::decode_sminfo_records(bad, 0xcafe0001ull).error().message.find("attribute offset 2") !=
        std::string::npos);
  std::vector<uint8_t> short_mad(m.begin(), m.begin() + 40);
  CHECK(smp::decode_sminfo_records(short_mad, 0xcafe0001ull).error().message.find("too short") !=
        std::string::npos);
}

TEST_CASE("SMInfo through libibumad fails with a reason where umad is unavailable") {
  struct stat st {};
  if (::stat("/sys/class/infiniband_mad", &st) == 0) {
    WARN("this machine has ib_umad; the unavailable path is not exercised here");
    return;
  }
  auto r = query_sminfo("mlx5_0", 1, 1, 50, 0);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("mlx5_0:1") != std::string::npos);
  CHECK(r.error().message.find("umad") != std::string::npos);
}
