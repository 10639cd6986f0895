// SPDX-License-Identifier: Apache-2.0
// Side-channel records of the RDMA link probe. Before any RDMA traffic the
// two ends exchange, over TCP, what the other side needs to address them:
// QP number, starting PSN, LID, GID, rkey and the address/length of the
// registered buffer (as perftest does). Then a few control records pace the
// phases. Before any of that, the two ends prove to each other that they hold
// the probe key (auth.hpp); the records of that handshake are here too.
//
// One record is one line of printable ASCII, `fa-rdma/2 <kind> key=value...`,
// with fixed key order and fixed-width lowercase hex: every record has exactly
// one spelling, and decode() accepts only that spelling (encode(decode(x)) ==
// x). Anything else is rejected with the field, the value and what is
// accepted: a peer speaking another version or a stray client must not be
// able to make us register or address memory it made up.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "common/result.hpp"
#include "probes/rdma/classify.hpp"

namespace fa::rdma {

inline constexpr std::string_view kWireMagic = "fa-rdma/2";
// Longest record either side accepts (the failure message is bounded below
// it); a sealed line adds its MAC in front (auth.hpp, kMaxLineBytes).
inline constexpr size_t kMaxRecordBytes = 512;
inline constexpr size_t kMaxFailureMessage = 300;
// Largest buffer a peer may ask the other side to register (64 MiB message
// plus the latency slot): bounds what a remote request can pin.
inline constexpr uint64_t kMaxBufferBytes = (64ull << 20) + 4096;
inline constexpr uint32_t kMaxLatencyIters = 1000000;
// Bandwidth phase a client may announce: 0.1 s .. 1 h, in milliseconds.
inline constexpr uint32_t kMinDurationMs = 100;
inline constexpr uint32_t kMaxDurationMs = 3600 * 1000;

using Gid = std::array<uint8_t, 16>;
using Nonce = std::array<uint8_t, 32>;
using Mac = std::array<uint8_t, 32>;  // HMAC-SHA256

// Client -> server, first record: a fresh random nonce.
struct Hello {
  Nonce nonce{};
  bool operator==(const Hello&) const = default;
};

// Server -> client: the server's fresh random nonce.
struct Challenge {
  Nonce nonce{};
  bool operator==(const Challenge&) const = default;
};

// Either side: proof of the key over both nonces (client first).
struct Proof {
  Mac mac{};
  bool operator==(const Proof&) const = default;
};

// Client -> server, first sealed record: how long the session will take,
// which bounds its lifetime on the server.
struct Plan {
  uint32_t duration_ms = 0;    // kMinDurationMs..kMaxDurationMs
  uint32_t latency_iters = 0;  // 1..kMaxLatencyIters
  bool operator==(const Plan&) const = default;
};

// Where and how to reach one end's QP and buffer.
struct Endpoint {
  uint16_t lid = 0;    // 0 on RoCE
  uint32_t qpn = 0;    // 24 bits
  uint32_t psn = 0;    // 24 bits
  uint32_t mtu = 0;    // active MTU of the port in bytes: 256, 512, 1024, 2048 or 4096
  Gid gid{};
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint64_t len = 0;    // 1..kMaxBufferBytes; addr+len must not wrap
  bool operator==(const Endpoint&) const = default;
};

// Client -> server: the bandwidth phase is over, `iters` ping-pongs follow.
struct LatencyStart {
  uint32_t iters = 0;  // 1..kMaxLatencyIters
  bool operator==(const LatencyStart&) const = default;
};

// Either side: this end is done (client: after the last pong; server: reply).
struct Done {
  bool operator==(const Done&) const = default;
};

// Either side: this end failed; the other end reports the reason as its own.
struct Failure {
  Reason reason = Reason::kRemoteError;
  std::string message;  // printable ASCII, at most kMaxFailureMessage bytes
  bool operator==(const Failure&) const = default;
};

using Record = std::variant<Endpoint, LatencyStart, Done, Failure, Hello, Challenge, Proof, Plan>;

// One line without the trailing '\n'. Failure messages are sanitised
// (non-printable bytes become '?', cut to kMaxFailureMessage) so every
// encoded record decodes.
std::string encode(const Record& r);

// `line` is one record without its '\n'.
Result<Record> decode(std::string_view line);

// GID as 32 lowercase hex digits (the wire form) and as the usual
// colon-separated IPv6 text (for results and logs).
std::string gid_hex(const Gid& g);
std::string gid_text(const Gid& g);

}  // namespace fa::rdma
