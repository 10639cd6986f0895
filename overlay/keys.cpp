// SPDX-License-Identifier: Apache-2.0
// Key codecs and the choice of X25519. The curve math is OpenSSL's
// (x25519_openssl.cpp), or a child's of the whole agent in the static front
// (x25519_child.cpp). The base64 and hex codecs of keys are ours, in
// constant time as wireguard-tools' are: a private key passes through them,
// and a table lookup indexed by secret bytes leaks through the cache; they
// also keep libcrypto out of processes that only move keys.
#include <mutex>

#include "common/child.hpp"
#include "common/random.hpp"
#include "common/secure.hpp"
#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

namespace {
// Branch-free maps between 6-bit values and the standard base64 alphabet.
// (x >> 8) of an int in [-255, 255] is -1 (all ones) when x < 0, else 0.
char b64_char(int v) {
  v += 'A' + (((25 - v) >> 8) & 6) - (((51 - v) >> 8) & 75) - (((61 - v) >> 8) & 15) + (((62 - v) >> 8) & 3);
  return static_cast<char>(v);
}
// The value of base64 character c, or -1; the same work for every c.
int b64_value(unsigned char uc) {
  int c = uc, v = -1;
  v += ((('A' - 1 - c) & (c - ('Z' + 1))) >> 8) & (c - 'A' + 1);
  v += ((('a' - 1 - c) & (c - ('z' + 1))) >> 8) & (c - 'a' + 27);
  v += ((('0' - 1 - c) & (c - ('9' + 1))) >> 8) & (c - '0' + 53);
  v += ((('+' - 1 - c) & (c - ('+' + 1))) >> 8) & 63;
  v += ((('/' - 1 - c) & (c - ('/' + 1))) >> 8) & 64;
  return v;
}
int hex_value(unsigned char uc) {
  int c = uc, v = -1;
  v += ((('0' - 1 - c) & (c - ('9' + 1))) >> 8) & (c - '0' + 1);
  v += ((('a' - 1 - c) & (c - ('f' + 1))) >> 8) & (c - 'a' + 11);
  v += ((('A' - 1 - c) & (c - ('F' + 1))) >> 8) & (c - 'A' + 11);
  return v;
}
char hex_char(int v) { return static_cast<char>(v + '0' + (((9 - v) >> 8) & ('a' - '0' - 10))); }

// The 32 bytes of a 44-character base64 key (length and '=' already
// checked), each character mapped by `value` (-1 outside the alphabet).
// Returns the OR of all values, negative if any character was bad, checked
// once by the caller; `last` is the last character's value, whose 2 low bits
// must be clear. With b64_value the same work is done for every input.
template <class Value>
int decode_base64(std::string_view s, Key& k, Value value, int& last) {
  int bad = 0;
  size_t o = 0, i = 0;
  for (; i < 40; i += 4) {
    int a = value(static_cast<unsigned char>(s[i])), b = value(static_cast<unsigned char>(s[i + 1])),
        c = value(static_cast<unsigned char>(s[i + 2])), d = value(static_cast<unsigned char>(s[i + 3]));
    bad |= a | b | c | d;
    uint32_t w = uint32_t(a) << 18 | uint32_t(b) << 12 | uint32_t(c) << 6 | uint32_t(d);
    k[o++] = static_cast<uint8_t>(w >> 16);
    k[o++] = static_cast<uint8_t>(w >> 8);
    k[o++] = static_cast<uint8_t>(w);
  }
  int a = value(static_cast<unsigned char>(s[40])), b = value(static_cast<unsigned char>(s[41])),
      c = value(static_cast<unsigned char>(s[42]));
  bad |= a | b | c;
  uint32_t w = uint32_t(a) << 18 | uint32_t(b) << 12 | uint32_t(c) << 6;
  k[o++] = static_cast<uint8_t>(w >> 16);
  k[o++] = static_cast<uint8_t>(w >> 8);
  last = c;
  return bad;
}

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

std::mutex deriver_mu;
PublicKeyDeriver deriver;  // empty: public_key_derive()
}  // namespace

void wipe(Key& k) { secure_wipe(k.data(), k.size()); }

