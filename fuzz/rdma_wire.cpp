// SPDX-License-Identifier: Apache-2.0
// The RDMA link probe's side-channel records (probes/rdma/wire): one line
// from the peer, decoded. Checked: a record decodes only from its one
// spelling (encode(decode(x)) == x), and a refusal carries no byte that is
// not printable ASCII (it is logged and sent back to the peer).
#include "fuzz/fuzz.hpp"
#include "probes/rdma/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line = fa_fuzz::text(data, size);
  auto r = fa::rdma::decode(line);
  if (r) {
    FUZZ_CHECK(fa::rdma::encode(*r) == line);
    if (const auto* e = std::get_if<fa::rdma::Endpoint>(&*r)) {
      FUZZ_CHECK(e->len >= 1 && e->len <= fa::rdma::kMaxBufferBytes);
      FUZZ_CHECK(e->addr + e->len >= e->addr);
      FUZZ_CHECK(e->qpn != 0 && e->qpn <= 0xffffff);
    }
    return 0;
  }
  for (char c : r.error().message) FUZZ_CHECK(c >= 0x20 && c < 0x7f);
  return 0;
}
