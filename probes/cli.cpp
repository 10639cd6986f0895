// SPDX-License-Identifier: Apache-2.0
#include "probes/cli.hpp"

#include <cstdio>

#include "common/cli.hpp"
#include "common/config.hpp"
#include "probes/inspect.hpp"

namespace fa::probes {

InspectOptions options_from_config(const Config& c) {
  InspectOptions o;
  o.sysfs_root = c.sysfs_root;
  o.provider_id = c.provider_id;
  o.fabric_netdev = c.fabric.netdev;
  o.hcas = c.fabric.hcas;
  o.lldpd_socket = c.fabric.lldpd_socket;
  o.socket_ifname = c.overlay.interface;
  return o;
}

int cmd_inspect(const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, {{"sysfs-root", true}, {"proc-root", true}, {"config", true}, {"json", false}, {"help", false}});
  if (!args) {
    std::fprintf(stderr, "fabric-agent inspect: %s\n", args.error().message.c_str());
    return 2;
  }
  if (args->has("help")) {
    std::printf("usage: fabric-agent inspect [--sysfs-root DIR] [--proc-root DIR] [--config FILE] [--json]\n");
    return 0;
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "fabric-agent inspect: unexpected argument '%s'\n",
                 args->positional().front().c_str());
    return 2;
  }
  // Without --config the default config file is read if it exists, so an
  // operator's provider_id and fabric pins apply to a bare `inspect` too.
  auto cfg = load_config(args->get_or("config", ""));
  if (!cfg) {
    std::fprintf(stderr, "fabric-agent inspect: %s\n", cfg.error().message.c_str());
    return 2;
  }
  InspectOptions opts = options_from_config(*cfg);
  if (auto root = args->get("sysfs-root")) opts.sysfs_root = *root;
  if (auto root = args->get("proc-root")) opts.proc_root = *root;

  Report r = discover(opts);
  if (args->has("json")) {
    std::printf("%s\n", to_json(r).dump(2).c_str());
  } else {
    std::fputs(to_table(r).c_str(), stdout);
  }
  return 0;
}

}  // namespace fa::probes
