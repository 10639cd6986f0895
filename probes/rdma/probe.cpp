// SPDX-License-Identifier: Apache-2.0
// The probe's two ends. Order of a session, client side:
//   1. open dev:port, read the GID
//   2. side channel: authenticate both ways (auth.hpp); every record from
//      here on is sealed; send our plan (duration, round trips)
//   3. register one buffer, RC QP to INIT; send our endpoint; the server
//      registers a buffer of the same size, takes its QP to RTR/RTS towards
//      us and answers with its endpoint (or with a classified failure, e.g.
//      its RTR failed)
//   4. our QP to RTR/RTS; the server is already RTR, so we can write at once
//   5. bandwidth: RDMA WRITEs of `size` bytes, `window` outstanding, one in
//      a batch signaled, for `duration` seconds, then drained
//   6. "lat iters=N"; N write ping-pongs on an 8-byte slot at the end of
//      both buffers (each side spins on its slot, then writes back)
//   7. "done" both ways
// Buffer layout (both ends, same length): [0, size) bandwidth target,
// [len-64, len-56) the slot the peer writes into, [len-56, len-48) the value
// this end sends.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "common/fs.hpp"
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
  if (o.key.empty()) return Fault{Reason::kDeviceError, "the probe key is required (the serving peer's key)"};
  if (o.size == 0 || o.size > (64ull << 20)) return Fault{Reason::kDeviceError, "size must be 1..64 MiB"};
  if (o.window == 0 || o.window > 4096) return Fault{Reason::kDeviceError, "window must be 1..4096"};
  if (o.latency_iters == 0 || o.latency_iters > kMaxLatencyIters)
    return Fault{Reason::kDeviceError, "latency iterations must be 1.." + std::to_string(kMaxLatencyIters)};
  if (!(o.duration_s >= kMinDurationMs / 1000.0 && o.duration_s <= kMaxDurationMs / 1000.0))
    return Fault{Reason::kDeviceError, "duration must be 0.1..3600 s"};
  if (!(o.stall_timeout_s > 0) || !(o.connect_timeout_s > 0))
    return Fault{Reason::kDeviceError, "timeouts must be positive"};
  if (!(o.min_fraction >= 0 && o.min_fraction <= 1)) return Fault{Reason::kDeviceError, "min fraction must be 0..1"};
  return std::nullopt;
}

Check session(const ProbeOptions& o, Port& port, Channel& ch, Measured& m);

Check run_client(const ProbeOptions& o, ProbeResult& res, Measured& m) {
  auto port = open_port(o.hca, o.gid_index);
  if (!port.ok()) return port.fault();
  res.gid = gid_text(port->gid);
  res.port_rate_gbps = port->rate_gbps;
  auto ch = Channel::connect(o.peer.host, o.peer.port, after(o.connect_timeout_s));
  if (!ch.ok()) return ch.fault();
  res.peer = ch->peer();
  if (auto f = authenticate_client(*ch, o.key, after(o.stall_timeout_s))) return f;
  Check f = session(o, *port, *ch, m);
  // Best effort: tell the server why, so its log names the same reason
  // (a dead channel makes this a no-op).
  if (f && !f->from_peer) (void)ch->send(Failure{f->reason, "client: " + f->message}, after(0.5));
  return f;
}

Check session(const ProbeOptions& o, Port& port, Channel& ch, Measured& m) {
  const Plan plan{static_cast<uint32_t>(std::lround(o.duration_s * 1000)), o.latency_iters};
  if (auto f = ch.send(plan, after(o.stall_timeout_s))) return f;
  // Registered only now that the peer is known to hold the key. Leaving
  // this scope releases QP, CQ, MR, buffer and PD in that order, on success
  // and on every failure below.
  auto link = make_link(port, buffer_len(o.size), o.window);
  if (!link.ok()) return link.fault();
  if (auto f = ch.send(local_endpoint(port, *link), after(o.stall_timeout_s))) return f;
  auto reply = ch.recv(after(o.stall_timeout_s));
  if (!reply.ok()) return reply.fault();
  if (auto* f = std::get_if<Failure>(&*reply)) return remote_failure(*f, ch.peer());
  auto* remote = std::get_if<Endpoint>(&*reply);
  if (!remote) return unexpected(*reply, ch.peer(), "the server's endpoint");
  if (remote->len != link->len)
    return Fault{Reason::kProtocolError, "server registered " + std::to_string(remote->len) + " bytes, asked for " +
                                             std::to_string(link->len)};
  if (auto f = connect_link(port, *link, *remote)) return f;
  Client c(o, *link, ch, *remote);
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
  std::atomic<uint64_t> registered{0};  // bytes the running session has registered
  std::unique_ptr<Listener> listener;
};

namespace {

// Counts what a session has registered while it holds it.
class Registered {
 public:
  Registered(std::atomic<uint64_t>& counter, uint64_t bytes) : c_(counter), bytes_(bytes) { c_ += bytes_; }
  ~Registered() { c_ -= bytes_; }
  Registered(const Registered&) = delete;
  Registered& operator=(const Registered&) = delete;

