// SPDX-License-Identifier: Apache-2.0
// The probe's two ends. Order of a session, client side:
//   1. open dev:port, read the GID; register one buffer; RC QP to INIT
//   2. side channel: send our endpoint; the server registers a buffer of the
//      same size, takes its QP to RTR/RTS towards us and answers with its
//      endpoint (or with a classified failure, e.g. its RTR failed)
//   3. our QP to RTR/RTS; the server is already RTR, so we can write at once
//   4. bandwidth: RDMA WRITEs of `size` bytes, `window` outstanding, one in
//      a batch signaled, for `duration` seconds, then drained
//   5. "lat iters=N"; N write ping-pongs on an 8-byte slot at the end of
//      both buffers (each side spins on its slot, then writes back)
//   6. "done" both ways
// Buffer layout (both ends, same length): [0, size) bandwidth target,
// [len-64, len-56) the slot the peer writes into, [len-56, len-48) the value
// this end sends.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.hpp"
#include "probes/rdma/channel.hpp"
#include "probes/rdma/probe.hpp"
#include "probes/rdma/verbs.hpp"

namespace fa::rdma {
namespace {

constexpr uint64_t kSlotFromEnd = 64;
constexpr uint64_t kSendFromEnd = 56;

uint64_t buffer_len(uint64_t size) { return (size + 63) / 64 * 64 + 64; }

uint64_t load_slot(const Link& l) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(l.bytes() + l.len - kSlotFromEnd), __ATOMIC_ACQUIRE);
}

void store_send(const Link& l, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(l.bytes() + l.len - kSendFromEnd), v, __ATOMIC_RELEASE);
}

Fault wc_fault(const ibv_wc& wc, const std::string& phase) {
  return Fault{classify_wc_status(wc.status), phase + ": work completion " + ibv_wc_status_str(wc.status) +
                                                  " (status " + std::to_string(wc.status) + ", vendor_err " +
                                                  std::to_string(wc.vendor_err) + ")"};
}

// Reaps whatever is in the CQ; returns the highest signaled wr_id seen.
Check reap(const Link& l, uint64_t* last_wr, const std::string& phase, bool* any = nullptr) {
  ibv_wc wc[32];
  int n = ibv_poll_cq(l.cq.get(), 32, wc);
  if (n < 0) return Fault{Reason::kDeviceError, phase + ": ibv_poll_cq failed"};
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) return wc_fault(wc[i], phase);
    *last_wr = std::max<uint64_t>(*last_wr, wc[i].wr_id);
  }
  if (any) *any = n > 0;
  return std::nullopt;
}

Fault remote_failure(const Failure& f, const std::string& peer) {
  return Fault{f.reason, "peer " + peer + " reported: " + f.message, true};
}

Fault unexpected(const Record& r, const std::string& peer, const char* wanted) {
  return Fault{Reason::kProtocolError, "from " + peer + ": expected " + wanted + ", got '" + encode(r) + "'"};
}

// Between phases the other side may have sent a failure or hung up; a
// readable channel at a time we expect nothing is one of those.
Check check_side_channel(Channel& ch, const char* wanted) {
  if (!ch.readable()) return std::nullopt;
  auto r = ch.recv(after(1));
  if (!r.ok()) return r.fault();
  if (auto* f = std::get_if<Failure>(&*r)) return remote_failure(*f, ch.peer());
  return unexpected(*r, ch.peer(), wanted);
}

struct Measured {
  uint64_t bytes = 0;
  double seconds = 0;
  std::vector<double> latency_us;
};

class Client {
 public:
  Client(const ProbeOptions& o, Link& link, Channel& ch, const Endpoint& remote)
      : o_(o), link_(link), ch_(ch), remote_(remote) {}

