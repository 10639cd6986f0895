// SPDX-License-Identifier: Apache-2.0
// Userspace backend: wireguard-go serving one interface, driven over its UAPI
// unix socket (uapi_dir/IFNAME.sock, a path wireguard-go fixes).
//
// We start wireguard-go in the foreground (-f) so that we own its pid, but
// in a session of its own: the mesh must outlive the agent (a restart or
// kill -9 of the agent must not drop the renter's traffic), so the child is
// never tied to our lifetime, and `mesh down` is what stops it.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string_view>
#include <thread>
#include <utility>

#include "common/fault.hpp"
#include "common/fs.hpp"
#include "common/log.hpp"
#include "common/secure.hpp"
#include "overlay/internal.hpp"

namespace fa::overlay {

std::string uapi_socket_path(const std::string& uapi_dir, const std::string& ifname) {
  return uapi_dir + "/" + ifname + ".sock";
}

Result<Fd> uapi_connect(const std::string& uapi_dir, const std::string& ifname) {
  std::string path = uapi_socket_path(uapi_dir, ifname);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return Error{"UAPI socket path too long: " + path};
  std::copy(path.begin(), path.end(), sa.sun_path);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error::from_errno("socket(AF_UNIX)");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return Error::from_errno("connect " + path);
  return fd;
}

namespace {

// Reads one reply: ends with "\n\n" after an errno= line. Bounded in time and
// size so a wedged wireguard-go cannot hang the agent. The end test looks
// only at the last line, never rescans what came before.
Result<std::string> read_reply(int fd) {
  // A get reply starts with the private key: no copy of it is left in a
  // buffer freed unwiped (on growth, on an error, in the stack chunk).
  std::string buf;
  buf.reserve(64 * 1024);
  auto fail = [&buf](Error e) {
    fa::secure_wipe(buf.data(), buf.size());
    return e;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  char tmp[65536];
  for (;;) {
    ssize_t n = ::recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return fail(Error{"UAPI: no complete reply within 10 s"});
      pollfd p{fd, POLLIN, 0};
      int pr = ::poll(&p, 1, static_cast<int>(left.count()));
      if (pr < 0 && errno != EINTR) return fail(Error::from_errno("UAPI poll"));
      continue;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Error::from_errno("UAPI read"));
    }
    if (n == 0) return fail(Error{"UAPI: connection closed before the reply ended"});
    if (buf.size() + static_cast<size_t>(n) > buf.capacity()) {
      std::string bigger;
      bigger.reserve(std::max(buf.capacity() * 2, buf.size() + static_cast<size_t>(n)));
      bigger.append(buf);
      fa::secure_wipe(buf.data(), buf.size());
      buf.swap(bigger);
    }
    buf.append(tmp, static_cast<size_t>(n));
    fa::secure_wipe(tmp, static_cast<size_t>(n));
    if (buf.size() > (256u << 20)) return fail(Error{"UAPI: reply larger than 256 MiB"});
    // Complete when it ends with "errno=N\n\n": the last line is errno=.
    if (buf.size() >= 2 && buf.compare(buf.size() - 2, 2, "\n\n") == 0) {
      auto prev = buf.size() >= 3 ? buf.rfind('\n', buf.size() - 3) : std::string::npos;
      size_t line = prev == std::string::npos ? 0 : prev + 1;
      if (buf.compare(line, 6, "errno=") == 0) return buf;
    }
  }
}

// One connection serves one apply (wireguard-go answers any number of
// get/set operations on it); a failed exchange drops it.
class UserspaceBackend : public WgBackend {
 public:
  explicit UserspaceBackend(std::string dir) : dir_(std::move(dir)) {}
  Backend kind() const override { return Backend::Userspace; }

  Result<Device> get_device(const std::string& ifname) override {
    auto fd = conn(ifname);
    if (!fd) return fd.take_error();
    if (auto w = send_all(*fd, "get=1\n\n", "UAPI write"); !w) return drop(w.take_error());
    auto reply = read_reply(*fd);
    if (!reply) return drop(reply.take_error());
    auto d = uapi_parse_get(*reply);
    fa::secure_wipe(reply->data(), reply->size());  // it held the private key
    if (d) d->name = ifname;
    return d;
  }

  Status set_device(const Device& change) override {
    auto fd = conn(change.name);
    if (!fd) return fd.take_error();
    std::string req = uapi_set_request(change);
    auto w = send_all(*fd, req, "UAPI write");
    fa::secure_wipe(req.data(), req.size());  // may hold the private key
    if (!w) return drop(w.take_error());
    fault_point("wireguard-go: set request sent, not answered");
    auto reply = read_reply(*fd);
    if (!reply) return drop(reply.take_error());
    return uapi_parse_set_reply(*reply);
  }

 private:
  Result<int> conn(const std::string& ifname) {
    if (!conn_.valid() || ifname != conn_if_) {
      auto fd = uapi_connect(dir_, ifname);
      if (!fd) return fd.take_error();
      conn_ = std::move(*fd);
      conn_if_ = ifname;
    }
    return conn_.get();
  }
  Error drop(Error e) {
    conn_.reset();
    return e;
  }

