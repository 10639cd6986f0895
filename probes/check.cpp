// SPDX-License-Identifier: Apache-2.0
#include "probes/check.hpp"

#include <cstdio>
#include <ctime>

#include "common/cli.hpp"
#include "probes/cli.hpp"

namespace fa::probes {

HealthConfig health_from_config(const Config& c) {
  HealthConfig h;
  h.flap_down_seconds = c.health.flap_down.count();
  h.flap_count = c.health.flap_count;
  h.flap_window_seconds = c.health.flap_window.count();
  h.carrier_losses = c.health.carrier_losses;
  h.carrier_window_seconds = c.health.carrier_window.count();
  h.symbol_errors_per_hour = c.health.symbol_errors_per_hour;
  h.handshake_seconds = c.health.handshake_timeout.count();
  h.hold_seconds = c.health.hold.count();
  h.pinned = c.fabric.hcas;
  return h;
}

int cmd_check(const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, {{"sysfs-root", true}, {"config", true}, {"json", false}, {"help", false}});
  if (!args) {
    std::fprintf(stderr, "fabric-agent check: %s\n", args.error().message.c_str());
    return 2;
  }
  if (args->has("help")) {
    std::printf(
        "usage: fabric-agent check [--sysfs-root DIR] [--config FILE] [--json]\n"
        "exit 0: healthy; 1: a condition holds (one line each, naming the device); 2: usage or config error\n");
    return 0;
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "fabric-agent check: unexpected argument '%s'\n", args->positional().front().c_str());
    return 2;
  }
  auto cfg = load_config(args->get_or("config", ""));
  if (!cfg) {
    std::fprintf(stderr, "fabric-agent check: %s\n", cfg.error().message.c_str());
    return 2;
  }
  InspectOptions opts = options_from_config(*cfg);
  if (auto root = args->get("sysfs-root")) opts.sysfs_root = *root;
  Report r = discover(opts);
  auto conditions = snapshot_conditions(r, opts.sysfs_root, health_from_config(*cfg), std::time(nullptr));
  if (args->has("json")) {
    std::printf("%s\n", nlohmann::json{{"healthy", conditions.empty()}, {"conditions", to_json(conditions)}}
                            .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    for (const auto& c : conditions) std::printf("%s\n", condition_line(c).c_str());
  }
  return conditions.empty() ? 0 : 1;
}

}  // namespace fa::probes