  Check bandwidth(Measured& m) {
    const uint32_t batch = std::max<uint32_t>(1, std::min<uint32_t>(o_.window / 4, 32));
    const auto stall = std::chrono::duration<double>(o_.stall_timeout_s);
    uint64_t posted = 0, completed = 0;
    bool stopping = false, need_final = false;
    const auto start = Clock::now();
    const auto end_at = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.duration_s));
    auto last_progress = start, last_check = start, last_completion = start;
    while (true) {
      auto now = Clock::now();
      if (!stopping && now >= end_at) {
        stopping = true;
        // Completions only report signaled WRs; make sure the last one is.
        need_final = posted % batch != 0;
      }
      while (posted - completed < o_.window && (!stopping || need_final)) {
        const bool final_post = stopping;
        const bool sig = final_post || (posted + 1) % batch == 0;
        if (auto f = post_write(link_, remote_, 0, 0, static_cast<uint32_t>(o_.size), posted + 1, sig)) return f;
        ++posted;
        if (final_post) need_final = false;
      }
      if (stopping && !need_final && completed == posted) break;
      bool any = false;
      uint64_t last = completed;
      if (auto f = reap(link_, &last, "bandwidth (RDMA WRITE)", &any)) return f;
      if (any) {
        completed = last;
        last_progress = last_completion = Clock::now();
        continue;
      }
      if (now - last_progress > stall)
        return Fault{Reason::kTimeout, "bandwidth: no completion for " + std::to_string(o_.stall_timeout_s) +
                                           " s (" + std::to_string(posted - completed) + " WRITEs outstanding)"};
      if (now - last_check > std::chrono::milliseconds(50)) {
        last_check = now;
        if (auto f = check_side_channel(ch_, "nothing during the bandwidth phase")) return f;
      }
    }
    m.bytes = completed * o_.size;
    m.seconds = std::chrono::duration<double>(last_completion - start).count();
    return std::nullopt;
  }

  Check latency(Measured& m) {
    if (auto f = ch_.send(LatencyStart{o_.latency_iters}, after(o_.stall_timeout_s))) return f;
    const uint64_t roff = remote_.len - kSlotFromEnd;
    const uint64_t soff = link_.len - kSendFromEnd;
    const auto stall = std::chrono::duration<double>(o_.stall_timeout_s);
    m.latency_us.reserve(o_.latency_iters);
    uint64_t completed = 0;
    for (uint64_t i = 1; i <= o_.latency_iters; ++i) {
      // Keep the send queue from filling with reaped-late ping completions.
      while (i - 1 - completed >= o_.window) {
        if (auto f = reap(link_, &completed, "latency (ping)")) return f;
      }
      store_send(link_, i);
      const auto t0 = Clock::now();
      if (auto f = post_write(link_, remote_, soff, roff, 8, i, true)) return f;
      uint64_t spins = 0;
      while (load_slot(link_) != i) {
        if (++spins % 64 != 0) continue;
        if (auto f = reap(link_, &completed, "latency (ping)")) return f;
        auto now = Clock::now();
        if (now - t0 > stall)
          return Fault{Reason::kTimeout, "latency: no answer to ping " + std::to_string(i) + " within " +
                                             std::to_string(o_.stall_timeout_s) + " s"};
        if (spins % 65536 == 0)
          if (auto f = check_side_channel(ch_, "nothing during the latency phase")) return f;
      }
      const auto t1 = Clock::now();
      m.latency_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
    }
    // Drain the last ping completions so the QP is quiescent before teardown.
    const auto drain_until = after(o_.stall_timeout_s);
    while (completed < o_.latency_iters) {
      if (auto f = reap(link_, &completed, "latency (ping)")) return f;
      if (Clock::now() > drain_until) return Fault{Reason::kTimeout, "latency: ping completions did not arrive"};
    }
    return std::nullopt;
  }

 private:
  const ProbeOptions& o_;
  Link& link_;
  Channel& ch_;
  const Endpoint& remote_;
};

