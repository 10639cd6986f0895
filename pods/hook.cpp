// SPDX-License-Identifier: Apache-2.0
// `fabric-agent oci-hook <stage>`: what the runtime runs for the CDI spec's
// hooks. The runtime gives the container state on stdin and no PATH; whatever
// we print on stderr is what the user sees when we refuse.
//
// create-runtime, in order, so a refusal or a failure leaves nothing behind:
//   1. parse the state and the bundle's config.json (no side effect)
//   2. whole-machine check against the host's GPU nodes (no side effect)
//   3. RLIMIT_MEMLOCK -> unlimited on the container's pid (only that process;
//      if the pod is refused next, the runtime kills it anyway)
//   4. register with the daemon, which checks exclusivity and the fabric
//      ports, then moves wg0 in; it persists the registration last
//   5. write the NCCL variables and the rental's SSH login into the
//      container's root (furnish_rootfs, pods/login.hpp)
#include <sys/resource.h>

#include "common/fs.hpp"
#include "pods/login.hpp"
#include "pods/pods.hpp"

namespace fa::pods {

using nlohmann::json;

namespace {

HookOutcome failed(int code, std::string msg) { return {code, std::move(msg)}; }

std::string daemon_error(const json& reply) {
  if (reply.contains("error") && reply["error"].is_object()) return reply["error"].value("message", "unknown error");
  return "unknown error";
}

}  // namespace

Result<std::string> raise_memlock(pid_t pid) {
  const std::string who = "RLIMIT_MEMLOCK of pid " + std::to_string(pid);
  rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  if (::prlimit(pid, RLIMIT_MEMLOCK, &unlimited, nullptr) == 0) return std::string();
  int e = errno;
  rlimit cur{};
  // Raising the hard limit needs CAP_SYS_RESOURCE, which a runtime run in a
  // restricted sandbox may lack: then the soft limit goes up to the hard one,
  // and the runtime log says so (the pod still gets the fabric).
  if (e != EPERM || ::prlimit(pid, RLIMIT_MEMLOCK, nullptr, &cur) != 0)
    return Error::from_errno("raise " + who, e);
  cur.rlim_cur = cur.rlim_max;
  if (::prlimit(pid, RLIMIT_MEMLOCK, &cur, nullptr) != 0) return Error::from_errno("raise " + who);
  return who + " raised only to its hard limit (" + std::to_string(cur.rlim_max) +
         " bytes): no CAP_SYS_RESOURCE to make it unlimited; large ibv_reg_mr calls will fail";
}

namespace {

HookOutcome create_runtime(const OciState& st, const HookOptions& opt) {
  if (st.pid <= 0) return failed(1, "fabric-agent oci-hook create-runtime: OCI state has no container pid");
  if (!process_start_time(st.pid, opt.proc_root))
    return failed(1, "fabric-agent oci-hook create-runtime: container pid " + std::to_string(st.pid) + " is gone");
  auto text = read_text_file(st.bundle + "/config.json", 16 * 1024 * 1024);
  if (!text) return failed(1, "fabric-agent oci-hook create-runtime: bundle: " + text.error().message);
  auto cfg = parse_oci_config(*text);
  if (!cfg) return failed(1, "fabric-agent oci-hook create-runtime: " + st.bundle + "/" + cfg.error().message);
  auto gpus = scan_host_gpus(opt.dev_root);
  if (!gpus) return failed(1, "fabric-agent oci-hook create-runtime: GPU nodes: " + gpus.error().message);
  if (auto why = check_whole_machine(*gpus, *cfg)) return failed(1, "fabric-agent: refused: " + *why);

  // ibv_reg_mr pins memory; under Docker's default 64 KiB-8 MiB memlock it
  // fails, and CDI has no way to say rlimits.
  auto raised = raise_memlock(st.pid);
  if (!raised) return failed(1, "fabric-agent oci-hook create-runtime: " + raised.error().message);
  std::string warning = raised->empty() ? std::string() : "fabric-agent oci-hook create-runtime: warning: " + *raised;

  auto reply = pod_request(opt.socket, {{"op", "register"}, {"id", st.id}, {"pid", st.pid}, {"bundle", st.bundle}});
  if (!reply) return failed(1, "fabric-agent oci-hook create-runtime: " + reply.error().message);
  if (!reply->value("ok", false)) {
    std::string code = (*reply)["error"].is_object() ? (*reply)["error"].value("code", "") : "";
    return failed(1, std::string(code == "refused" ? "fabric-agent: refused: " : "fabric-agent oci-hook create-runtime: ") +
                         daemon_error(*reply));
  }
  // The NCCL variables for SSH and login sessions, the rental's SSH login
  // (pods/login.hpp). A failure fails the container: the runtime kills it
  // and its poststop gives wg0 back.
  if (auto s = furnish_rootfs(st.bundle, *text, cfg->env, *reply); !s)
    return failed(1, "fabric-agent oci-hook create-runtime: " + s.error().message);
  return {0, warning};
}

HookOutcome poststop(const OciState& st, const HookOptions& opt) {
  auto reply = pod_request(opt.socket, {{"op", "unregister"}, {"id", st.id}});
  if (!reply) return failed(1, "fabric-agent oci-hook poststop: " + reply.error().message);
  if (!reply->value("ok", false)) return failed(1, "fabric-agent oci-hook poststop: " + daemon_error(*reply));
  return {};
}

}  // namespace

HookOutcome run_oci_hook(const std::string& stage, std::string_view state_json, const HookOptions& opt) {
  if (stage != "create-runtime" && stage != "poststop")
    return failed(2, "fabric-agent oci-hook: stage `" + stage + "' is unknown (accepted: create-runtime, poststop)");
  auto st = parse_oci_state(state_json);
  if (!st) return failed(1, "fabric-agent oci-hook " + stage + ": " + st.error().message);
  return stage == "create-runtime" ? create_runtime(*st, opt) : poststop(*st, opt);
}

}  // namespace fa::pods
