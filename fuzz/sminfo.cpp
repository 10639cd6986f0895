// SPDX-License-Identifier: Apache-2.0
// A subnet manager's answer to SubnGet(SMInfo) as umad_recv hands it over
// (decode_sminfo_response), for the transaction id the seeds carry.
// Checked: an accepted reply is a GetResp(SMInfo) for that transaction,
// and its fields encode back to the bytes they came from.
#include <array>

#include "fuzz/fuzz.hpp"
#include "probes/sminfo.hpp"

namespace smp = fa::probes::smp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kTid = 0x00000001c0ffee42;  // the kernel's agent id in the upper half
  std::span<const uint8_t> mad(data, size);
  auto r = smp::decode_sminfo_response(mad, kTid);
  if (!r) {
    FUZZ_CHECK(!r.error().message.empty());
    return 0;
  }
  FUZZ_CHECK(size >= smp::kSmpDataOffset + 21);
  FUZZ_CHECK(mad[3] == smp::kMethodGetResp);
  FUZZ_CHECK(smp::get_be(mad, 12, 4) == (kTid & 0xffffffff));
  FUZZ_CHECK(r->priority < 16 && r->sm_state < 16);
  std::array<uint8_t, 64> body{};
  smp::encode_sminfo(body, *r);
  for (size_t i = 0; i < 21; ++i) FUZZ_CHECK(body[i] == mad[smp::kSmpDataOffset + i]);
  FUZZ_CHECK(!smp::sm_state_name(r->sm_state).empty());
  return 0;
}