Check validate(const ProbeOptions& o) {
  if (o.hca.device.empty()) return Fault{Reason::kDeviceError, "--hca is required (DEV:PORT, e.g. mlx5_0:1)"};
  if (o.gid_index < 0 || o.gid_index > 255)
    return Fault{Reason::kDeviceError, "--gid-index is required (0..255, the NCCL_IB_GID_INDEX of the fabric port)"};
  if (o.peer.host.empty()) return Fault{Reason::kDeviceError, "--peer is required"};
  if (o.size == 0 || o.size > (64ull << 20)) return Fault{Reason::kDeviceError, "size must be 1..64 MiB"};
  if (o.window == 0 || o.window > 4096) return Fault{Reason::kDeviceError, "window must be 1..4096"};
  if (o.latency_iters == 0 || o.latency_iters > kMaxLatencyIters)
    return Fault{Reason::kDeviceError, "latency iterations must be 1.." + std::to_string(kMaxLatencyIters)};
  if (!(o.duration_s > 0) || !(o.stall_timeout_s > 0) || !(o.connect_timeout_s > 0))
    return Fault{Reason::kDeviceError, "duration and timeouts must be positive"};
  if (!(o.min_fraction >= 0 && o.min_fraction <= 1)) return Fault{Reason::kDeviceError, "min fraction must be 0..1"};
  return std::nullopt;
}

Check session(const ProbeOptions& o, Port& port, Link& link, Channel& ch, Measured& m);

Check run_client(const ProbeOptions& o, ProbeResult& res, Measured& m) {
  auto port = open_port(o.hca, o.gid_index);
  if (!port.ok()) return port.fault();
  res.gid = gid_text(port->gid);
  res.port_rate_gbps = port->rate_gbps;
  auto link = make_link(*port, buffer_len(o.size), o.window);
  if (!link.ok()) return link.fault();
  auto ch = Channel::connect(o.peer.host, o.peer.port, after(o.connect_timeout_s));
  if (!ch.ok()) return ch.fault();
  res.peer = ch->peer();
  // Leaving this scope releases QP, CQ, MR, buffer, PD and context in that
  // order, on success and on every failure inside session().
  Check f = session(o, *port, *link, *ch, m);
  // Best effort: tell the server why, so its log names the same reason
  // (a dead channel makes this a no-op).
  if (f && !f->from_peer) (void)ch->send(Failure{f->reason, "client: " + f->message}, after(0.5));
  return f;
}

Check session(const ProbeOptions& o, Port& port, Link& link, Channel& ch, Measured& m) {
  if (auto f = ch.send(local_endpoint(port, link), after(o.stall_timeout_s))) return f;
  auto reply = ch.recv(after(o.stall_timeout_s));
  if (!reply.ok()) return reply.fault();
  if (auto* f = std::get_if<Failure>(&*reply)) return remote_failure(*f, ch.peer());
  auto* remote = std::get_if<Endpoint>(&*reply);
  if (!remote) return unexpected(*reply, ch.peer(), "the server's endpoint");
  if (remote->len != link.len)
    return Fault{Reason::kProtocolError, "server registered " + std::to_string(remote->len) + " bytes, asked for " +
                                             std::to_string(link.len)};
  if (auto f = connect_link(port, link, *remote)) return f;
  Client c(o, link, ch, *remote);
  if (auto f = c.bandwidth(m)) return f;
  if (auto f = c.latency(m)) return f;
  if (auto f = ch.send(Done{}, after(o.stall_timeout_s))) return f;
  auto bye = ch.recv(after(o.stall_timeout_s));
  if (!bye.ok()) return bye.fault();
  if (auto* f = std::get_if<Failure>(&*bye)) return remote_failure(*f, ch.peer());
  if (!std::holds_alternative<Done>(*bye)) return unexpected(*bye, ch.peer(), "done");
  return std::nullopt;
}

}  // namespace

