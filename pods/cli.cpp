// SPDX-License-Identifier: Apache-2.0
#include "pods/cli.hpp"

#include <syslog.h>
#include <unistd.h>

#include <cstdio>

#include "common/cli.hpp"
#include "common/config.hpp"
#include "common/fs.hpp"
#include "pods/pods.hpp"
#include "probes/cli.hpp"
#include "probes/inspect.hpp"

namespace fa::pods {

namespace {

int cdi_usage(FILE* out) {
  std::fprintf(out,
               "usage: fabric-agent cdi generate [--output DIR] [--stdout] [--config FILE] [--sysfs-root DIR]\n"
               "                                 [--dev-root DIR] [--socket PATH] [--hook-path PATH]\n"
               "  writes %s/%s (CDI kind %s, device %s)\n",
               kDefaultCdiDir, cdi_spec_filename().c_str(), kCdiKind, kCdiDevice);
  return out == stdout ? 0 : 2;
}

}  // namespace

int cmd_cdi(const std::vector<std::string>& argv) {
  auto a = Args::parse(argv, {{"output", true},
                              {"stdout", false},
                              {"config", true},
                              {"sysfs-root", true},
                              {"dev-root", true},
                              {"socket", true},
                              {"hook-path", true},
                              {"help", false}});
  if (!a) {
    std::fprintf(stderr, "fabric-agent cdi: %s\n", a.error().message.c_str());
    return 2;
  }
  if (a->has("help")) return cdi_usage(stdout);
  if (a->positional().size() != 1 || a->positional()[0] != "generate") return cdi_usage(stderr);
  auto cfg = load_config(a->get_or("config", ""));
  if (!cfg) {
    std::fprintf(stderr, "fabric-agent cdi generate: %s\n", cfg.error().message.c_str());
    return 2;
  }
  probes::InspectOptions io = probes::options_from_config(*cfg);
  if (auto r = a->get("sysfs-root")) io.sysfs_root = *r;
  io.query_sm = false;  // the spec needs ports and the NCCL env, not the subnet manager
  nlohmann::json inspect = probes::to_json(probes::discover(io));

  auto uverbs = uverbs_by_hca(io.sysfs_root);
  if (!uverbs) {
    std::fprintf(stderr, "fabric-agent cdi generate: %s\n", uverbs.error().message.c_str());
    return 1;
  }
  CdiOptions co;
  co.dev_root = a->get_or("dev-root", kDefaultDevRoot);
  co.socket = a->get_or("socket", kDefaultSocket);
  if (auto h = a->get("hook-path")) {
    co.hook_path = *h;
  } else {
    // Hooks run without PATH: the spec names this very binary by absolute path.
    auto self = read_link("/proc/self/exe");
    if (!self) {
      std::fprintf(stderr, "fabric-agent cdi generate: %s (pass --hook-path)\n", self.error().message.c_str());
      return 1;
    }
    co.hook_path = *self;
  }
  co.runtime_path = runtime_beside(co.hook_path);
  co.nested_spec = nested_spec_path(co.socket);
  auto spec = build_cdi_spec(inspect, *uverbs, co);
  if (!spec) {
    std::fprintf(stderr, "fabric-agent cdi generate: %s\n", spec.error().message.c_str());
    return 2;
  }
  for (const auto& w : spec->warnings) std::fprintf(stderr, "fabric-agent cdi generate: warning: %s\n", w.c_str());
  if (a->has("stdout")) {
    std::printf("%s\n", spec->doc.dump(2).c_str());
    return 0;
  }
  // The pod's spec first: the host spec mounts it.
  if (auto s = write_nested_spec(co.nested_spec, spec->nested); !s) {
    std::fprintf(stderr, "fabric-agent cdi generate: %s\n", s.error().message.c_str());
    return 1;
  }
  auto path = write_cdi_spec(a->get_or("output", kDefaultCdiDir), spec->doc);
  if (!path) {
    std::fprintf(stderr, "fabric-agent cdi generate: %s\n", path.error().message.c_str());
    return 1;
  }
  std::printf("%s\n", path->c_str());
  return 0;
}

int cmd_oci_hook(const std::vector<std::string>& argv) {
  auto a = Args::parse(argv, {{"socket", true}, {"dev-root", true}, {"help", false}});
  if (!a) {
    std::fprintf(stderr, "fabric-agent oci-hook: %s\n", a.error().message.c_str());
    return 2;
  }
  if (a->has("help") || a->positional().size() != 1) {
    std::fprintf(a->has("help") ? stdout : stderr,
                 "usage: fabric-agent oci-hook create-runtime|poststop [--socket PATH] [--dev-root DIR]\n"
                 "  run by the container runtime (CDI hooks); the OCI state is read from stdin\n");
    return a->has("help") ? 0 : 2;
  }
  // The state is a few hundred bytes; a cap keeps a broken runtime from
  // making us read forever.
  std::string state;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    state.append(buf, n);
    if (state.size() > (1u << 20)) {
      std::fprintf(stderr, "fabric-agent oci-hook: OCI state on stdin is larger than 1 MiB\n");
      return 1;
    }
  }
  HookOptions ho;
  ho.socket = a->get_or("socket", kDefaultSocket);
  ho.dev_root = a->get_or("dev-root", kDefaultDevRoot);
  HookOutcome out = run_oci_hook(a->positional()[0], state, ho);
  if (!out.message.empty()) {
    std::fprintf(stderr, "%s\n", out.message.c_str());
    // Runtimes differ in what they do with a hook's stderr (runc puts it in
    // its error, crun drops it unless annotated run.oci.hooks.stderr), so the
    // line goes to the system log too, where the operator finds it.
    ::openlog("fabric-agent-oci-hook", LOG_PID, LOG_DAEMON);
    ::syslog(out.exit_code ? LOG_WARNING : LOG_NOTICE, "%s", out.message.c_str());
    ::closelog();
  }
  return out.exit_code;
}

}  // namespace fa::pods
