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
