// SPDX-License-Identifier: Apache-2.0
// The `mesh` subcommand: a thin edge over overlay.hpp that turns Results into
// messages for a person and exit codes (0 ok, 1 failed, 2 bad usage/input).
#include "overlay/cli.hpp"

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
  if (const char* lvl = std::getenv("FA_LOG_LEVEL")) set_log_level(lvl);
  auto text = read_text_file(*file, 16 * 1024 * 1024);
  if (!text) {
    std::fprintf(stderr, "fabric-agent mesh apply: %s\n", text.error().message.c_str());
    return 1;
  }
  ParseOptions po;
  po.overlay_cidr = a->get_or("overlay-cidr", po.overlay_cidr);
  auto parsed = parse_desired_text(*text, po);
  if (!parsed.ok()) {
    for (const auto& e : parsed.errors) std::fprintf(stderr, "%s: %s\n", file->c_str(), e.str().c_str());
    std::fprintf(stderr, "fabric-agent mesh apply: %zu error(s), nothing changed\n", parsed.errors.size());
    return 2;
  }
  auto r = apply(*parsed.value, opt);
  if (!r) {
    std::fprintf(stderr, "fabric-agent mesh apply: %s\n", r.error().message.c_str());
    return 1;
  }
  if (a->has("json")) {
    // What the interface holds now, read back, with what this apply changed.
    ShowOptions so;
    so.netns = parsed.value->netns;
    so.uapi_dir = opt.uapi_dir;
    auto now = show(parsed.value->interface, so);
    if (!now) {
      std::fprintf(stderr, "fabric-agent mesh apply: applied, but %s\n", now.error().message.c_str());
      return 1;
    }
    auto doc = to_json(*now);
    doc["changes"] = to_json(*r)["changes"];
    std::printf("%s\n", doc.dump(2).c_str());
  } else {
    std::printf("%s\n", summary_line(*r).c_str());
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
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
    std::printf("%s\n", to_json(*r).dump(2).c_str());
  else
    print_human(to_json(*r));
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
