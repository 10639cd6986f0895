// SPDX-License-Identifier: Apache-2.0
// The TCP side channel: connect with a deadline, line-framed records with a
// deadline per record, and an optional cancel fd (the server's stop signal)
// that aborts any wait. Every failure is classified where it happens.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/fd.hpp"
#include "common/result.hpp"
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

  Check send(const Record& r, Deadline deadline);
  // The next record. EOF -> peer_closed; malformed -> protocol_error. A
  // Failure record is returned as a record: the caller decides whose
  // failure it is.
  Outcome<Record> recv(Deadline deadline);
  // Non-blocking: true when a record (or EOF) is waiting to be read.
  bool readable();

  const std::string& peer() const { return peer_; }

 private:
  Fd fd_;
  std::string peer_;
  int cancel_fd_ = -1;
  std::string in_;  // bytes read past the last record
};

// Listening socket for the server, SO_REUSEADDR, close-on-exec.
Result<Fd> listen_tcp(const std::string& bind_addr, uint16_t port, uint16_t* bound_port);

}  // namespace fa::rdma
