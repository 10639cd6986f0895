// SPDX-License-Identifier: Apache-2.0
#include "probes/lldp_io.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "probes/lldp.hpp"

namespace fa::probes {
namespace {

// Debian's and Fedora's path; a fixed one, not $PATH: the agent runs as
// root and a person's shell often has no /usr/sbin in $PATH.
constexpr const char* kLldpcli = "/usr/sbin/lldpcli";

// lldpd answers from memory in milliseconds. A stopped or wedged lldpd
// accepts the connection and never answers, and lldpcli would wait for
// good, with the discovery pass (and the daemon's watchdog) behind it.
constexpr int kAnswerSeconds = 2;

// lldpd's socket where fabric.lldpd_socket is not set (lldpcli's default;
// /var/run is a link to /run where lldpd was built with the older path).
constexpr const char* kDefaultSocket = "/run/lldpd.socket";

// lldpcli's own log lines read "2026-12-02T20:32:07 [WARN/control] text".
std::string last_message(const std::string& err) {
  std::string s = err;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  auto nl = s.rfind('\n');
  if (nl != std::string::npos) s = s.substr(nl + 1);
  auto tag = s.find("] ");
  if (tag != std::string::npos && s.find('[') < tag) s = s.substr(tag + 2);
  return s.empty() ? "no message" : s;
}

std::string group_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  const struct group* g = ::getgrgid(st.st_gid);
  return g ? std::string(g->gr_name) : std::to_string(st.st_gid);
}

// lldpcli is executable by its group only (Debian: root:adm, setuid
// _lldpd), and lldpd's socket admits its group (_lldpd). A service without
// CAP_DAC_OVERRIDE and with NoNewPrivileges (the setuid bit does not
// apply) needs both groups.
std::string groups_hint(const std::string& socket) {
  std::string a = group_of(kLldpcli), b = group_of(socket), gs = a;
  if (!b.empty() && b != a) gs += (gs.empty() ? "" : " ") + b;
  if (gs.empty()) return "";
  return ": run the agent with the group" + std::string(gs.find(' ') == std::string::npos ? " " : "s ") + gs +
         " (systemd: SupplementaryGroups=" + gs + " in a drop-in)";
}

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_write() {
    ::close(fd[1]);
    fd[1] = -1;
  }
};

struct Ran {
  bool timed_out = false;
  int status = 0;
  std::string out, err;
};

// posix_spawn reports a failed exec (ENOENT, EACCES) as its return value;
// both pipes are read together so that neither fills and blocks lldpcli.
Result<Ran> run(std::vector<std::string> args) {
  Pipe out, err;
  if (::pipe2(out.fd, O_CLOEXEC) != 0 || ::pipe2(err.fd, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd[1], 2);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, dfl;
  sigemptyset(&none);
  sigemptyset(&dfl);
  sigaddset(&dfl, SIGPIPE);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {const_cast<char*>("LC_ALL=C"), nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0], &fa, &at, argv.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  if (rc != 0) return Error{std::strerror(rc), rc};
  out.close_write();
  err.close_write();

  Ran r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kAnswerSeconds);
  pollfd p[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sink[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[16384];
      ssize_t k = ::read(p[i].fd, buf, sizeof buf);
      if (k > 0) {
        sink[i]->append(buf, static_cast<size_t>(k));
      } else if (k == 0 || errno != EINTR) {
        p[i].fd = -1;
        --open;
      }
    }
  }
  if (r.timed_out) ::kill(pid, SIGKILL);
  while (::waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
  }
  return r;
}

}  // namespace

Result<std::map<std::string, std::vector<LldpNeighbor>>> read_lldp_neighbors(const std::string& socket) {
  std::string sock = socket.empty() ? kDefaultSocket : socket;
  auto r = run({kLldpcli, "-f", "json0", "-u", sock, "show", "neighbors"});
  if (!r) {
    int e = r.error().sys_errno;
    if (e == ENOENT) return Error{std::string(kLldpcli) + " is not installed (package lldpd)", e};
    if (e == EACCES) return Error{std::string(kLldpcli) + ": permission denied" + groups_hint(sock), e};
    return Error{std::string(kLldpcli) + ": " + r.error().message, e};
  }
  if (r->timed_out)
    return Error{"lldpd at " + sock + ": no answer within " + std::to_string(kAnswerSeconds) +
                     " s (lldpd stopped or busy)",
                 ETIMEDOUT};
  if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
    std::string m = last_message(r->err);
    std::string hint;
    if (m.find("Permission denied") != std::string::npos)
      hint = groups_hint(sock);
    else if (m.find("unable to connect") != std::string::npos)
      hint = " (is lldpd running?)";
    return Error{"lldpcli: " + m + hint, EIO};
  }
  return parse_lldpcli_neighbors(r->out);
}

}  // namespace fa::probes
