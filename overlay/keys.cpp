// SPDX-License-Identifier: Apache-2.0
// Key codecs and X25519. The curve and base64 are OpenSSL's (libcrypto):
// the one crypto library the agent links, which its TLS needs anyway; its
// base64 is the code OpenSSL reads PEM private keys with. The hex codec,
// the UAPI's form of the private key, is branch-free per digit.
#include <openssl/evp.h>

#include <algorithm>
#include <memory>

#include "common/random.hpp"
#include "common/secure.hpp"
#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

namespace {
int hex_value(unsigned char uc) {
  int c = uc, v = -1;
  v += ((('0' - 1 - c) & (c - ('9' + 1))) >> 8) & (c - '0' + 1);
  v += ((('a' - 1 - c) & (c - ('f' + 1))) >> 8) & (c - 'a' + 11);
  v += ((('A' - 1 - c) & (c - ('F' + 1))) >> 8) & (c - 'A' + 11);
  return v;
}
char hex_char(int v) { return static_cast<char>(v + '0' + (((9 - v) >> 8) & ('a' - '0' - 10))); }

// The 32 bytes of a 64-digit hex key (length already checked); as above.
template <class Value>
int decode_hex(std::string_view s, Key& k, Value value) {
  int bad = 0;
  for (size_t i = 0; i < kKeyLen; ++i) {
    int hi = value(static_cast<unsigned char>(s[2 * i])),
        lo = value(static_cast<unsigned char>(s[2 * i + 1]));
    bad |= hi | lo;
    k[i] = static_cast<uint8_t>((hi & 15) << 4 | (lo & 15));
  }
  return bad;
}

// The 64 hex digits of a key appended in place, each nibble mapped by `digit`.
template <class Digit>
void encode_hex(std::string& out, const Key& k, Digit digit) {
  size_t at = out.size();
  out.resize(at + 2 * kKeyLen);
  char* p = out.data() + at;
  for (size_t i = 0; i < kKeyLen; ++i) {
    p[2 * i] = digit(k[i] >> 4);
    p[2 * i + 1] = digit(k[i] & 15);
  }
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
}  // namespace

void wipe(Key& k) { secure_wipe(k.data(), k.size()); }

std::string key_to_base64(const Key& k) {
  std::string out(45, '\0');  // 44 characters and EVP_EncodeBlock's NUL
  EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), k.data(), static_cast<int>(k.size()));
  out.resize(44);
  return out;
}

Result<Key> key_from_base64(std::string_view s) {
  // 32 bytes -> 44 characters ending in exactly one '='.
  if (s.size() != 44 || s[43] != '=')
    return Error{"expected a 44-character base64 WireGuard key (32 bytes), got " + std::to_string(s.size()) +
                 " characters"};
  // EVP_DecodeBlock reads '=' anywhere as a zero digit: only the last may be one.
  if (s.substr(0, 43).find('=') != std::string_view::npos) return Error{"not valid base64"};
  unsigned char out[33] = {};  // the '=' decodes as a 33rd byte
  const int n = EVP_DecodeBlock(out, reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  Key k;
  std::copy(out, out + kKeyLen, k.begin());
  // The last character carries 2 unused low bits (out[32]'s top two): set,
  // they make a second spelling of the same key, and one key must have
  // exactly one spelling.
  const bool canonical = out[32] == 0;
  secure_wipe(out, sizeof out);
  if (n != 33) {
    wipe(k);
    return Error{"not valid base64"};
  }
  if (!canonical) {
    wipe(k);
    return Error{"not a canonical base64 encoding of a 32-byte key"};
  }
  return k;
}

Result<Key> key_from_file_text(std::string& text) {
  std::string_view s = text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  auto k = key_from_base64(s);
  secure_wipe(text.data(), text.size());
  return k;
}

std::string key_to_hex(const Key& k) {
  std::string s;
  encode_hex(s, k, hex_char);  // branch-free per digit: it may be the private key
  return s;
}

Result<Key> key_from_hex(std::string_view s) {
  if (s.size() != 64) return Error{"expected 64 hex digits, got " + std::to_string(s.size()) + " characters"};
  Key k;
  if (decode_hex(s, k, hex_value) < 0) {
    size_t first_bad = s.size();
    // Only now, on the error path, find where: the position is not secret
    // once the key is known to be malformed.
    for (size_t i = 0; i < s.size() && first_bad == s.size(); ++i)
      if (hex_value(static_cast<unsigned char>(s[i])) < 0) first_bad = i;
    wipe(k);
    return Error{"not a hex digit at position " + std::to_string(first_bad)};
  }
  return k;
}

Result<Key> generate_private_key() {
  // 32 bytes from the kernel's CSPRNG, as `wg genkey` reads them.
  Key k;
  if (Status r = random_bytes(k.data(), k.size()); !r) return r.take_error();
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
