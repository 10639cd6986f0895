// SPDX-License-Identifier: Apache-2.0
// Runs the built `fabric-agent run` as a child process on an ephemeral
// loopback port (other test runs share this machine), reads the port from
// its log, and kills it when the test ends, pass or fail.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fa::test {

inline std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string agent_binary() {
  const char* b = std::getenv("FA_BINARY");
  if (!b) throw std::runtime_error("FA_BINARY is not set (run through ctest)");
  return b;
}

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/fa-agent-test-XXXXXX";
    if (!mkdtemp(t)) throw std::runtime_error("mkdtemp failed");
    path = t;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

class AgentProcess {
 public:
  // `extra_yaml` is appended to a config with listen on 127.0.0.1:0 and the
  // state in dir/state. `in_child` runs in the child before the exec (resource
  // limits, working directory).
  AgentProcess(const std::string& dir, const std::string& extra_yaml, bool wait_ready = true,
               const std::string& listen = "127.0.0.1:0", std::vector<std::string> env = {},
               std::function<void()> in_child = {})
      : dir_(dir), env_(std::move(env)), in_child_(std::move(in_child)) {
    config_ = dir + "/agent.yaml";
    log_ = dir + "/agent.log";
    // The pods socket and CDI dir in the test's dir too (never the host's),
    // on one line after extra_yaml, and nfd on the next (server_test counts
    // config lines).
    std::ofstream(config_) << "listen: \"" << listen << "\"\nstate_dir: " << dir << "/state\nlog_level: debug\n"
                           << extra_yaml
                           << (extra_yaml.find("pods:") == std::string::npos
                                   ? std::string(extra_yaml.empty() || extra_yaml.back() == '\n' ? "" : "\n") + "pods: {socket: " + dir + "/pods.sock, cdi_dir: " + dir + "/cdi}\n"
                                   : std::string())
                           // Never the host's NFD directory: a test names its own.
                           << (extra_yaml.find("nfd:") == std::string::npos ? "nfd: {feature_file: \"\"}\n" : "");
    start(wait_ready);
  }
  ~AgentProcess() { stop(SIGKILL); }

  void start(bool wait_ready = true) {
    std::ofstream(log_, std::ios::app) << "";
    pid_ = ::fork();
    if (pid_ == 0) {
      int fd = ::open(log_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      for (auto& e : env_) ::putenv(e.data());
      if (in_child_) in_child_();
      std::string bin = agent_binary();
      ::execl(bin.c_str(), bin.c_str(), "run", "--config", config_.c_str(), nullptr);
      ::_exit(127);
    }
    if (wait_ready) wait_for_port();
  }

  // Waits for the "listening on" line of the current run (the log is appended).
  void wait_for_port() {
    static const std::regex re(R"(listening on https?://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 300; ++i) {
      std::string log = read_all(log_);
      std::smatch m;
      std::string::const_iterator from = log.cbegin() + static_cast<long>(std::min(scan_from_, log.size()));
      std::string rest(from, log.cend());
      if (std::regex_search(rest, m, re) && rest.find("ready (generation") != std::string::npos) {
        port_ = std::stoi(m[1]);
        scan_from_ = log.size();
        return;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("agent exited before listening; log:\n" + log);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("agent did not listen within 15 s; log:\n" + read_all(log_));
  }

  // Sends `sig` and waits for the exit; returns the exit status (or -signal).
  int stop(int sig = SIGTERM) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    status_ = status;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  // The raw wait status of the last stop() (WCOREDUMP and the like).
  int wait_status() const { return status_; }
  // Waits for an exit that happens by itself (bad config, refused listen).
  int wait_exit() {
    int status = 0;
    for (int i = 0; i < 300; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("agent did not exit");
  }

  void signal(int sig) { ::kill(pid_, sig); }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_all(log_); }
  std::string token() const {
    std::string t = read_all(dir_ + "/state/token");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    return t;
  }
  const std::string& config_path() const { return config_; }
  const std::string& dir() const { return dir_; }

  // Polls the log for `needle` (up to ~10 s).
  bool log_has(const std::string& needle) const {
    for (int i = 0; i < 200; ++i) {
      if (log().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::string dir_, config_, log_;
  std::vector<std::string> env_;
  std::function<void()> in_child_;
  pid_t pid_ = -1;
  int status_ = 0;
  int port_ = 0;
  size_t scan_from_ = 0;
};

// Runs a shell command, returns stdout; the exit code goes to *rc.
inline std::string sh(const std::string& cmd, int* rc = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("popen failed");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  if (rc) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

}  // namespace fa::test
