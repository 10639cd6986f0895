// SPDX-License-Identifier: Apache-2.0
// Everything the daemon (`fabric-agent run`) needs from pods/, in one object,
// so that wiring it into agent/ is a handful of lines:
//
//   auto pods = pods::PodsRuntime::start({.state_dir = cfg.state_dir, ...});  // at start, before
//                                         // the mesh is applied: it adopts the pods that hold wg0
//   pods->on_discovery(inspect);          // after each discovery pass (CDI spec, reaping)
//   pods->list()                          // GET /v1/pods body; "pods" of /v1/status
//   pods->interface_netns()               // netns to pass to mesh apply/show while a pod holds wg0
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "pods/pods.hpp"

namespace fa::pods {

struct PodsRuntimeOptions {
  std::string state_dir;                 // registry: <state_dir>/pods.json
  std::string socket = kDefaultSocket;   // where hooks register
  std::string cdi_dir = kDefaultCdiDir;  // "" = do not write a CDI spec
  std::string sysfs_root = "/sys";       // HCA -> uverbsN, fabric port states
  std::string dev_root = kDefaultDevRoot;
  std::string hook_path;                 // "" = this binary (/proc/self/exe)
  std::string hook_dir;                  // "" = none; else the hooks run a copy of the agent kept there (copy_for_host)
  std::string hook_loader;               // set by start() from hook_dir: CdiOptions::hook_loader
  std::function<nlohmann::json()> inspect;       // last `inspect --json` document
  std::function<std::optional<overlay::DesiredMesh>()> desired_mesh;  // the desired mesh, if any
  std::function<void()> changed;                 // registrations changed
  std::function<std::optional<nlohmann::json>()> login;  // SSH login material for the hook (ServiceDeps::login)
  // Runs a registration under the daemon's own serialisation (the lock its
  // mesh operations take), so a PUT /v1/mesh never races a move. Default: direct.
  std::function<nlohmann::json(const std::function<nlohmann::json()>&)> serialize;
  std::unique_ptr<WgMover> mover;  // null = make_overlay_mover()
};

class PodsRuntime {
 public:
  // Fails only before anything was reconciled (the registry unreadable). A
  // socket that cannot be served is not a failure: the runtime still holds
  // the namespaces of the pods it adopted (the daemon's mesh must go there,
  // not into a second wg0 on the host), says why in on_discovery's warnings
  // and tries the socket again at each pass.
  static Result<std::unique_ptr<PodsRuntime>> start(PodsRuntimeOptions o);
  ~PodsRuntime();

  // Rewrites the CDI spec when it differs from the file (first call, discovery change, file removed),
  // reaps pods that died without a poststop, serves the socket if it could
  // not be served before. Returns the status warnings: the spec's, or why it
  // could not be written, and why the socket is not served. Each spec warning
  // is logged once when it appears (warn) and once when it clears (info), not
  // on every pass; the socket's when it fails first (error) and when it serves.
  std::vector<std::string> on_discovery(const nlohmann::json& inspect);
  nlohmann::json list() { return svc_->list(); }
  std::optional<std::string> interface_netns() { return svc_->interface_netns(); }
  PodService& service() { return *svc_; }

 private:
  PodsRuntime() = default;
  Result<std::vector<std::string>> write_spec(const nlohmann::json& inspect);
  bool serve();               // the socket server, registrations handled by svc_; sets socket_error_
  std::string socket_error_;  // why the socket is not served ("" = served)
  PodsRuntimeOptions opt_;
  std::vector<std::string> logged_;  // warnings as of the last pass, to log changes only
  std::unique_ptr<WgMover> mover_;
  std::unique_ptr<PodService> svc_;
  std::unique_ptr<PodSocketServer> srv_;
};

}  // namespace fa::pods
