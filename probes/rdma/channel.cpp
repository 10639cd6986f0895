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

Check Channel::send(const Record& r, Deadline deadline) {
  std::string line = encode(r) + "\n";
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
      if (w == 0) return Fault{Reason::kTimeout, "side channel to " + peer_ + ": send timed out"};
      if (w < 0) return wait_fault(peer_);
      continue;
    }
    int e = errno;
    return Fault{classify_io_errno(e), "side channel to " + peer_ + ": send: " + std::strerror(e)};
  }
  return std::nullopt;
}

Outcome<Record> Channel::recv(Deadline deadline) {
  while (true) {
    if (auto nl = in_.find('\n'); nl != std::string::npos) {
      std::string line = in_.substr(0, nl);
      in_.erase(0, nl + 1);
      auto r = decode(line);
      if (!r) return Fault{Reason::kProtocolError, "from " + peer_ + ": " + r.error().message};
      return *r;
    }
    if (in_.size() > kMaxRecordBytes)
      return Fault{Reason::kProtocolError, "from " + peer_ + ": record longer than " +
                                               std::to_string(kMaxRecordBytes) + " bytes"};
    int w = wait_fd(fd_.get(), POLLIN, cancel_fd_, deadline);
    if (w == 0) return Fault{Reason::kTimeout, "side channel to " + peer_ + ": no record within the deadline"};
    if (w < 0) return wait_fault(peer_);
    char buf[1024];
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) return Fault{Reason::kPeerClosed, "side channel to " + peer_ + ": closed by the peer"};
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      int e = errno;
      return Fault{classify_io_errno(e), "side channel to " + peer_ + ": recv: " + std::strerror(e)};
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

bool Channel::readable() {
  if (in_.find('\n') != std::string::npos) return true;
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
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
