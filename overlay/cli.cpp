// SPDX-License-Identifier: Apache-2.0
// The `mesh` subcommand: a thin edge over overlay.hpp that turns Results into
// messages for a person and exit codes (0 ok, 1 failed, 2 bad usage/input).
#include "overlay/cli.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/cli.hpp"
#include "common/fs.hpp"
#include "common/log.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

namespace {

int usage(FILE* out) {
  std::fprintf(out,
               "usage: fabric-agent mesh apply --file FILE [--backend auto|kernel|userspace] [--json]\n"
               "       fabric-agent mesh show [--interface IF] [--netns NS] [--json]\n"
               "       fabric-agent mesh down [--interface IF] [--netns NS]\n");
  return out == stdout ? 0 : 2;
}

void print_human(const nlohmann::json& s) {
  std::printf("interface: %s\n", s.value("interface", "").c_str());
  std::printf("  backend: %s\n", s.value("backend", "").c_str());
  std::printf("  public key: %s\n", s.value("public_key", "").c_str());
  std::printf("  listening port: %d\n", s.value("listen_port", 0));
  std::printf("  address: %s\n", s.value("address", "").c_str());
  for (const auto& p : s.value("peers", nlohmann::json::array())) {
    std::printf("\npeer: %s\n", p.value("public_key", "").c_str());
    if (p.contains("endpoint") && p["endpoint"].is_string())
      std::printf("  endpoint: %s\n", p["endpoint"].get<std::string>().c_str());
    std::string ips;
    for (const auto& a : p.value("allowed_ips", nlohmann::json::array()))
      ips += (ips.empty() ? "" : ", ") + a.get<std::string>();
    std::printf("  allowed ips: %s\n", ips.empty() ? "(none)" : ips.c_str());
    std::printf("  latest handshake (unix): %lld\n",
                static_cast<long long>(p.value("last_handshake_unix", 0LL)));
    std::printf("  transfer: %llu B received, %llu B sent\n",
                static_cast<unsigned long long>(p.value("rx_bytes", 0ULL)),
                static_cast<unsigned long long>(p.value("tx_bytes", 0ULL)));
  }
}

// A desired-state file at least this long is read while a thread reads the
// kernel's device (~60 peers of JSON).
constexpr size_t kKernelReadThreadMinBytes = 8 * 1024;

int do_apply(const std::vector<std::string>& argv) {
  auto a = Args::parse(argv, {{"file", true}, {"backend", true}, {"json", false}, {"overlay-cidr", true}});
  if (!a) {
    std::fprintf(stderr, "fabric-agent mesh apply: %s\n", a.error().message.c_str());
    return 2;
  }
  auto file = a->get("file");
  if (!file) {
    std::fprintf(stderr, "fabric-agent mesh apply: --file FILE is required\n");
    return 2;
  }
  ApplyOptions opt;
  if (auto b = a->get("backend")) {
    auto be = parse_backend(*b);
    if (!be) {
      std::fprintf(stderr, "fabric-agent mesh apply: --backend: %s\n", be.error().message.c_str());
      return 2;
    }
    opt.backend = *be;
  }
  opt.report = a->has("json");
  ApplySummary sum;
  opt.summary = &sum;      // without --json: the summary line's fields, no document
  opt.log_change = false;  // the summary (or --json's "changes") carries the counts
  if (const char* lvl = std::getenv("FA_LOG_LEVEL")) set_log_level(lvl);
  // The clock is read for the debug line only when it is written.
  const bool debug = fa::log_enabled(spdlog::level::debug);
  const auto t0 = debug ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  ParseResult parsed;
  EarlyGet early;
  {  // the file's text lives only while it is parsed: the apply reuses its memory
    auto text = read_text_file(*file, 16 * 1024 * 1024);
    if (!text) {
      std::fprintf(stderr, "fabric-agent mesh apply: %s\n", text.error().message.c_str());
      return 1;
    }
    ParseOptions po;
    po.overlay_cidr = a->get_or("overlay-cidr", po.overlay_cidr);
    // As soon as the interface name is read, ask for the device: its
    // wireguard-go (if any) answers while the rest of the file is parsed and
    // validated (a one-peer change in a 250-peer mesh: ~0.8 ms of its 3 ms);
    // otherwise a thread reads the kernel link and device meanwhile, if the
    // file is long enough to hide it: starting a thread costs ~0.8 ms in the
    // lab's emulated VM (tens of microseconds on hardware), as long as ~50
    // peers take to parse there. For a shorter file only wireguard-go is
    // asked early and apply() reads the kernel itself.
    const bool thread_pays = text->size() >= kKernelReadThreadMinBytes;
    po.on_interface = [&](const std::string& name) {
      if (thread_pays)
        early = EarlyGet::start(name, opt.uapi_dir, opt.backend);
      else if (opt.backend != Backend::Kernel)
        early = EarlyGet::start(name, opt.uapi_dir, Backend::Userspace);  // wireguard-go only
    };
    opt.early_get = &early;
    // JSON is YAML, so the YAML parser would read both; a JSON document goes
    // through the JSON parser, several times faster on a 1000-peer file.
    auto first = text->find_first_not_of(" \t\r\n");
    if (first != std::string::npos && (*text)[first] == '{') {
      try {
        parsed = parse_desired_json(*text, po);
      } catch (const nlohmann::json::parse_error& e) {
        std::fprintf(stderr, "%s: JSON syntax error at byte %zu: %s\n", file->c_str(), e.byte, e.what());
        return 2;
      }
    } else {
      parsed = parse_desired_yaml(*text, po);
    }
  }
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::fprintf(stderr, "%s: %s\n", file->c_str(), e.str().c_str());
    std::fprintf(stderr, "fabric-agent mesh apply: %zu error(s), nothing changed\n", parsed.errors.size());
    return 2;
  }
  if (debug)
    fa::logger("overlay")->debug(
        "{}: read and validated {} peers in {:.2f} ms", file->c_str(), parsed.mesh->peers.size(),
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  auto r = apply(*parsed.mesh, opt);
  if (!r) {
    std::fprintf(stderr, "fabric-agent mesh apply: %s\n", r.error().message.c_str());
    return 1;
  }
  // One write(2) of the whole answer, not stdio: its first use costs an
  // fstat, a buffer and printf's code, which nothing else here runs.
  std::string out;
  if (a->has("json")) {
    out = r->dump(2);
  } else {
    // The time in hundredths of a millisecond, in integers.
    const long long cs = (sum.elapsed_us + 5) / 10;
    out = sum.interface + ": backend " + backend_name(sum.backend) + " (" + sum.backend_reason + "); " +
          (sum.created ? "created" : "adopted") + "; peers +" + std::to_string(sum.peers_added) + " -" +
          std::to_string(sum.peers_removed) + " ~" + std::to_string(sum.peers_updated) + "; " +
          std::to_string(cs / 100) + (cs % 100 < 10 ? ".0" : ".") + std::to_string(cs % 100) + " ms";
  }
  out += '\n';
  if (auto s = write_all(STDOUT_FILENO, out, "write to stdout"); !s) {
    std::fprintf(stderr, "fabric-agent mesh apply: applied, but %s\n", s.error().message.c_str());
    return 1;
  }
  return 0;
}

int do_show(const std::vector<std::string>& argv) {
  auto a = Args::parse(argv, {{"interface", true}, {"netns", true}, {"json", false}});
  if (!a) {
    std::fprintf(stderr, "fabric-agent mesh show: %s\n", a.error().message.c_str());
    return 2;
  }
  ShowOptions opt;
  opt.netns = a->get("netns");
  auto r = show(a->get_or("interface", "wg0"), opt);
  if (!r) {
    std::fprintf(stderr, "fabric-agent mesh show: %s\n", r.error().message.c_str());
    return 1;
  }
  if (a->has("json"))
    std::printf("%s\n", r->dump(2).c_str());
  else
    print_human(*r);
  return 0;
}

int do_down(const std::vector<std::string>& argv) {
  auto a = Args::parse(argv, {{"interface", true}, {"netns", true}});
  if (!a) {
    std::fprintf(stderr, "fabric-agent mesh down: %s\n", a.error().message.c_str());
    return 2;
  }
  DownOptions opt;
  opt.netns = a->get("netns");
  auto r = down(a->get_or("interface", "wg0"), opt);
  if (!r) {
    std::fprintf(stderr, "fabric-agent mesh down: %s\n", r.error().message.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int cmd_mesh(const std::vector<std::string>& args) {
  if (args.empty()) return usage(stderr);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "apply") return do_apply(rest);
  if (args[0] == "show") return do_show(rest);
  if (args[0] == "down") return do_down(rest);
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") return usage(stdout);
  std::fprintf(stderr, "fabric-agent mesh: unknown action '%s' (accepted: apply, show, down)\n",
               args[0].c_str());
  return 2;
}

}  // namespace fa::overlay
