// SPDX-License-Identifier: Apache-2.0
// fabric-agent-runtime: an OCI runtime in front of runc or crun. For `create`
// and `run` it applies the fabric-agent.io/rdma CDI spec to the bundle's
// config.json, then it execs the real runtime with the arguments it was given;
// every other verb goes through untouched. See docs/pods.md.
//
// Linked static and on libc alone (no fa_common): the pod gets this file
// bind-mounted, and it must run on whatever C library the renter's image has.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pods/nested.hpp"

using namespace fa::pods::nested;
using nlohmann::json;

namespace {

std::string errno_text(const std::string& what, int e = errno) { return what + ": " + std::strerror(e); }

bool read_file(const std::string& path, size_t cap, std::string& out, std::string& err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno_text("open " + path);
    return false;
  }
  out.clear();
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno_text("read " + path);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > cap) {
      err = path + " is larger than " + std::to_string(cap) + " bytes";
      ::close(fd);
      return false;
    }
  }
  ::close(fd);
  return true;
}

// Temp file + rename: whoever reads config.json (the real runtime, the
// engine) sees the old or the new document, never half of one. No fsync: the
// bundle only matters to a container being started now, which a crash ends
// anyway (the engine writes the bundle again), and the two fsyncs were most
// of the time a create took (docs/pods.md).
bool rewrite(const std::string& path, const std::string& text, mode_t mode, std::string& err) {
  std::string tmp = path + ".fa-XXXXXX";
  int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) {
    err = errno_text("create a temp file beside " + path);
    return false;
  }
  size_t off = 0;
  bool ok = ::fchmod(fd, mode) == 0;
  while (ok && off < text.size()) {
    ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) off += static_cast<size_t>(n);
  }
  int e = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) e = errno;
    err = errno_text("write " + path, e);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat x{}, y{};
  return ::stat(a.c_str(), &x) == 0 && ::stat(b.c_str(), &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// FABRIC_AGENT_RUNTIME (a path, or a name looked up in PATH), else runc,
// then crun, from PATH; never this program itself.
bool find_runtime(std::string& out, std::string& err) {
  const char* want = std::getenv(kRuntimeEnv);
  std::vector<std::string> names;
  if (want && *want) names.push_back(want);
  else names = {"runc", "crun"};
  const char* path_env = std::getenv("PATH");
  std::string path = path_env && *path_env ? path_env : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (const auto& n : names) {
    std::vector<std::string> candidates;
    if (n.find('/') != std::string::npos) {
      candidates.push_back(n);
    } else {
      size_t start = 0;
      while (start <= path.size()) {
        size_t colon = path.find(':', start);
        std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        if (!dir.empty()) candidates.push_back(dir + "/" + n);
        if (colon == std::string::npos) break;
        start = colon + 1;
      }
    }
    for (const auto& c : candidates)
      if (::access(c.c_str(), X_OK) == 0 && !same_file(c, "/proc/self/exe")) {
        out = c;
        return true;
      }
  }
  err = want && *want ? std::string(kRuntimeEnv) + "=" + want + ": not an executable (nor found in PATH)"
                      : std::string("neither runc nor crun is in PATH (") + path + "); set " + kRuntimeEnv;
  return false;
}

// The memlock limit the container gets: unlimited when this process may
// raise its own (the runtime we exec then may too), else the hard limit we
// have, with a warning: ibv_reg_mr of large buffers will fail.
uint64_t memlock_limit() {
  rlimit inf{RLIM_INFINITY, RLIM_INFINITY};
  if (::setrlimit(RLIMIT_MEMLOCK, &inf) == 0) return RLIM_INFINITY;
  rlimit cur{};
  ::getrlimit(RLIMIT_MEMLOCK, &cur);
  std::fprintf(stderr,
               "fabric-agent-runtime: warning: RLIMIT_MEMLOCK of the container is its hard limit %llu bytes, not "
               "unlimited: no CAP_SYS_RESOURCE here\n",
               static_cast<unsigned long long>(cur.rlim_max));
  return cur.rlim_max;
}

bool prepare(const Call& call, std::string& err) {
  const char* spec_env = std::getenv(kSpecEnv);
  std::string spec_path = spec_env && *spec_env ? spec_env : kDefaultSpec;
  std::string text;
  if (!read_file(spec_path, 1 << 20, text, err)) {
    err = "the fabric's CDI spec: " + err;
    return false;
  }
  json spec = json::parse(text, nullptr, false);
  if (spec.is_discarded()) {
    err = spec_path + ": not JSON";
    return false;
  }
  Edits e;
  if (auto why = edits_from_cdi(spec, e)) {
    err = spec_path + ": " + *why;
    return false;
  }
  for (auto& n : e.nodes) {
    struct stat st{};
    if (::stat(n.host_path.c_str(), &st) != 0) {
      err = errno_text("device node " + n.host_path + " (" + spec_path + ")");
      return false;
    }
    if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
      err = "device node " + n.host_path + " (" + spec_path + ") is not a device";
      return false;
    }
    n.type = S_ISCHR(st.st_mode) ? 'c' : 'b';
    n.major = major(st.st_rdev);
    n.minor = minor(st.st_rdev);
  }
  std::string cfg_path = call.bundle + "/config.json";
  struct stat cst{};
  if (::stat(cfg_path.c_str(), &cst) != 0) {
    err = errno_text("bundle: " + cfg_path);
    return false;
  }
  if (!read_file(cfg_path, 16 << 20, text, err)) return false;
  json cfg = json::parse(text, nullptr, false);
  if (cfg.is_discarded()) {
    err = cfg_path + ": not JSON";
    return false;
  }
  if (auto why = apply_edits(cfg, e, memlock_limit())) {
    err = cfg_path + ": " + *why;
    return false;
  }
  return rewrite(cfg_path, cfg.dump(), cst.st_mode & 07777, err);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Call call = parse_call(args);
  std::string runtime, err;
  bool ok = find_runtime(runtime, err);
  if (ok && (call.verb == "create" || call.verb == "run")) ok = prepare(call, err);
  if (!ok) {
    // A container without the fabric it was promised is worse than one that
    // does not start: say what is wrong, and start nothing.
    std::string msg = err + "; the container was not started (it would have no RDMA fabric); "
                      "use another runtime for a container that needs no fabric";
    std::fprintf(stderr, "fabric-agent-runtime: %s\n", msg.c_str());
    if (!call.log.empty()) {
      int fd = ::open(call.log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) {
        std::string line = log_line(call.log_format, msg);
        (void)!::write(fd, line.data(), line.size());
        ::close(fd);
      }
    }
    return 1;
  }
  argv[0] = runtime.data();
  ::execv(runtime.c_str(), argv);
  std::fprintf(stderr, "fabric-agent-runtime: %s\n", errno_text("exec " + runtime).c_str());
  return 127;
}
