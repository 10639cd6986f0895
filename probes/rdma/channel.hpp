// SPDX-License-Identifier: Apache-2.0
// The TCP side channel: connect with a deadline, line-framed records with a
// deadline per record, an optional cancel fd (the server's stop signal) that
// aborts any wait, and a lifetime no wait goes past. After the handshake
// (auth.hpp) every record is sealed. Every failure is classified where it
// happens.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/fd.hpp"
#include "common/result.hpp"
#include "probes/rdma/auth.hpp"
#include "probes/rdma/fault.hpp"
#include "probes/rdma/wire.hpp"

namespace fa::rdma {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

class Channel {
 public:
  Channel() = default;
  Channel(Fd fd, std::string peer, int cancel_fd = -1);

  // Resolves host (getaddrinfo) and connects to the first address that
  // answers. ECONNREFUSED -> peer_refused, unreachable -> no_route,
  // no answer before the deadline -> timeout.
  static Outcome<Channel> connect(const std::string& host, uint16_t port, Deadline deadline);

  // One line as it goes on the wire (without its '\n'): the handshake's.
  Check send_line(const std::string& line, Deadline deadline);
  // The next line. A line longer than kMaxLineBytes is a protocol_error
  // once that many bytes are buffered: nothing grows past the bound.
  Outcome<std::string> recv_line(Deadline deadline);

  // A record, sealed once seal() was called.
  Check send(const Record& r, Deadline deadline);
  // The next record. EOF -> peer_closed; malformed -> protocol_error; a
  // sealed record that does not verify -> auth_failed. A Failure record is
  // returned as a record: the caller decides whose failure it is.
  Outcome<Record> recv(Deadline deadline);
  // Non-blocking: true when a record (or EOF) is waiting to be read.
  bool readable();

  // From now on records are sealed with `key`, in the direction of this end.
  void seal(const SessionKey& key, bool client);
  // No wait goes past `end`: the session's lifetime (or its handshake's).
  void limit(Deadline end) { end_ = end; }
  Deadline end() const { return end_; }
  // The cancel fd fired (the server is stopping).
  bool cancelled() const;

  const std::string& peer() const { return peer_; }

 private:
  Fd fd_;
  std::string peer_;
  int cancel_fd_ = -1;
  std::string in_;  // bytes read past the last line
  Deadline end_ = Deadline::max();
  struct Sealing {
    SessionKey key;
    Direction out, in;
    uint64_t sent = 0, received = 0;
  };
  std::optional<Sealing> sealing_;
};

// The two ends of the handshake over a connected channel; on success the
// channel is sealed. Each line must come before `deadline`. A fault other
// than a timeout or a closed channel is auth_failed; the server tells the
// client why before it hangs up.
Check authenticate_client(Channel& ch, const Key& key, Deadline deadline);
Check authenticate_server(Channel& ch, const Key& key, Deadline deadline);

// Listening socket for the server, SO_REUSEADDR, close-on-exec.
Result<Fd> listen_tcp(const std::string& bind_addr, uint16_t port, uint16_t* bound_port);

}  // namespace fa::rdma
