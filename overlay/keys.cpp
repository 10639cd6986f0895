// SPDX-License-Identifier: Apache-2.0
// Key codecs and X25519. The curve math and base64 are OpenSSL's; we only
// check lengths and canonical form so that one key has exactly one spelling.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

namespace {
struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;

int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

void wipe(Key& k) { OPENSSL_cleanse(k.data(), k.size()); }

std::string key_to_base64(const Key& k) {
  unsigned char out[4 * ((kKeyLen + 2) / 3) + 1];
  int n = EVP_EncodeBlock(out, k.data(), static_cast<int>(k.size()));
  return std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n));
}

Result<Key> key_from_base64(std::string_view s) {
  // 32 bytes -> 44 characters ending in exactly one '='.
  if (s.size() != 44 || s[43] != '=' || s[42] == '=')
    return Error{"expected a 44-character base64 WireGuard key (32 bytes), got " + std::to_string(s.size()) +
                 " characters"};
  unsigned char out[33];
  int n = EVP_DecodeBlock(out, reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  if (n != 33) return Error{"not valid base64"};
  Key k;
  std::copy(out, out + kKeyLen, k.begin());
  OPENSSL_cleanse(out, sizeof out);
  // Reject non-canonical spellings (stray low bits in the last character):
  // re-encode on the stack, no string per key of a 1000-peer file.
  unsigned char again[45];
  EVP_EncodeBlock(again, k.data(), static_cast<int>(k.size()));
  if (std::string_view(reinterpret_cast<const char*>(again), 44) != s) {
    wipe(k);
    return Error{"not a canonical base64 encoding of a 32-byte key"};
  }
  return k;
}

std::string key_to_hex(const Key& k) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : k) {
    s.push_back(d[b >> 4]);
    s.push_back(d[b & 15]);
  }
  return s;
}

Result<Key> key_from_hex(std::string_view s) {
  if (s.size() != 64) return Error{"expected 64 hex digits, got " + std::to_string(s.size()) + " characters"};
  Key k;
  for (size_t i = 0; i < kKeyLen; ++i) {
    int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return Error{"not a hex digit at position " + std::to_string(hi < 0 ? 2 * i : 2 * i + 1)};
    k[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return k;
}

Result<Key> generate_private_key() {
  Key k;
  if (RAND_priv_bytes(k.data(), static_cast<int>(k.size())) != 1) return Error{"RAND_priv_bytes failed"};
  // Clamp as RFC 7748 section 5 and `wg genkey` do, so the stored scalar is
  // the one X25519 uses.
  k[0] &= 248;
  k[31] &= 127;
  k[31] |= 64;
  return k;
}

Result<Key> x25519(const Key& scalar, const Key& u) {
  Pkey priv(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, scalar.data(), scalar.size()));
  Pkey peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, u.data(), u.size()));
  if (!priv || !peer) return Error{"OpenSSL rejected an X25519 key"};
  PkeyCtx ctx(EVP_PKEY_CTX_new(priv.get(), nullptr));
  size_t len = kKeyLen;
  Key out;
  if (!ctx || EVP_PKEY_derive_init(ctx.get()) != 1 || EVP_PKEY_derive_set_peer(ctx.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(ctx.get(), out.data(), &len) != 1 || len != kKeyLen)
    return Error{"X25519 derivation failed"};
  return out;
}

void crypto_warm_up() {
  // Only what X25519 and RAND need: no openssl.cnf, no legacy cipher and
  // digest name tables (together half of OpenSSL's ~0.9 ms first-use cost),
  // no cleanup at exit (the process is about to end; keys are wiped by us).
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                          OPENSSL_INIT_NO_ADD_ALL_DIGESTS | OPENSSL_INIT_NO_ATEXIT,
                      nullptr);
  // The first X25519 key loads the default provider and its key manager;
  // a fixed, public scalar does it without touching any secret.
  Key dummy{};
  dummy[0] = 8;
  (void)public_key_of(dummy);
}

Result<Key> public_key_of(const Key& private_key) {
  Pkey priv(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(), private_key.size()));
  if (!priv) return Error{"OpenSSL rejected the X25519 private key"};
  Key pub;
  size_t len = pub.size();
  if (EVP_PKEY_get_raw_public_key(priv.get(), pub.data(), &len) != 1 || len != kKeyLen)
    return Error{"X25519 public key derivation failed"};
  return pub;
}

}  // namespace fa::overlay
