// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/channel.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/random.hpp"

namespace fa::rdma {
namespace {

int ms_until(Deadline d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d - Clock::now()).count();
  if (ms < 0) return 0;
  return ms > 1000000 ? 1000000 : static_cast<int>(ms);
}

// Waits for `events` on fd, or for the cancel fd. 1: ready, 0: deadline
// passed, -1: cancelled or poll failed (errno set).
int wait_fd(int fd, short events, int cancel_fd, Deadline deadline) {
  while (true) {
    pollfd p[2] = {{fd, events, 0}, {cancel_fd, POLLIN, 0}};
    int n = ::poll(p, cancel_fd >= 0 ? 2 : 1, ms_until(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (cancel_fd >= 0 && (p[1].revents & POLLIN)) {
      errno = ECANCELED;
      return -1;
    }
    if (n > 0) return 1;
    if (Clock::now() >= deadline) return 0;
  }
}

std::string addr_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
  port = ntohs(in6->sin6_port);
  return "[" + std::string(host) + "]:" + std::to_string(port);
}

// A wait that ended without the fd becoming ready: this end is stopping
// (the server's stop signal), or poll itself failed.
Fault wait_fault(const std::string& peer) {
  if (errno == ECANCELED)
    return Fault{Reason::kPeerClosed, "side channel to " + peer + ": the probe server is stopping"};
  return Fault{Reason::kDeviceError, "side channel to " + peer + ": poll: " + std::strerror(errno)};
}

struct AddrInfoFree {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};

}  // namespace

Channel::Channel(Fd fd, std::string peer, int cancel_fd)
    : fd_(std::move(fd)), peer_(std::move(peer)), cancel_fd_(cancel_fd) {}

Outcome<Channel> Channel::connect(const std::string& host, uint16_t port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res))
    return Fault{Reason::kNoRoute, "cannot resolve peer '" + host + "': " + gai_strerror(rc)};
  std::unique_ptr<addrinfo, AddrInfoFree> owned(res);
  Fault last{Reason::kNoRoute, "no address for peer '" + host + "'"};
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const std::string target = addr_text(ai->ai_addr);
    Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      last = Fault{Reason::kDeviceError, std::string("socket: ") + std::strerror(errno)};
      continue;
    }
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        int w = wait_fd(fd.get(), POLLOUT, -1, deadline);
        if (w == 0) {
          err = ETIMEDOUT;
        } else if (w < 0) {
          err = errno;
        } else {
          socklen_t l = sizeof err;
          if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
        }
      }
    }
    if (err != 0) {
      last = Fault{classify_connect_errno(err),
                   "side channel to " + target + ": " + std::strerror(err) +
                       (err == ECONNREFUSED ? " (is `fabric-agent probe rdma serve` running there?)" : "")};
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return Channel(std::move(fd), target);
  }
  return last;
}

Check Channel::send_line(const std::string& text, Deadline deadline) {
  const bool capped = end_ < deadline;
  deadline = std::min(deadline, end_);
  std::string line = text + "\n";
  size_t done = 0;
  while (done < line.size()) {
    ssize_t n = ::send(fd_.get(), line.data() + done, line.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_fd(fd_.get(), POLLOUT, cancel_fd_, deadline);
      if (w == 0)
        return Fault{Reason::kTimeout, "side channel to " + peer_ + ": send timed out" +
                                           (capped ? " (the session's time is up)" : "")};
      if (w < 0) return wait_fault(peer_);
      continue;
    }
    int e = errno;
    return Fault{classify_io_errno(e), "side channel to " + peer_ + ": send: " + std::strerror(e)};
  }
  return std::nullopt;
}

