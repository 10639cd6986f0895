// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/auth.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <iterator>
#include <variant>

#include "common/secure.hpp"

namespace fa::rdma {
namespace {

constexpr std::string_view kClientLabel = "fa-rdma/2 client";
constexpr std::string_view kServerLabel = "fa-rdma/2 server";
constexpr std::string_view kSessionLabel = "fa-rdma/2 session";

Mac hmac(const uint8_t* key, size_t key_len, const std::string& data) {
  Mac out{};
  unsigned int n = 0;
  HMAC(EVP_sha256(), key, static_cast<int>(key_len), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out.data(), &n);
  return out;
}

Mac transcript_mac(const Key& key, std::string_view label, const Nonce& nc, const Nonce& ns) {
  std::string data(label);
  data.append(reinterpret_cast<const char*>(nc.data()), nc.size());
  data.append(reinterpret_cast<const char*>(ns.data()), ns.size());
  return hmac(key.bytes().data(), key.bytes().size(), data);
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

bool is_base64(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

const char* const kKeyAccepted =
    "hex or padded base64 of 32..512 random bytes, e.g. the output of `openssl rand -hex 32`";

Error key_error(std::string_view text, const std::string& why) {
  // The text is a secret (or a mistyped one): only its length is named.
  return Error{"the probe key (" + std::to_string(text.size()) + " characters) " + why + "; accepted: " +
               kKeyAccepted};
}

// A handshake record, or why it is not the one expected. The fault names the
// kind received, never the MAC or nonce values.
Outcome<Record> expect_line(std::string_view line, const char* wanted) {
  auto r = decode(line);
  if (!r) return Fault{Reason::kAuthFailed, std::string("handshake: expected ") + wanted + ": " + r.error().message};
  return std::move(*r);
}

Fault wrong_kind(const Record& r, const char* wanted) {
  static constexpr const char* kKinds[] = {"ep", "lat", "done", "err", "hello", "challenge", "auth", "plan"};
  static_assert(std::size(kKinds) == std::variant_size_v<Record>, "one name per record kind, in variant order");
  return Fault{Reason::kAuthFailed,
               std::string("handshake: expected ") + wanted + ", got '" + kKinds[r.index()] + "'"};
}

// The server said why it refused us; the channel names the peer.
Fault peer_refused_us(const Failure& f) { return Fault{f.reason, f.message, true}; }

}  // namespace

Result<Key> Key::parse(std::string_view text) {
  if (text.empty()) return key_error(text, "is empty");
  if (text.size() > 4 * kMaxKeyBytes) return key_error(text, "is too long");
  std::vector<uint8_t> out;
  if (text.size() % 2 == 0 && std::all_of(text.begin(), text.end(), is_hex)) {
    out.resize(text.size() / 2);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<uint8_t>(hex_value(text[2 * i]) << 4 | hex_value(text[2 * i + 1]));
  } else {
    // EVP_DecodeBlock reads '=' anywhere as a zero digit and skips blanks:
    // only the alphabet, then at most two '=' at the end, are accepted.
    size_t pad = 0;
    while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
    if (text.size() % 4 != 0 || !std::all_of(text.begin(), text.end() - pad, is_base64))
      return key_error(text, "is neither hex nor padded base64");
    out.resize(text.size() / 4 * 3);
    const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
    if (n < 0 || static_cast<size_t>(n) != out.size()) {
      secure_wipe(out.data(), out.size());
      return key_error(text, "is neither hex nor padded base64");
    }
    out.resize(out.size() - pad);
  }
  if (out.size() < kMinKeyBytes || out.size() > kMaxKeyBytes) {
    const size_t n = out.size();
    secure_wipe(out.data(), out.size());
    return key_error(text, "holds " + std::to_string(n) + " bytes");
  }
  return from_bytes(std::move(out));
}

Key Key::from_bytes(std::vector<uint8_t> bytes) {
  Key k;
  k.bytes_ = std::move(bytes);
  return k;
}

void Key::wipe() noexcept { secure_wipe(bytes_.data(), bytes_.size()); }

SessionKey::~SessionKey() { secure_wipe(bytes.data(), bytes.size()); }

Mac client_proof(const Key& key, const Nonce& nc, const Nonce& ns) {
  return transcript_mac(key, kClientLabel, nc, ns);
}

Mac server_proof(const Key& key, const Nonce& nc, const Nonce& ns) {
  return transcript_mac(key, kServerLabel, nc, ns);
}

SessionKey session_key(const Key& key, const Nonce& nc, const Nonce& ns) {
  SessionKey s;
  s.bytes = transcript_mac(key, kSessionLabel, nc, ns);
  return s;
}

std::string ClientHandshake::hello() const { return encode(Hello{nc_}); }

Outcome<std::string> ClientHandshake::on_challenge(std::string_view line) {
  if (challenged_) return Fault{Reason::kAuthFailed, "handshake: a second challenge"};
  auto r = expect_line(line, "challenge");
  if (!r.ok()) return r.fault();
  if (auto* f = std::get_if<Failure>(&*r)) return peer_refused_us(*f);
  auto* c = std::get_if<Challenge>(&*r);
  if (!c) return wrong_kind(*r, "challenge");
  ns_ = c->nonce;
  challenged_ = true;
  return encode(Proof{client_proof(key_, nc_, ns_)});
}

Outcome<SessionKey> ClientHandshake::on_proof(std::string_view line) {
  if (!challenged_) return Fault{Reason::kAuthFailed, "handshake: a proof before the challenge"};
  auto r = expect_line(line, "the server's auth");
  if (!r.ok()) return r.fault();
  if (auto* f = std::get_if<Failure>(&*r)) return peer_refused_us(*f);
  auto* p = std::get_if<Proof>(&*r);
  if (!p) return wrong_kind(*r, "the server's auth");
  Mac want = server_proof(key_, nc_, ns_);
  const bool ok = secure_equal(want.data(), p->mac.data(), want.size());
  secure_wipe(want.data(), want.size());
  if (!ok)
    return Fault{Reason::kAuthFailed, "handshake: the server's proof does not verify (it holds another key)"};
  challenged_ = false;  // one handshake per object
  return session_key(key_, nc_, ns_);
}

Outcome<std::string> ServerHandshake::on_hello(std::string_view line) {
  if (greeted_) return Fault{Reason::kAuthFailed, "handshake: a second hello"};
  auto r = expect_line(line, "hello");
  if (!r.ok()) return r.fault();
  auto* h = std::get_if<Hello>(&*r);
  if (!h) return wrong_kind(*r, "hello");
  nc_ = h->nonce;
  greeted_ = true;
  return encode(Challenge{ns_});
}

Outcome<std::string> ServerHandshake::on_proof(std::string_view line) {
  if (!greeted_) return Fault{Reason::kAuthFailed, "handshake: a proof before the hello"};
  greeted_ = false;  // one proof per challenge: a second try needs a new connection
  auto r = expect_line(line, "the client's auth");
  if (!r.ok()) return r.fault();
  auto* p = std::get_if<Proof>(&*r);
  if (!p) return wrong_kind(*r, "the client's auth");
  Mac want = client_proof(key_, nc_, ns_);
  const bool ok = secure_equal(want.data(), p->mac.data(), want.size());
  secure_wipe(want.data(), want.size());
  if (!ok) return Fault{Reason::kAuthFailed, "handshake: the client's proof does not verify (wrong probe key)"};
  session_ = session_key(key_, nc_, ns_);
  return encode(Proof{server_proof(key_, nc_, ns_)});
}

std::string seal(const SessionKey& s, Direction d, uint64_t seq, std::string_view record) {
  std::string data(1, static_cast<char>(d));
  for (int i = 7; i >= 0; --i) data += static_cast<char>((seq >> (8 * i)) & 0xff);
  data.append(record);
  const Mac m = hmac(s.bytes.data(), s.bytes.size(), data);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * m.size() + 1 + record.size());
  for (uint8_t b : m) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  out += ' ';
  out.append(record);
  return out;
}

Result<std::string_view> open(const SessionKey& s, Direction d, uint64_t seq, std::string_view line) {
  constexpr size_t kHexLen = 2 * sizeof(Mac);
  if (line.size() > kMaxLineBytes)
    return Error{"sealed record: " + std::to_string(line.size()) + " bytes, longer than the " +
                 std::to_string(kMaxLineBytes) + " accepted"};
  if (line.size() < kHexLen + 1 || line[kHexLen] != ' ')
    return Error{"sealed record: expected 64 hex digits of MAC, a space and a record"};
  const std::string_view record = line.substr(kHexLen + 1);
  // Recomputed and compared as text: the canonical spelling is lowercase,
  // so any other spelling fails like a wrong MAC.
  const std::string want = seal(s, d, seq, record);
  if (!secure_equal(want.data(), line.data(), kHexLen))
    return Error{"sealed record " + std::to_string(seq) +
                 " does not verify: altered, replayed, reordered, or not from the authenticated peer"};
  return record;
}

}  // namespace fa::rdma
