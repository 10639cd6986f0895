// SPDX-License-Identifier: Apache-2.0
#include "common/child.hpp"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "common/fd.hpp"
#include "common/fs.hpp"
#include "common/secure.hpp"

namespace fa {

Result<std::string> run_child(const std::string& path, const std::vector<std::string>& argv,
                              const std::string& input, const std::string& what,
                              std::chrono::milliseconds timeout) {
  // One socket pair is the child's stdin and stdout: send() with
  // MSG_NOSIGNAL cannot raise SIGPIPE if the child is gone.
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Error::from_errno("socketpair");
  Fd ours(sv[0]), theirs(sv[1]);
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_adddup2(&fa, theirs.get(), 0);
  ::posix_spawn_file_actions_adddup2(&fa, theirs.get(), 1);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, path.c_str(), &fa, nullptr, cargv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return Error::from_errno("spawn " + what + " (" + path + ")", rc);
  theirs = Fd();
  std::string copy = input;
  Status sent = send_all(ours.get(), copy, what + "'s stdin");
  secure_wipe(copy.data(), copy.size());
  ::shutdown(ours.get(), SHUT_WR);
  // A child that does not answer in time (a hung binary, a stopped process)
  // is killed rather than left holding up the operation this runs under.
  std::string got;
  char buf[512];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{ours.get(), POLLIN, 0};
    int pr = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    ssize_t n = ::read(ours.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || got.size() > 4096) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ours = Fd();
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Error{what + " did not answer within " + std::to_string(timeout.count()) + " ms (killed)",
                 ETIMEDOUT};
  if (!sent) return sent.take_error();
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return Error{what + " failed (" +
                 (WIFEXITED(st) ? "exit status " + std::to_string(WEXITSTATUS(st))
                                : "signal " + std::to_string(WTERMSIG(st))) +
                 ")"};
  return got;
}

Result<std::string> whole_agent_path() {
  auto self = read_link("/proc/self/exe");
  if (!self) return self.take_error();
  // /proc/self/exe is the resolved path (no symlink, no ".."): its
  // directory's parent is the prefix (/usr/bin/fabric-agent -> /usr).
  auto dir = self->rfind('/');
  auto parent = dir == std::string::npos || dir == 0 ? std::string::npos : self->rfind('/', dir - 1);
  if (parent == std::string::npos)
    return Error{"/proc/self/exe: `" + *self + "' is not in a directory of a prefix (as bin/ is in /usr)",
                 EINVAL};
  return self->substr(0, parent) + "/libexec/fabric-agent/fabric-agent";
}

}  // namespace fa