 private:
  std::atomic<uint64_t>& c_;
  uint64_t bytes_;
};

// The server's half of one authenticated session: the channel is sealed and
// every wait on it ends at the session's lifetime.
Check serve_session(Server::Impl& s, Channel& ch, const Plan& plan) {
  const double io = s.opts.io_timeout_s;
  auto lifetime_up = [&] { return Clock::now() >= ch.end(); };
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
  Registered held(s.registered, link->len);
  // Straight to RTS: the client writes as soon as it has our endpoint.
  if (auto f = connect_link(*port, *link, remote)) return f;
  if (auto f = ch.send(local_endpoint(*port, *link), after(io))) return f;

  // The bandwidth phase is the client's alone: its next record comes after
  // the announced duration and the drain; a dead client closes the channel.
  auto next = ch.recv(after(plan.duration_ms / 1000.0 + 2 * io));
  if (!next.ok()) return next.fault();
  if (auto* f = std::get_if<Failure>(&*next)) return remote_failure(*f, ch.peer());
  auto* lat = std::get_if<LatencyStart>(&*next);
  if (!lat) return unexpected(*next, ch.peer(), "lat");
  if (lat->iters != plan.latency_iters)
    return Fault{Reason::kProtocolError, "from " + ch.peer() + ": " + std::to_string(lat->iters) +
                                             " round trips, the plan said " + std::to_string(plan.latency_iters)};

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
        if (ch.cancelled()) return Fault{Reason::kPeerClosed, "the probe server is stopping"};
        if (auto f = check_side_channel(ch, "pings")) return f;
        if (lifetime_up()) return Fault{Reason::kTimeout, "latency: the session's time is up at ping " + std::to_string(i)};
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
  const auto drain_until = std::min(after(io), ch.end());
  while (completed < lat->iters) {
    if (auto f = reap(*link, &completed, "latency (pong)")) return f;
    if (Clock::now() > drain_until) return Fault{Reason::kTimeout, "latency: pong completions did not arrive"};
  }
  return ch.send(Done{}, after(io));
}

std::optional<std::string> address_of(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> v4, v6;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || ifname != a->ifa_name) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET && !v4) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
      v4 = buf;
    } else if (a->ifa_addr->sa_family == AF_INET6 && !v6) {
      const in6_addr& in6 = reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr;
      if (IN6_IS_ADDR_LINKLOCAL(&in6)) continue;  // binding one needs a scope
      inet_ntop(AF_INET6, &in6, buf, sizeof buf);
      v6 = buf;
    }
  }
  freeifaddrs(list);
  return v4 ? v4 : v6;
}

}  // namespace

Result<std::string> fabric_bind_address(const Gid& gid, bool ethernet, const std::string& device, uint8_t port,
                                        const std::string& sysfs_root) {
  const std::string what = device + ":" + std::to_string(port);
  const std::string choose = "; pass bind ADDRESS (or 0.0.0.0 to listen on every address)";
  if (ethernet) {
    in6_addr a{};
    std::memcpy(&a, gid.data(), sizeof a);
    char buf[INET6_ADDRSTRLEN] = {};
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      inet_ntop(AF_INET, gid.data() + 12, buf, sizeof buf);
      return std::string(buf);
    }
    if (IN6_IS_ADDR_LINKLOCAL(&a) || IN6_IS_ADDR_UNSPECIFIED(&a))
      return Error{"the GID of " + what + " (" + gid_text(gid) + ") is no address the side channel can bind to" +
                   choose};
    inet_ntop(AF_INET6, &a, buf, sizeof buf);
    return std::string(buf);
  }
  // InfiniBand: the IPoIB netdev of this port (dev_port counts from 0).
  const std::string dir = sysfs_root + "/class/infiniband/" + device + "/device/net";
  auto names = list_dir(dir);
  if (names) {
    for (const auto& n : *names) {
      auto dp = read_text_file(dir + "/" + n + "/dev_port");
      if (!dp || *dp != std::to_string(port - 1)) continue;
      if (auto a = address_of(n)) return *a;
    }
  }
  return Error{"no IPoIB netdev with an address for " + what + " (looked in " + dir + ")" + choose};
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Server>> Server::start(const ServeOptions& opts) {
  if (opts.hca.device.empty()) return Error{"--hca is required (DEV:PORT, e.g. mlx5_0:1)"};
  if (opts.gid_index < 0 || opts.gid_index > 255)
    return Error{"--gid-index is required (0..255, the NCCL_IB_GID_INDEX of the fabric port)"};
  if (opts.key.empty()) return Error{"the probe key is required: clients must prove they hold it"};
  if (!(opts.io_timeout_s > 0) || !(opts.handshake_timeout_s > 0)) return Error{"timeouts must be positive"};
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  auto port = open_port(opts.hca, opts.gid_index);
  if (!port.ok()) {
    auto f = port.fault();
    return Error{std::string(reason_name(f.reason)) + ": " + f.message};
  }
  impl->port = std::move(*port);
  ListenOptions lo;
  lo.bind = opts.bind;
  if (lo.bind.empty()) {
    auto a = fabric_bind_address(impl->port.gid, impl->port.ethernet, opts.hca.device, opts.hca.port, opts.sysfs_root);
    if (!a) return a.take_error();
    lo.bind = *a;
  }
  lo.port = opts.port;
  lo.key = opts.key;
  lo.handshake_timeout_s = opts.handshake_timeout_s;
  lo.io_timeout_s = opts.io_timeout_s;
  Impl* self = impl.get();
  auto l = Listener::start(std::move(lo), [self](Channel& ch, const Plan& plan) { return serve_session(*self, ch, plan); });
  if (!l) return l.take_error();
  impl->listener = std::move(*l);
  fa::logger("rdma")->info("probe server on {}:{} ({}:{}, GID index {} = {})", impl->listener->address(),
                           impl->listener->port(), opts.hca.device, opts.hca.port, opts.gid_index,
                           gid_text(impl->port.gid));
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::~Server() { stop(); }

void Server::stop() {
  if (impl_ && impl_->listener) impl_->listener->stop();
}

uint16_t Server::port() const { return impl_->listener->port(); }
const std::string& Server::address() const { return impl_->listener->address(); }

Server::Stats Server::stats() const {
  Stats st = impl_->listener->stats();
  st.registered_bytes = impl_->registered.load();
  return st;
}

}  // namespace fa::rdma
