// SPDX-License-Identifier: Apache-2.0
// The local transport between `fabric-agent oci-hook` and the daemon: a unix
// stream socket, one JSON request and one JSON reply per connection. Only
// root may talk to it (the socket is 0600 and SO_PEERCRED is checked): a
// registration moves network interfaces between namespaces.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "common/fs.hpp"
#include "common/json.hpp"
#include "common/log.hpp"
#include "pods/pods.hpp"

namespace fa::pods {

using nlohmann::json;

namespace {

constexpr size_t kMaxMessage = 64 * 1024;

Result<sockaddr_un> unix_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(a.sun_path))
    return Error{"socket path `" + path + "': expected 1.." + std::to_string(sizeof(a.sun_path) - 1) + " bytes",
                 ENAMETOOLONG};
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

// Reads until EOF or '\n', at most kMaxMessage bytes, within the deadline.
Result<std::string> read_message(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string buf;
  char chunk[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Error{"timed out waiting for a message", ETIMEDOUT};
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("poll");
    }
    if (r == 0) continue;
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("read");
    }
    if (n == 0) return buf;
    buf.append(chunk, static_cast<size_t>(n));
    if (auto nl = buf.find('\n'); nl != std::string::npos) return buf.substr(0, nl);
    if (buf.size() > kMaxMessage) return Error{"message larger than " + std::to_string(kMaxMessage) + " bytes", EMSGSIZE};
  }
}

}  // namespace

Result<std::unique_ptr<PodSocketServer>> PodSocketServer::start(const std::string& path, Handler h) {
  auto addr = unix_addr(path);
  if (!addr) return addr.take_error();
  Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Error::from_errno("socket(AF_UNIX)");
  // A stale socket file from a previous run would make bind fail; a live
  // server on it answers connect, and then we must not steal its path.
  {
    Fd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe.valid() && ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0)
      return Error{path + ": another agent is already serving pod registrations here", EADDRINUSE};
  }
  ::unlink(path.c_str());
  auto slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) ::mkdir(path.substr(0, slash).c_str(), 0755);
  mode_t old = ::umask(0077);  // 0600 from the start: no window where others may connect
  int rc = ::bind(s.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
  ::umask(old);
  if (rc != 0) return Error::from_errno("bind " + path);
  if (::listen(s.get(), 16) != 0) return Error::from_errno("listen " + path);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Error::from_errno("pipe2");
  std::unique_ptr<PodSocketServer> srv(
      new PodSocketServer(path, std::move(s), Fd(pipefd[0]), Fd(pipefd[1]), std::move(h)));
  srv->thread_ = std::thread([p = srv.get()] { p->loop(); });
  return srv;
}

PodSocketServer::PodSocketServer(std::string path, Fd listen, Fd stop_r, Fd stop_w, Handler h)
    : path_(std::move(path)),
      listen_(std::move(listen)),
      stop_r_(std::move(stop_r)),
      stop_w_(std::move(stop_w)),
      handler_(std::move(h)) {}

PodSocketServer::~PodSocketServer() {
  char c = 'x';
  [[maybe_unused]] auto n = ::write(stop_w_.get(), &c, 1);
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
}

void PodSocketServer::loop() {
  auto log = fa::logger("pods");
  for (;;) {
    pollfd p[2] = {{listen_.get(), POLLIN, 0}, {stop_r_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log->error("pod socket {}: poll: {}", path_, std::strerror(errno));
      return;
    }
    if (p[1].revents) return;
    if (!(p[0].revents & POLLIN)) continue;
    Fd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c.valid()) continue;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != 0 && cred.uid != ::geteuid())) {
      log->warn("pod socket {}: refused a client with uid {}", path_, cred.uid);
      (void)send_all(c.get(), json{{"ok", false}, {"error", {{"code", "forbidden"}, {"message", "only root may register pods"}}}}.dump() + "\n", "send");
      continue;
    }
    auto msg = read_message(c.get(), std::chrono::steady_clock::now() + std::chrono::seconds(5));
    json reply;
    if (!msg) {
      reply = {{"ok", false}, {"error", {{"code", "bad_request"}, {"message", "request: " + msg.error().message}}}};
    } else {
      json req = fa::parse_json(*msg);
      if (req.is_discarded())
        reply = {{"ok", false}, {"error", {{"code", "bad_request"}, {"message", "request: not valid JSON"}}}};
      else {
        try {
          reply = handler_(req);
        } catch (const std::exception& e) {
          reply = {{"ok", false}, {"error", {{"code", "failed"}, {"message", e.what()}}}};
        }
      }
    }
    if (auto s = send_all(c.get(), reply.dump() + "\n", "send"); !s)
      log->warn("pod socket {}: reply not delivered (pid {}): {}", path_, cred.pid, s.error().message);
  }
}

Result<json> pod_request(const std::string& socket_path, const json& req, std::chrono::seconds timeout) {
  auto addr = unix_addr(socket_path);
  if (!addr) return addr.take_error();
  Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Error::from_errno("socket(AF_UNIX)");
  if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0)
    return Error::from_errno("the fabric-agent daemon is not reachable at " + socket_path);
  if (auto w = send_all(s.get(), req.dump() + "\n", "send"); !w) return w.take_error();
  ::shutdown(s.get(), SHUT_WR);
  auto msg = read_message(s.get(), std::chrono::steady_clock::now() + timeout);
  if (!msg) return Error{"no reply from the daemon at " + socket_path + ": " + msg.error().message, msg.error().sys_errno};
  json reply = fa::parse_json(*msg);
  if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok"))
    return Error{"the daemon at " + socket_path + " sent a malformed reply", EPROTO};
  return reply;
}

}  // namespace fa::pods
