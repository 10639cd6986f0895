// SPDX-License-Identifier: Apache-2.0
// The probe server's side-channel listener, without the verbs: it takes one
// connection at a time, authenticates it within a deadline, reads the
// client's plan and only then hands the sealed channel to the session (the
// part that registers memory), under a lifetime derived from that plan. A
// peer that does not authenticate or stalls is dropped and the next one is
// served. Server (probe.hpp) is this plus the RDMA session.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/fd.hpp"
#include "common/result.hpp"
#include "probes/rdma/auth.hpp"
#include "probes/rdma/channel.hpp"

namespace fa::rdma {

struct ListenOptions {
  std::string bind;                  // an IPv4 or IPv6 address
  uint16_t port = 18520;             // 0: any free port (see Listener::port())
  Key key;                           // required
  double handshake_timeout_s = 5.0;  // from accept to the client's proof verified
  double io_timeout_s = 10.0;        // idle: per record (the plan, and in the session)
  double lifetime_margin_s = 30.0;   // a session ends by plan duration + 1 ms per round trip + this
};

struct ServeStats {
  uint64_t sessions = 0;       // connections taken and ended
  uint64_t failed = 0;         // of those, ended with a failure (rejected ones included)
  uint64_t rejected = 0;       // of those, ended before authenticating
  uint64_t authenticated = 0;  // connections that passed the handshake
  uint64_t registered_bytes = 0;  // memory registered by the session running now (0 when none)
  std::string last_peer;
  std::string last_reason;  // reason name of the last session ("none" when ok)
  std::string last_message;
};

// The session after authentication: a sealed channel whose waits end at the
// session's lifetime, and what the client announced.
using SessionFn = std::function<Check(Channel& ch, const Plan& plan)>;

// The lifetime of a session that announced `plan`.
double session_lifetime_s(const Plan& plan, double margin_s);

class Listener {
 public:
  // Binds before returning, so a busy port or a bad address is reported here.
  static Result<std::unique_ptr<Listener>> start(ListenOptions opts, SessionFn session);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  uint16_t port() const { return port_; }
  const std::string& address() const { return opts_.bind; }
  // Stops accepting, aborts a running session, joins the thread. Idempotent.
  void stop();
  ServeStats stats() const;

 private:
  Listener(ListenOptions opts, SessionFn session) : opts_(std::move(opts)), session_(std::move(session)) {}
  void loop();
  Check handle(Channel& ch);

  ListenOptions opts_;
  SessionFn session_;
  Fd listen_;
  Fd stop_efd_;  // readable once stop() was called: aborts every wait
  std::atomic<bool> stopping_{false};
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  ServeStats stats_;
  std::thread thread_;
};

}  // namespace fa::rdma
