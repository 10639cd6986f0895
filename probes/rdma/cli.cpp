// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/cli.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "common/cli.hpp"
#include "common/config.hpp"
#include "common/fs.hpp"
#include "common/secure.hpp"
#include "probes/cli.hpp"
#include "probes/rdma/defaults.hpp"
#include "probes/rdma/probe.hpp"

namespace fa::rdma {
namespace {

const char kUsage[] =
    "usage: fabric-agent probe rdma serve --key-file FILE|- [--port P] [--bind ADDR] [--hca DEV:PORT] [--gid-index N]\n"
    "       fabric-agent probe rdma run --peer HOST[:P] --key-file FILE|- [--hca DEV:PORT] [--gid-index N]\n"
    "            [--duration S] [--size BYTES] [--window N] [--latency-iters N] [--min-fraction F] [--timeout S] [--json]\n"
    "  --key-file: the probe key both ends share (hex or base64, at least 32 bytes; '-' reads stdin)\n"
    "  --bind defaults to the fabric address of the probed port (0.0.0.0: every address)\n"
    "  --hca/--gid-index default to discovery's fabric port and NCCL_IB_GID_INDEX\n"
    "  ([--config FILE] [--sysfs-root DIR] as for `inspect`).\n";

// A bad command line or config (exit 2, as for every command), as against a
// probe that could not run or failed (exit 1).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// need: an argument's value (UsageError); failed_unless: what the probe's own
// steps return (discovery, the run).
template <class T>
T need(Result<T> r) {
  if (!r) throw UsageError(r.error().message);
  return std::move(*r);
}
template <class T>
T failed_unless(Result<T> r) {
  if (!r) throw std::runtime_error(r.error().message);
  return std::move(*r);
}

uint64_t uint_opt(const Args& a, const char* name, uint64_t lo, uint64_t hi, uint64_t fallback) {
  auto v = a.get(name);
  if (!v) return fallback;
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (v->empty() || ec != std::errc() || p != v->data() + v->size() || out < lo || out > hi)
    throw UsageError("--" + std::string(name) + " '" + *v + "' is not an integer in " + std::to_string(lo) +
                     ".." + std::to_string(hi));
  return out;
}

double double_opt(const Args& a, const char* name, double lo, double hi, double fallback) {
  auto v = a.get(name);
  if (!v) return fallback;
  // parse_decimal never yields inf or nan.
  auto out = parse_decimal(*v);
  if (!out || *out < lo || *out > hi)
    throw UsageError("--" + std::string(name) + " '" + *v + "' is not a number in " + std::to_string(lo) +
                     ".." + std::to_string(hi));
  return *out;
}

// The key comes from a file or stdin, never from the command line (where
// any local user reads it in /proc/PID/cmdline): its first line, trimmed.
Key key_opt(const Args& a) {
  auto path = a.get("key-file");
  if (!path) throw UsageError("--key-file FILE is required (the probe key; '-' reads it from stdin)");
  std::string text;
  text.reserve(2 * 4096);  // no reallocation leaves a copy behind
  if (*path == "-") {
    char buf[4096];
    ssize_t n = 0;
    while (text.size() < 4096) {
      n = ::read(STDIN_FILENO, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    fa::secure_wipe(buf, sizeof buf);
    if (n < 0) throw std::runtime_error(std::string("--key-file -: reading stdin: ") + std::strerror(errno));
  } else {
    auto r = read_text_file(*path, 4096);
    if (!r) throw UsageError("--key-file: " + r.error().message);
    text = std::move(*r);
  }
  std::string_view line(text);
  line = line.substr(0, line.find('\n'));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.remove_suffix(1);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  auto k = Key::parse(line);
  fa::secure_wipe(text.data(), text.size());
  if (!k) throw UsageError("--key-file " + *path + ": " + k.error().message);
  return std::move(*k);
}

// --hca/--gid-index as given; what is missing comes from one discovery pass
// (same config and sysfs root as `inspect`), so the probe runs on the port
// and GID NCCL will use.
Target target_opt(const Args& a) {
  std::optional<HcaPort> hca;
  std::optional<int> gid;
  if (auto v = a.get("hca")) hca = need(parse_hca(*v));
  if (auto v = a.get("gid-index")) gid = need(parse_gid_index(*v));
  if (hca && gid) return Target{*hca, *gid};
  auto cfg = load_config(a.get_or("config", ""));
  if (!cfg) throw UsageError(cfg.error().message);
  probes::InspectOptions io = probes::options_from_config(*cfg);
  if (auto root = a.get("sysfs-root")) io.sysfs_root = *root;
  io.query_sm = false;  // the SM is not needed to pick a port and a GID
  return failed_unless(target_from(probes::discover(io), hca, gid));
}

int serve(const std::vector<std::string>& argv) {
  Args a = need(Args::parse(argv, {{"port", true},
                                   {"bind", true},
                                   {"key-file", true},
                                   {"hca", true},
                                   {"gid-index", true},
                                   {"config", true},
                                   {"sysfs-root", true}}));
  if (!a.positional().empty()) throw UsageError("unexpected argument '" + a.positional()[0] + "'");
  ServeOptions o;
  o.port = static_cast<uint16_t>(uint_opt(a, "port", 0, 65535, kDefaultPort));
  o.bind = a.get_or("bind", o.bind);
  o.key = key_opt(a);
  if (auto root = a.get("sysfs-root")) o.sysfs_root = *root;
  Target t = target_opt(a);
  o.hca = t.hca;
  o.gid_index = t.gid_index;
  // Block the stop signals before the server thread exists so that only
  // sigwait below sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto srv = Server::start(o);
  if (!srv) throw std::runtime_error(srv.error().message);
  std::printf("serving RDMA probes on %s:%u (%s:%u, GID index %d)\n", (*srv)->address().c_str(), (*srv)->port(),
              o.hca.device.c_str(), o.hca.port, o.gid_index);
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  (*srv)->stop();
  auto st = (*srv)->stats();
  std::printf("stopped after %llu sessions (%llu failed, %llu of them unauthenticated)\n",
              static_cast<unsigned long long>(st.sessions), static_cast<unsigned long long>(st.failed),
              static_cast<unsigned long long>(st.rejected));
  return 0;
}

int run(const std::vector<std::string>& argv) {
  Args a = need(Args::parse(argv, {{"peer", true},
                                   {"key-file", true},
                                   {"duration", true},
                                   {"size", true},
                                   {"hca", true},
                                   {"gid-index", true},
                                   {"window", true},
                                   {"latency-iters", true},
                                   {"min-fraction", true},
                                   {"timeout", true},
                                   {"config", true},
                                   {"sysfs-root", true},
                                   {"json", false}}));
  if (!a.positional().empty()) throw UsageError("unexpected argument '" + a.positional()[0] + "'");
  ProbeOptions o;
  auto peer = a.get("peer");
  if (!peer) throw UsageError("--peer HOST[:PORT] is required");
  o.peer = need(parse_peer(*peer));
  if (auto d = a.get("duration")) o.duration_s = need(parse_duration(*d));
  if (auto s = a.get("size")) o.size = need(parse_size(*s));
  o.window = static_cast<uint32_t>(uint_opt(a, "window", 1, 4096, o.window));
  o.latency_iters = static_cast<uint32_t>(uint_opt(a, "latency-iters", 1, 1000000, o.latency_iters));
  o.min_fraction = double_opt(a, "min-fraction", 0, 1, o.min_fraction);
  o.stall_timeout_s = double_opt(a, "timeout", 0.1, 3600, o.stall_timeout_s);
  o.connect_timeout_s = std::min(o.connect_timeout_s, o.stall_timeout_s);
  o.key = key_opt(a);
  // Discovery last: every option is checked before it runs.
  Target t = target_opt(a);
  o.hca = t.hca;
  o.gid_index = t.gid_index;
  ProbeResult r = failed_unless(run_probe(o));
  if (a.has("json")) {
    std::printf("%s\n", to_json(r).dump(2).c_str());
  } else if (r.status == ProbeStatus::kFailed) {
    std::printf("failed: %s: %s\n", std::string(reason_name(r.reason)).c_str(), r.message.c_str());
  } else {
    std::printf("%s %s:%d gid[%d] %s -> %s\n", std::string(status_name(r.status)).c_str(), r.hca.c_str(), r.port,
                r.gid_index, r.gid.c_str(), r.peer.c_str());
    std::printf("  bandwidth  %.3f Gb/s (%llu bytes in %.3f s, %llu-byte writes)\n", r.gbps,
                static_cast<unsigned long long>(r.bytes), r.seconds, static_cast<unsigned long long>(r.size));
    std::printf("  latency    p50 %.2f  p90 %.2f  p99 %.2f  max %.2f us (one-way, %u ping-pongs)\n",
                r.latency_us->p50, r.latency_us->p90, r.latency_us->p99, r.latency_us->max, r.latency_iters);
    if (r.status == ProbeStatus::kDegraded) std::printf("  degraded   %s\n", r.message.c_str());
  }
  return r.status == ProbeStatus::kFailed ? 1 : 0;
}

}  // namespace

int cmd_probe(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "rdma") {
    std::fprintf(stderr, "fabric-agent probe: unknown probe '%s' (accepted: rdma)\n%s", args[0].c_str(), kUsage);
    return 2;
  }
  if (args.size() < 2 || (args[1] != "serve" && args[1] != "run")) {
    std::fprintf(stderr, "fabric-agent probe rdma: expected 'serve' or 'run'\n%s", kUsage);
    return 2;
  }
  std::vector<std::string> rest(args.begin() + 2, args.end());
  try {
    return args[1] == "serve" ? serve(rest) : run(rest);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fabric-agent probe rdma %s: %s\n", args[1].c_str(), e.what());
    return 2;
  }
}

}  // namespace fa::rdma
