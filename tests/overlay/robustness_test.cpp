// SPDX-License-Identifier: Apache-2.0
// The parsers take bytes, so they are fed damaged bytes: every result must be
// a value or an error, never a crash or an out-of-bounds read (the ASan pass
// of `make test` runs this too). A poor man's version of wireguard-tools'
// fuzz harnesses, deterministic so a failure reproduces.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>

#include "overlay/internal.hpp"
#include "tests/overlay/genl_bytes.hpp"

using namespace fa::overlay;

namespace {

Device sample(size_t n) {
  Device d;
  d.name = "wg0";
  d.private_key = Key{1, 2, 3};
  d.listen_port = 51820;
  for (size_t i = 0; i < n; ++i) {
    Peer p;
    p.public_key = Key{static_cast<uint8_t>(i), 9};
    p.endpoint = *Endpoint::parse(i % 2 ? "192.0.2.1:51820" : "[2001:db8::1]:51820");
    p.persistent_keepalive = 25;
    p.replace_allowed_ips = true;
    p.allowed_ips = {*IpPrefix::parse("10.42.0." + std::to_string(i + 1) + "/32"),
                     *IpPrefix::parse("fd00::/64")};
    d.peers.push_back(p);
  }
  return d;
}
}  // namespace

TEST_CASE("genl decoder survives damaged messages", "[robustness]") {
  auto msgs = fa_test::bytes_of(genl_build_set(sample(40), 20, 4096));
  REQUIRE_FALSE(msgs.empty());
  std::mt19937 rng(4242);
  size_t ok = 0, refused = 0;
  for (int it = 0; it < 20000; ++it) {
    auto m = msgs[0];
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) m[rng() % m.size()] = static_cast<uint8_t>(rng());
    if (rng() % 8 == 0) m.resize(rng() % m.size());
    auto r = genl_parse_device({m});
    (r.ok() ? ok : refused)++;
  }
  CHECK(ok + refused == 20000);
  CHECK(refused > 0);
}

TEST_CASE("UAPI and desired-state parsers survive damaged text", "[robustness]") {
  Device d = sample(5);
  std::string reply = uapi_set_request(d);
  reply.replace(0, 6, "");  // drop "set=1\n": the body reads like a get reply
  reply.insert(reply.size() - 1, "errno=0\n");
  std::string yaml =
      "cluster_id: c-1\naddress: 10.42.0.1/24\nmtu: 1420\npeers:\n  - public_key: "
      "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\n    endpoint: 192.0.2.10:51820\n"
      "    allowed_ips: [10.42.0.2/32]\n    persistent_keepalive: 25\n";
  REQUIRE(parse_desired_text(yaml).ok());
  std::mt19937 rng(777);
  const std::string alphabet = "=:/[]{}-,\n 0123456789abcdefABCDEF.xz%\"'#&*!|>";
  for (int it = 0; it < 5000; ++it) {
    std::string u = reply, y = yaml;
    for (int f = 0; f < 3; ++f) {
      u[rng() % u.size()] = alphabet[rng() % alphabet.size()];
      y[rng() % y.size()] = alphabet[rng() % alphabet.size()];
    }
    auto r = uapi_parse_get(u);
    auto p = parse_desired_text(y);
    if (!p.ok()) CHECK_FALSE(p.errors.empty());
    (void)r;
  }
}

