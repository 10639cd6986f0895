// SPDX-License-Identifier: Apache-2.0
// The RDMA link probe's side channel (probes/rdma/wire, auth): one line from
// the peer, as the server reads it before and after the handshake: decoded
// as a record, given to the server's handshake as a hello and then as the
// client's proof, and opened as a sealed line of a session.
// Checked: a record decodes only from its one spelling (encode(decode(x))
// == x), and a refusal carries no byte that is not printable ASCII (it is
// logged and sent back to the peer); a sealed line opens only to the record
// whose seal it is.
#include <vector>

#include "fuzz/fuzz.hpp"
#include "probes/rdma/auth.hpp"
#include "probes/rdma/wire.hpp"

namespace rd = fa::rdma;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line = fa_fuzz::text(data, size);
  auto r = rd::decode(line);
  if (r) {
    FUZZ_CHECK(rd::encode(*r) == line);
    if (const auto* e = std::get_if<rd::Endpoint>(&*r)) {
      FUZZ_CHECK(e->len >= 1 && e->len <= rd::kMaxBufferBytes);
      FUZZ_CHECK(e->addr + e->len >= e->addr);
      FUZZ_CHECK(e->qpn != 0 && e->qpn <= 0xffffff);
    }
  } else {
    for (char c : r.error().message) FUZZ_CHECK(c >= 0x20 && c < 0x7f);
  }

  static const rd::Key key = rd::Key::from_bytes(std::vector<uint8_t>(32, 0x5a));
  const rd::Nonce ns{1, 2, 3};
  rd::ServerHandshake server(key, ns);
  if (server.on_hello(line).ok()) (void)server.on_proof(line);
  rd::ServerHandshake fresh(key, ns);
  FUZZ_CHECK(!fresh.on_proof(line).ok());  // a proof before a hello is refused

  static const rd::SessionKey session = rd::session_key(key, rd::Nonce{7}, ns);
  if (auto rec = rd::open(session, rd::Direction::kToServer, 3, line)) {
    FUZZ_CHECK(rd::seal(session, rd::Direction::kToServer, 3, *rec) == line);
    FUZZ_CHECK(!rd::open(session, rd::Direction::kToClient, 3, line));
  }
  return 0;
}