Result<ProbeResult> run_probe(const ProbeOptions& o) {
  if (auto f = validate(o)) return Error{f->message};
  ProbeResult res;
  res.hca = o.hca.device;
  res.port = o.hca.port;
  res.gid_index = o.gid_index;
  res.peer = o.peer.host + ":" + std::to_string(o.peer.port);
  res.size = o.size;
  res.latency_iters = o.latency_iters;
  Measured m;
  auto log = fa::logger("rdma");
  if (auto f = run_client(o, res, m)) {
    res.status = ProbeStatus::kFailed;
    res.reason = f->reason;
    res.message = f->message;
    log->warn("probe {}:{} -> {}: {} ({})", o.hca.device, o.hca.port, res.peer, reason_name(f->reason), f->message);
    return res;
  }
  res.bytes = m.bytes;
  res.seconds = m.seconds;
  res.gbps = gbps(m.bytes, m.seconds);
  auto lat = summarize(m.latency_us);
  if (!lat) {
    res.status = ProbeStatus::kFailed;
    res.reason = Reason::kProtocolError;
    res.message = lat.error().message;
    return res;
  }
  res.latency_us = *lat;
  res.status = ProbeStatus::kOk;
  if (res.port_rate_gbps > 0 && res.gbps < o.min_fraction * res.port_rate_gbps) {
    res.status = ProbeStatus::kDegraded;
    res.reason = Reason::kBelowRate;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.3f Gb/s is under %.2f of the port rate %.1f Gb/s", res.gbps, o.min_fraction,
                  res.port_rate_gbps);
    res.message = buf;
  }
  log->info("probe {}:{} gid {} -> {}: {} {:.3f} Gb/s p50 {:.1f} us", o.hca.device, o.hca.port, o.gid_index,
            res.peer, status_name(res.status), res.gbps, res.latency_us->p50);
  return res;
}

// ---------------------------------------------------------------- server

struct Server::Impl {
  ServeOptions opts;
  Port port;  // opened at start to fail fast on a bad --hca/--gid-index
  Fd listen;
  Fd stop_efd;  // readable once stop() was called: aborts every wait
  std::atomic<bool> stopping{false};
};

