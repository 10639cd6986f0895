// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.hpp"

namespace fa::rdma {
namespace {

std::string peer_text(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

double session_lifetime_s(const Plan& plan, double margin_s) {
  // 1 ms per round trip is ten times what emulated RDMA (soft-RoCE under
  // TCG) takes; hardware takes a few microseconds.
  return plan.duration_ms / 1000.0 + plan.latency_iters / 1000.0 + margin_s;
}

Result<std::unique_ptr<Listener>> Listener::start(ListenOptions opts, SessionFn session) {
  if (opts.key.empty()) return Error{"the probe key is required"};
  if (!(opts.handshake_timeout_s > 0) || !(opts.io_timeout_s > 0) || !(opts.lifetime_margin_s > 0))
    return Error{"handshake, io and lifetime timeouts must be positive"};
  std::unique_ptr<Listener> l(new Listener(std::move(opts), std::move(session)));
  auto lfd = listen_tcp(l->opts_.bind, l->opts_.port, &l->port_);
  if (!lfd) return lfd.take_error();
  l->listen_ = std::move(*lfd);
  l->stop_efd_ = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!l->stop_efd_.valid()) return Error::from_errno("eventfd");
  l->thread_ = std::thread([self = l.get()] { self->loop(); });
  return l;
}

Listener::~Listener() { stop(); }

void Listener::stop() {
  if (!stopping_.exchange(true)) {
    uint64_t one = 1;
    (void)!::write(stop_efd_.get(), &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
}

ServeStats Listener::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

// One connection: nothing but the handshake records is read or sent until
// the client has proven it holds the key, and the session (which registers
// memory) starts only after that and the client's plan.
Check Listener::handle(Channel& ch) {
  ch.limit(after(opts_.handshake_timeout_s));
  if (auto f = authenticate_server(ch, opts_.key, ch.end())) return f;
  {
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.authenticated;
  }
  ch.limit(Deadline::max());
  auto first = ch.recv(after(opts_.io_timeout_s));
  if (!first.ok()) return first.fault();
  if (auto* f = std::get_if<Failure>(&*first)) return Fault{f->reason, "peer " + ch.peer() + " reported: " + f->message, true};
  auto* plan = std::get_if<Plan>(&*first);
  if (!plan) return Fault{Reason::kProtocolError, "from " + ch.peer() + ": expected plan, got '" + encode(*first) + "'"};
  ch.limit(after(session_lifetime_s(*plan, opts_.lifetime_margin_s)));
  return session_(ch, *plan);
}

void Listener::loop() {
  auto log = fa::logger("rdma");
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_.get(), POLLIN, 0}, {stop_efd_.get(), POLLIN, 0}};
    int n = ::poll(p, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log->error("probe server: poll: {}", std::strerror(errno));
      return;
    }
    if (p[1].revents & POLLIN) return;
    if (!(p[0].revents & POLLIN)) continue;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    Fd fd(::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC));
    if (!fd.valid()) continue;  // the client gave up between poll and accept
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const std::string peer = peer_text(ss);
    Channel ch(std::move(fd), peer, stop_efd_.get());
    log->info("probe session from {}", peer);
    const uint64_t authenticated_before = stats().authenticated;
    Check f = handle(ch);
    if (f) {
      // Tell the client why (it may already be gone; then this is a no-op),
      // unless it was the client that told us. Sealed once authenticated.
      ch.limit(Deadline::max());
      if (!f->from_peer) (void)ch.send(Failure{f->reason, f->message}, after(1));
      log->warn("probe session from {}: {} ({})", peer, reason_name(f->reason), f->message);
    } else {
      log->info("probe session from {}: done", peer);
    }
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.sessions;
    if (f) ++stats_.failed;
    if (f && stats_.authenticated == authenticated_before) ++stats_.rejected;
    stats_.last_peer = peer;
    stats_.last_reason = f ? std::string(reason_name(f->reason)) : "none";
    stats_.last_message = f ? f->message : "";
  }
}

}  // namespace fa::rdma
