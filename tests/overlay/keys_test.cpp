// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cctype>

#include "overlay/internal.hpp"

using namespace fa::overlay;

namespace {
Key hex(const char* s) {
  auto k = key_from_hex(s);
  REQUIRE(k.ok());
  return *k;
}
}  // namespace

TEST_CASE("X25519 matches RFC 7748 section 5.2 test vectors", "[keys]") {
  auto out = x25519(hex("a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"),
                    hex("e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c"));
  REQUIRE(out.ok());
  CHECK(key_to_hex(*out) == "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552");
  out = x25519(hex("4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d"),
               hex("e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493"));
  REQUIRE(out.ok());
  CHECK(key_to_hex(*out) == "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957");
}

TEST_CASE("X25519 Diffie-Hellman of RFC 7748 section 6.1", "[keys]") {
  Key alice = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  Key bob = hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  auto apub = public_key_of(alice);
  auto bpub = public_key_of(bob);
  REQUIRE(apub.ok());
  REQUIRE(bpub.ok());
  CHECK(key_to_hex(*apub) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  CHECK(key_to_hex(*bpub) == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  auto k1 = x25519(alice, *bpub);
  auto k2 = x25519(bob, *apub);
  REQUIRE(k1.ok());
  REQUIRE(k2.ok());
  CHECK(key_to_hex(*k1) == "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  CHECK(*k1 == *k2);
}

TEST_CASE("generated keys are clamped and distinct", "[keys]") {
  auto a = generate_private_key();
  auto b = generate_private_key();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a != *b);
  CHECK(((*a)[0] & 7) == 0);
  CHECK(((*a)[31] & 0x80) == 0);
  CHECK(((*a)[31] & 0x40) == 0x40);
}

TEST_CASE("base64 and hex key codecs round-trip and reject bad input", "[keys]") {
  Key k = hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  std::string b = key_to_base64(k);
  CHECK(b == "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=");
  auto back = key_from_base64(b);
  REQUIRE(back.ok());
  CHECK(*back == k);
  CHECK(key_to_hex(k) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  CHECK_FALSE(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo").ok());   // no padding
  CHECK_FALSE(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTm*=").ok());  // bad char
  CHECK_FALSE(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmp=").ok());  // non-canonical
  CHECK_FALSE(key_from_base64("").ok());
  // The messages name what is wrong.
  CHECK(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo").error().message ==
        "expected a 44-character base64 WireGuard key (32 bytes), got 43 characters");
  CHECK(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTm==").error().message == "not valid base64");
  CHECK(key_from_base64("hSDw=Ykwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=").error().message == "not valid base64");
  CHECK(key_from_base64(" SDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=").error().message == "not valid base64");
  CHECK(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmp=").error().message ==
        "not a canonical base64 encoding of a 32-byte key");
  CHECK_FALSE(key_from_hex("8520").ok());
  CHECK_FALSE(key_from_hex("x520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a").ok());
  auto upper = key_from_hex("8520F0098930A754748B7DDCB43EF75A0DBF3A0D26381AF4EBA4A98EAA9B4E6A");
  REQUIRE(upper.ok());
  CHECK(*upper == k);
}

namespace {
// Reference codecs for the test only: the plain table-driven way.
const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
std::string ref_base64(const Key& k) {
  std::string out;
  for (size_t i = 0; i < k.size(); i += 3) {
    uint32_t w = uint32_t(k[i]) << 16 | (i + 1 < k.size() ? uint32_t(k[i + 1]) << 8 : 0) |
                 (i + 2 < k.size() ? k[i + 2] : 0);
    out += kB64[w >> 18 & 63];
    out += kB64[w >> 12 & 63];
    out += i + 1 < k.size() ? kB64[w >> 6 & 63] : '=';
    out += i + 2 < k.size() ? kB64[w & 63] : '=';
  }
  return out;
}
}  // namespace

TEST_CASE("key codecs agree with a reference codec on every byte value", "[keys]") {
  // 256 keys cover every byte value at every position, and so every base64
  // character at every position but the last (which carries 2 zero bits).
  for (int j = 0; j < 256; ++j) {
    Key k;
    for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(j + 37 * i);
    std::string b = key_to_base64(k);
    REQUIRE(b == ref_base64(k));
    auto back = key_from_base64(b);
    REQUIRE(back.ok());
    CHECK(*back == k);
    std::string ref_hex;
    for (uint8_t byte : k) ref_hex += {"0123456789abcdef"[byte >> 4], "0123456789abcdef"[byte & 15]};
    REQUIRE(key_to_hex(k) == ref_hex);
    auto hb = key_from_hex(key_to_hex(k));
    REQUIRE(hb.ok());
    CHECK(*hb == k);
  }
}

TEST_CASE("base64 key decoding rejects every character outside the alphabet, anywhere", "[keys]") {
  const std::string good = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";
  int accepted = 0, rejected = 0;
  for (int c = 0; c < 256; ++c) {
    bool in_alphabet = std::string_view(kB64).find(static_cast<char>(c)) != std::string_view::npos;
    for (size_t pos : {size_t(0), size_t(17), size_t(39), size_t(41), size_t(42)}) {
      std::string s = good;
      s[pos] = static_cast<char>(c);
      auto k = key_from_base64(s);
      // pos 42 carries 2 unused bits: only characters with them clear decode.
      bool want = in_alphabet && (pos != 42 || (std::string_view(kB64).find(static_cast<char>(c)) & 3) == 0);
      CHECK(k.ok() == want);
      (k.ok() ? accepted : rejected)++;
      // And in hex, in either half of a byte.
      for (size_t hpos : {size_t(0), size_t(33), size_t(63)}) {
        std::string h = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a";
        h[hpos] = static_cast<char>(c);
        auto kh = key_from_hex(h);
        CHECK(kh.ok() == (std::isxdigit(c) != 0));
      }
    }
  }
  CHECK(accepted > 0);
  CHECK(rejected > 0);
  CHECK_FALSE(key_from_base64("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTm==").ok());  // '=' in place of data
  auto e = key_from_hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4eg6");
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message == "not a hex digit at position 62");
}
