// SPDX-License-Identifier: Apache-2.0
// Authentication of the probe's side channel. The server registers memory
// with remote write access and sends its rkey; only a peer the control plane
// sent may get that far. The control plane gives both agents the same random
// key with the probe request, and before either end registers memory or says
// where its QP and buffer are, each proves to the other that it holds it:
//
//   client -> server  hello nonce=Nc         32 fresh random bytes
//   server -> client  challenge nonce=Ns     32 fresh random bytes
//   client -> server  auth mac=HMAC-SHA256(K, "fa-rdma/2 client" | Nc | Ns)
//   server -> client  auth mac=HMAC-SHA256(K, "fa-rdma/2 server" | Nc | Ns)
//                     (or `err reason=auth_failed`, and the server hangs up)
//
// The server computes nothing with the key before the client has proven it
// holds it, so a peer without the key learns nothing it could use. Each proof
// covers the other end's fresh nonce, so a proof recorded in one session does
// not verify in another; the labels differ, so one end's proof never passes
// as the other's. Every later record is sealed: the hex HMAC-SHA256 of
// (direction, sequence number, record) under the session key
// S = HMAC-SHA256(K, "fa-rdma/2 session" | Nc | Ns) goes in front of it, so a
// party that did not take part in the handshake can neither inject nor alter
// an endpoint (QPN, rkey, address), nor replay or reorder records.
//
// Everything here is a pure function of its inputs (the nonces are passed
// in), so the handshake is tested on bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "probes/rdma/fault.hpp"
#include "probes/rdma/wire.hpp"

namespace fa::rdma {

inline constexpr size_t kMinKeyBytes = 32;
inline constexpr size_t kMaxKeyBytes = 512;
// A sealed line: 64 hex digits of MAC, a space, the record.
inline constexpr size_t kMaxLineBytes = 2 * sizeof(Mac) + 1 + kMaxRecordBytes;

// The probe key. Its bytes are wiped when it goes; nothing prints it.
class Key {
 public:
  Key() = default;
  Key(const Key& o) : bytes_(o.bytes_) {}
  Key(Key&& o) noexcept : bytes_(std::move(o.bytes_)) { o.bytes_.clear(); }
  Key& operator=(Key o) noexcept {
    wipe();
    bytes_.swap(o.bytes_);
    return *this;
  }
  ~Key() { wipe(); }

  // Hex (an even number of digits) or base64 (RFC 4648, padded) of
  // kMinKeyBytes..kMaxKeyBytes bytes, e.g. `openssl rand -hex 32`. The error
  // describes the text (its length, what is accepted), never its content.
  static Result<Key> parse(std::string_view text);
  static Key from_bytes(std::vector<uint8_t> bytes);

  bool empty() const { return bytes_.empty(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  void wipe() noexcept;
  std::vector<uint8_t> bytes_;
};

// The key the records after the handshake are sealed with. Wiped when it goes.
struct SessionKey {
  Mac bytes{};
  SessionKey() = default;
  SessionKey(const SessionKey&) = default;
  SessionKey& operator=(const SessionKey&) = default;
  ~SessionKey();
};

// The client's half. Construct with a fresh nonce, send hello(), feed it the
// server's lines in order.
class ClientHandshake {
 public:
  ClientHandshake(const Key& key, const Nonce& nc) : key_(key), nc_(nc) {}
  std::string hello() const;
  // The server's challenge -> the client's proof (a line to send).
  Outcome<std::string> on_challenge(std::string_view line);
  // The server's proof -> the session key. A server that refused us sends
  // `err` instead: its reason (auth_failed) comes back as a peer fault.
  Outcome<SessionKey> on_proof(std::string_view line);

 private:
  const Key& key_;
  Nonce nc_;
  Nonce ns_{};
  bool challenged_ = false;
};

// The server's half. Construct with a fresh nonce per connection.
class ServerHandshake {
 public:
  ServerHandshake(const Key& key, const Nonce& ns) : key_(key), ns_(ns) {}
  // The client's hello -> the challenge (a line to send).
  Outcome<std::string> on_hello(std::string_view line);
  // The client's proof -> the server's proof (a line to send); session()
  // is valid from then on.
  Outcome<std::string> on_proof(std::string_view line);
  const SessionKey& session() const { return session_; }

 private:
  const Key& key_;
  Nonce ns_;
  Nonce nc_{};
  bool greeted_ = false;
  SessionKey session_;
};

// The proofs and the session key of one handshake.
Mac client_proof(const Key& key, const Nonce& nc, const Nonce& ns);
Mac server_proof(const Key& key, const Nonce& nc, const Nonce& ns);
SessionKey session_key(const Key& key, const Nonce& nc, const Nonce& ns);

enum class Direction : uint8_t { kToServer = 1, kToClient = 2 };

// `<64 hex MAC> <record>`, the MAC over (direction, seq, record).
std::string seal(const SessionKey& s, Direction d, uint64_t seq, std::string_view record);
// The record in a sealed line, when its MAC verifies for this direction and
// sequence number (compared in constant time).
Result<std::string_view> open(const SessionKey& s, Direction d, uint64_t seq, std::string_view line);

}  // namespace fa::rdma