namespace {

// The server's half of one session, on an accepted side channel.
Check serve_session(Server::Impl& s, Channel& ch) {
  const double io = s.opts.io_timeout_s;
  auto hello = ch.recv(after(io));
  if (!hello.ok()) return hello.fault();
  if (auto* f = std::get_if<Failure>(&*hello)) return remote_failure(*f, ch.peer());
  auto* client_ep = std::get_if<Endpoint>(&*hello);
  if (!client_ep) return unexpected(*hello, ch.peer(), "the client's endpoint");
  const Endpoint remote = *client_ep;
  if (remote.len < 128 || remote.len % 64 != 0)
    return Fault{Reason::kProtocolError, "client buffer length " + std::to_string(remote.len) +
                                             " is not a multiple of 64 of at least 128"};
  // The port is re-read per session: its state, MTU or GID table may have
  // changed since the last one (link flap, address change).
  auto port = open_port(s.opts.hca, s.opts.gid_index);
  if (!port.ok()) return port.fault();
  auto link = make_link(*port, remote.len, 64);
  if (!link.ok()) return link.fault();
  // Straight to RTS: the client writes as soon as it has our endpoint.
  if (auto f = connect_link(*port, *link, remote)) return f;
  if (auto f = ch.send(local_endpoint(*port, *link), after(io))) return f;

  // The bandwidth phase is the client's alone; we wait for its next record
  // for as long as a probe may last, but a dead client closes the channel.
  auto next = ch.recv(after(3600 + 2 * io));
  if (!next.ok()) return next.fault();
  if (auto* f = std::get_if<Failure>(&*next)) return remote_failure(*f, ch.peer());
  auto* lat = std::get_if<LatencyStart>(&*next);
  if (!lat) return unexpected(*next, ch.peer(), "lat");

  const uint64_t roff = remote.len - kSlotFromEnd;
  const uint64_t soff = link->len - kSendFromEnd;
  const auto stall = std::chrono::duration<double>(io);
  uint64_t completed = 0;
  for (uint64_t i = 1; i <= lat->iters; ++i) {
    const auto t0 = Clock::now();
    uint64_t spins = 0;
    while (load_slot(*link) != i) {
      if (++spins % 64 != 0) continue;
      if (auto f = reap(*link, &completed, "latency (pong)")) return f;
      if (spins % 4096 == 0) {
        if (s.stopping.load()) return Fault{Reason::kPeerClosed, "the probe server is stopping"};
        if (auto f = check_side_channel(ch, "pings")) return f;
        if (Clock::now() - t0 > stall)
          return Fault{Reason::kTimeout, "latency: ping " + std::to_string(i) + " did not arrive within " +
                                             std::to_string(io) + " s"};
      }
    }
    while (i - 1 - completed >= 32)
      if (auto f = reap(*link, &completed, "latency (pong)")) return f;
    store_send(*link, i);
    if (auto f = post_write(*link, remote, soff, roff, 8, i, true)) return f;
  }
  auto done = ch.recv(after(io));
  if (!done.ok()) return done.fault();
  if (auto* f = std::get_if<Failure>(&*done)) return remote_failure(*f, ch.peer());
  if (!std::holds_alternative<Done>(*done)) return unexpected(*done, ch.peer(), "done");
  const auto drain_until = after(io);
  while (completed < lat->iters) {
    if (auto f = reap(*link, &completed, "latency (pong)")) return f;
    if (Clock::now() > drain_until) return Fault{Reason::kTimeout, "latency: pong completions did not arrive"};
  }
  return ch.send(Done{}, after(io));
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Server>> Server::start(const ServeOptions& opts) {
  if (opts.hca.device.empty()) return Error{"--hca is required (DEV:PORT, e.g. mlx5_0:1)"};
  if (opts.gid_index < 0 || opts.gid_index > 255)
    return Error{"--gid-index is required (0..255, the NCCL_IB_GID_INDEX of the fabric port)"};
  if (!(opts.io_timeout_s > 0)) return Error{"io timeout must be positive"};
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  auto port = open_port(opts.hca, opts.gid_index);
  if (!port.ok()) {
    auto f = port.fault();
    return Error{std::string(reason_name(f.reason)) + ": " + f.message};
  }
  impl->port = std::move(*port);
  uint16_t bound = 0;
  auto lfd = listen_tcp(opts.bind, opts.port, &bound);
  if (!lfd) return lfd.take_error();
  impl->listen = std::move(*lfd);
  impl->stop_efd = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop_efd.valid()) return Error::from_errno("eventfd");
  std::unique_ptr<Server> s(new Server(std::move(impl)));
  s->port_ = bound;
  s->thread_ = std::thread([srv = s.get()] { srv->loop(); });
  fa::logger("rdma")->info("probe server on {}:{} ({}:{}, GID index {} = {})", opts.bind, bound, opts.hca.device,
                           opts.hca.port, opts.gid_index, gid_text(s->impl_->port.gid));
  return s;
}

Server::~Server() { stop(); }

void Server::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) {
    if (thread_.joinable()) thread_.join();
    return;
  }
  uint64_t one = 1;
  (void)!::write(impl_->stop_efd.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

Server::Stats Server::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void Server::loop() {
  auto log = fa::logger("rdma");
  while (!impl_->stopping.load()) {
    pollfd p[2] = {{impl_->listen.get(), POLLIN, 0}, {impl_->stop_efd.get(), POLLIN, 0}};
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
    Fd fd(::accept4(impl_->listen.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC));
    if (!fd.valid()) continue;  // the client gave up between poll and accept
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char host[INET6_ADDRSTRLEN] = "?";
    uint16_t cport = 0;
    if (ss.ss_family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
      cport = ntohs(in->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
      inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
      cport = ntohs(in6->sin6_port);
    }
    const std::string peer = std::string(host) + ":" + std::to_string(cport);
    Channel ch(std::move(fd), peer, impl_->stop_efd.get());
    log->info("probe session from {}", peer);
    Check f = serve_session(*impl_, ch);
    if (f) {
      // Tell the client why (it may already be gone; then this is a no-op),
      // unless it was the client that told us.
      if (!f->from_peer) (void)ch.send(Failure{f->reason, f->message}, after(1));
      log->warn("probe session from {}: {} ({})", peer, reason_name(f->reason), f->message);
    } else {
      log->info("probe session from {}: done", peer);
    }
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.sessions;
    if (f) ++stats_.failed;
    stats_.last_peer = peer;
    stats_.last_reason = f ? std::string(reason_name(f->reason)) : "none";
    stats_.last_message = f ? f->message : "";
  }
}

}  // namespace fa::rdma