std::string key_to_base64(const Key& k) {
  std::string out(44, '=');
  size_t o = 0, i = 0;
  for (; i + 3 <= kKeyLen; i += 3) {  // 10 full groups: 30 bytes
    uint32_t w = uint32_t(k[i]) << 16 | uint32_t(k[i + 1]) << 8 | k[i + 2];
    for (int sh = 18; sh >= 0; sh -= 6) out[o++] = b64_char(static_cast<int>(w >> sh & 63));
  }
  uint32_t w = uint32_t(k[i]) << 16 | uint32_t(k[i + 1]) << 8;  // 2 bytes left: 3 characters and '='
  for (int sh = 18; sh >= 6; sh -= 6) out[o++] = b64_char(static_cast<int>(w >> sh & 63));
  return out;
}

Result<Key> key_from_base64(std::string_view s) {
  // 32 bytes -> 44 characters ending in exactly one '='.
  if (s.size() != 44 || s[43] != '=')
    return Error{"expected a 44-character base64 WireGuard key (32 bytes), got " + std::to_string(s.size()) +
                 " characters"};
  Key k;
  int last = 0;
  if (decode_base64(s, k, b64_value, last) < 0) {
    wipe(k);
    return Error{"not valid base64"};
  }
  // The last character carries 2 unused low bits: set, they make a second
  // spelling of the same key, and one key must have exactly one spelling.
  if (last & 3) {
    wipe(k);
    return Error{"not a canonical base64 encoding of a 32-byte key"};
  }
  return k;
}

namespace {
// Character -> value for public keys, -1 outside the alphabet.
struct DecodeTables {
  int8_t b64[256], hex[256];
};
constexpr DecodeTables make_tables() {
  DecodeTables t{};
  for (int c = 0; c < 256; ++c) {
    t.b64[c] = c >= 'A' && c <= 'Z'   ? static_cast<int8_t>(c - 'A')
               : c >= 'a' && c <= 'z' ? static_cast<int8_t>(c - 'a' + 26)
               : c >= '0' && c <= '9' ? static_cast<int8_t>(c - '0' + 52)
               : c == '+'             ? 62
               : c == '/'             ? 63
                                      : -1;
    t.hex[c] = c >= '0' && c <= '9'   ? static_cast<int8_t>(c - '0')
               : c >= 'a' && c <= 'f' ? static_cast<int8_t>(c - 'a' + 10)
               : c >= 'A' && c <= 'F' ? static_cast<int8_t>(c - 'A' + 10)
                                      : -1;
  }
  return t;
}
constexpr DecodeTables kDecode = make_tables();
}  // namespace

Result<Key> public_key_from_base64(std::string_view s) {
  // Whatever the table does not take goes to the constant-time decoder,
  // whose error message is then the answer.
  if (s.size() != 44 || s[43] != '=') return key_from_base64(s);
  Key k;
  int last = 0;
  if (decode_base64(
          s, k, [](unsigned char c) { return int{kDecode.b64[c]}; }, last) < 0 ||
      (last & 3))
    return key_from_base64(s);
  return k;
}

Result<Key> public_key_from_hex(std::string_view s) {
  Key k;
  if (s.size() != 64 || decode_hex(s, k, [](unsigned char c) { return int{kDecode.hex[c]}; }) < 0)
    return key_from_hex(s);
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
  append_key_hex(s, k);
  return s;
}

void append_public_key_hex(std::string& out, const Key& k) {
  // A public key is no secret: its digits from a table.
  encode_hex(out, k, [](int v) { return "0123456789abcdef"[v]; });
}

void append_key_hex(std::string& out, const Key& k) {
  encode_hex(out, k, hex_char);  // branch-free per digit: it may be the private key
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

void set_public_key_deriver(PublicKeyDeriver d) {
  std::lock_guard<std::mutex> lock(deriver_mu);
  deriver = std::move(d);
}

Result<Key> public_key_of(const Key& private_key) {
  {
    std::unique_lock<std::mutex> lock(deriver_mu);
    if (deriver) {
      PublicKeyDeriver d = deriver;
      lock.unlock();
      return d(private_key);
    }
  }
  return public_key_derive(private_key);
}

Result<Key> public_key_in_child(const std::string& exe, const Key& private_key) {
  std::string b64 = key_to_base64(private_key) + "\n";
  auto out = run_child(exe, {"fabric-agent", "mesh", "pubkey"}, b64, "fabric-agent mesh pubkey");
  secure_wipe(b64.data(), b64.size());
  if (!out) return out.take_error();
  std::string_view got(*out);
  while (!got.empty() && (got.back() == '\n' || got.back() == ' ')) got.remove_suffix(1);
  auto pub = key_from_base64(got);
  if (!pub) return Error{"fabric-agent mesh pubkey printed no key: " + pub.error().message};
  return pub;
}

}  // namespace fa::overlay