Outcome<std::string> Channel::recv_line(Deadline deadline) {
  const bool capped = end_ < deadline;
  deadline = std::min(deadline, end_);
  while (true) {
    if (auto nl = in_.find('\n'); nl != std::string::npos) {
      std::string line = in_.substr(0, nl);
      in_.erase(0, nl + 1);
      return line;
    }
    if (in_.size() > kMaxLineBytes)
      return Fault{Reason::kProtocolError, "from " + peer_ + ": record longer than " +
                                               std::to_string(kMaxLineBytes) + " bytes"};
    int w = wait_fd(fd_.get(), POLLIN, cancel_fd_, deadline);
    if (w == 0)
      return Fault{Reason::kTimeout, "side channel to " + peer_ + ": no record within the deadline" +
                                         (capped ? " (the session's time is up)" : "")};
    if (w < 0) return wait_fault(peer_);
    // Never more than one byte past the bound is buffered.
    char buf[kMaxLineBytes + 1];
    ssize_t n = ::recv(fd_.get(), buf, kMaxLineBytes + 1 - in_.size(), MSG_DONTWAIT);
    if (n == 0) return Fault{Reason::kPeerClosed, "side channel to " + peer_ + ": closed by the peer"};
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      int e = errno;
      return Fault{classify_io_errno(e), "side channel to " + peer_ + ": recv: " + std::strerror(e)};
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

Check Channel::send(const Record& r, Deadline deadline) {
  if (!sealing_) return send_line(encode(r), deadline);
  return send_line(rdma::seal(sealing_->key, sealing_->out, sealing_->sent++, encode(r)), deadline);
}

Outcome<Record> Channel::recv(Deadline deadline) {
  auto line = recv_line(deadline);
  if (!line.ok()) return line.fault();
  std::string_view record = *line;
  if (sealing_) {
    auto opened = open(sealing_->key, sealing_->in, sealing_->received++, *line);
    if (!opened) return Fault{Reason::kAuthFailed, "from " + peer_ + ": " + opened.error().message};
    record = *opened;
  }
  auto r = decode(record);
  if (!r) return Fault{Reason::kProtocolError, "from " + peer_ + ": " + r.error().message};
  return *r;
}

bool Channel::readable() {
  if (in_.find('\n') != std::string::npos) return true;
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

void Channel::seal(const SessionKey& key, bool client) {
  sealing_ = Sealing{key, client ? Direction::kToServer : Direction::kToClient,
                     client ? Direction::kToClient : Direction::kToServer};
}

bool Channel::cancelled() const {
  if (cancel_fd_ < 0) return false;
  pollfd p{cancel_fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

namespace {

Status fresh_nonce(Nonce& n) { return random_bytes(n.data(), n.size()); }

// Bytes that are no handshake record (a line too long, say) mean the peer
// did not authenticate, like a wrong record does.
Fault in_handshake(Fault f, const Channel& ch) {
  if (f.from_peer) {
    f.message = "peer " + ch.peer() + " reported: " + f.message;
    return f;
  }
  if (f.reason == Reason::kProtocolError) f.reason = Reason::kAuthFailed;
  if (f.message.rfind("handshake: ", 0) != 0) f.message = "handshake: " + f.message;
  return f;
}

}  // namespace

Check authenticate_client(Channel& ch, const Key& key, Deadline deadline) {
  Nonce nc;
  if (auto st = fresh_nonce(nc); !st) return Fault{Reason::kDeviceError, st.error().message};
  ClientHandshake hs(key, nc);
  if (auto f = ch.send_line(hs.hello(), deadline)) return in_handshake(*f, ch);
  auto challenge = ch.recv_line(deadline);
  if (!challenge.ok()) return in_handshake(challenge.fault(), ch);
  auto proof = hs.on_challenge(*challenge);
  if (!proof.ok()) return in_handshake(proof.fault(), ch);
  if (auto f = ch.send_line(*proof, deadline)) return in_handshake(*f, ch);
  auto theirs = ch.recv_line(deadline);
  if (!theirs.ok()) return in_handshake(theirs.fault(), ch);
  auto session = hs.on_proof(*theirs);
  if (!session.ok()) return in_handshake(session.fault(), ch);
  ch.seal(*session, true);
  return std::nullopt;
}

Check authenticate_server(Channel& ch, const Key& key, Deadline deadline) {
  Nonce ns;
  if (auto st = fresh_nonce(ns); !st) return Fault{Reason::kDeviceError, st.error().message};
  ServerHandshake hs(key, ns);
  auto hello = ch.recv_line(deadline);
  if (!hello.ok()) return in_handshake(hello.fault(), ch);
  auto challenge = hs.on_hello(*hello);
  if (!challenge.ok()) return in_handshake(challenge.fault(), ch);
  if (auto f = ch.send_line(*challenge, deadline)) return in_handshake(*f, ch);
  auto proof = ch.recv_line(deadline);
  if (!proof.ok()) return in_handshake(proof.fault(), ch);
  auto ours = hs.on_proof(*proof);
  if (!ours.ok()) return in_handshake(ours.fault(), ch);
  if (auto f = ch.send_line(*ours, deadline)) return in_handshake(*f, ch);
  ch.seal(hs.session(), false);
  return std::nullopt;
}

Result<Fd> listen_tcp(const std::string& bind_addr, uint16_t port, uint16_t* bound_port) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* in4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, bind_addr.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    len = sizeof *in4;
  } else if (inet_pton(AF_INET6, bind_addr.c_str(), &in6->sin6_addr) == 1) {
    family = AF_INET6;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    len = sizeof *in6;
  } else {
    return Error{"bind address '" + bind_addr + "' is not an IPv4 or IPv6 address"};
  }
  Fd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error::from_errno("socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0)
    return Error::from_errno("bind " + bind_addr + ":" + std::to_string(port));
  if (::listen(fd.get(), 8) != 0) return Error::from_errno("listen");
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return Error::from_errno("getsockname");
  *bound_port = ntohs(family == AF_INET ? in4->sin_port : in6->sin6_port);
  return fd;
}

}  // namespace fa::rdma