  std::string dir_;
  Fd conn_;
  std::string conn_if_;
};

std::string pid_file(const std::string& state_dir, const std::string& ifname) {
  return state_dir + "/" + ifname + ".pid";
}

Status mkdir_p(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      std::string p = path.substr(0, i);
      if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST) return Error::from_errno("mkdir " + p);
    }
  }
  return {};
}

bool process_alive(pid_t pid) {
  // A zombie child of ours still "exists" for kill(0): reap it first.
  int st;
  if (::waitpid(pid, &st, WNOHANG) == pid) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

}  // namespace

std::unique_ptr<WgBackend> make_userspace_backend(std::string uapi_dir) {
  return std::make_unique<UserspaceBackend>(std::move(uapi_dir));
}

Result<pid_t> uapi_server_pid(const std::string& uapi_dir, const std::string& ifname) {
  auto fd = uapi_connect(uapi_dir, ifname);
  if (!fd) return fd.take_error();
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(fd->get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
    return Error::from_errno("SO_PEERCRED on " + uapi_socket_path(uapi_dir, ifname));
  return cred.pid;
}

Result<pid_t> start_wireguard_go(const std::string& binary, const std::string& ifname,
                                 const std::string& uapi_dir, const std::string& state_dir) {
  auto log = fa::logger("overlay");
  if (auto s = mkdir_p(state_dir); !s) return s.take_error();
  std::string logpath = state_dir + "/" + ifname + ".log";
  // Everything the child needs is built before fork(): between fork and exec
  // only async-signal-safe calls are allowed (the daemon has threads).
  std::vector<std::string> env_store;
  for (char** e = environ; e && *e; ++e)
    if (std::string_view(*e).substr(0, 22) != "WG_PROCESS_FOREGROUND=") env_store.emplace_back(*e);
  env_store.emplace_back("WG_PROCESS_FOREGROUND=1");
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string flag = "-f";
  std::string bin = binary, name = ifname;
  char* argv[] = {bin.data(), flag.data(), name.data(), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork for " + binary);
  if (pid == 0) {
    // Child: own session and process group, so that neither the agent's
    // death nor a signal to its group (Ctrl-C, systemd stop of the agent
    // with KillMode=mixed) takes the mesh down.
    ::setsid();
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = ::open(logpath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvpe(bin.c_str(), argv, envp.data());
    ::_exit(127);
  }
  fault_point("wireguard-go: started, pid not recorded");
  if (auto w = write_file_atomic(pid_file(state_dir, ifname), std::to_string(pid) + "\n", 0600); !w)
    log->warn("{}: cannot record wireguard-go pid {}: {}", ifname, pid, w.error().message);
  // Wait until it serves the UAPI socket (it creates the tun first).
  for (int i = 0; i < 500; ++i) {
    int st;
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      auto tail = read_text_file(logpath).value_or(std::string());
      if (tail.size() > 400) tail = tail.substr(tail.size() - 400);
      return Error{binary + " -f " + ifname + " exited (status " + std::to_string(st) + "): " + tail};
    }
    auto srv = uapi_server_pid(uapi_dir, ifname);
    if (srv && *srv == pid) {
      log->info("{}: started {} (pid {})", ifname, binary, pid);
      return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGTERM);
  return Error{binary + " -f " + ifname + " did not open " + uapi_socket_path(uapi_dir, ifname) +
               " within 5 s"};
}

Status stop_wireguard_go(const std::string& ifname, const std::string& uapi_dir,
                         const std::string& state_dir) {
  auto log = fa::logger("overlay");
  std::string pf = pid_file(state_dir, ifname);
  auto srv = uapi_server_pid(uapi_dir, ifname);
  auto text = read_text_file(pf);
  pid_t pid = 0;
  if (text) {
    try {
      pid = static_cast<pid_t>(std::stol(*text));
    } catch (...) {
      pid = 0;
    }
  } else if (srv) {
    // No record (a run killed before it wrote one, or another state
    // directory): the wireguard-go serving the interface's socket.
    pid = *srv;
  }
  if (pid <= 0) {
    ::unlink(pf.c_str());
    return {};
  }
  // Only stop it if that pid is still the one serving the interface: after a
  // reboot or crash the number may belong to someone else by now.
  bool ours = srv && *srv == pid;
  if (!ours) {
    // The socket may already be gone (link deleted first); then trust the
    // pid only if it still runs wireguard-go.
    auto exe = read_link("/proc/" + std::to_string(pid) + "/exe");
    ours = exe && exe->find("wireguard-go") != std::string::npos;
  }
  if (ours && process_alive(pid)) {
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 300 && process_alive(pid); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (process_alive(pid)) {
      log->warn("{}: wireguard-go pid {} ignored SIGTERM for 3 s, sending SIGKILL", ifname, pid);
      ::kill(pid, SIGKILL);
      for (int i = 0; i < 100 && process_alive(pid); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    log->info("{}: stopped wireguard-go (pid {})", ifname, pid);
  }
  ::unlink(pf.c_str());
  ::unlink((state_dir + "/" + ifname + ".log").c_str());
  return {};
}

}  // namespace fa::overlay
