// SPDX-License-Identifier: Apache-2.0
// The daemon's state, independent of sockets: the status snapshot and its
// generation, the persisted desired mesh, the token, and the mesh operations.
//
// Threads: the HTTP server reads snapshots from its I/O threads; everything that
// blocks (discovery, mesh apply/show/down, state writes) runs on one worker
// thread, which is what serialises the mesh operations. A mutex still guards
// each operation so that direct callers (tests) get the same guarantee.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "agent/auth.hpp"
#include "agent/metrics.hpp"
#include "agent/nfd.hpp"
#include "agent/seams.hpp"
#include "agent/state.hpp"
#include "common/config.hpp"
#include "common/result.hpp"
#include "pods/login.hpp"
#include "probes/health.hpp"

namespace fa::agent {

class RdmaService;

// What /v1/status says, as values. Only what moves the generation is here:
// no counters, byte counts or handshake times (those change every second and
// live in /metrics and GET /v1/mesh), so a control plane polling with
// If-None-Match pays for a 304 until something real changes.
struct StatusParts {
  bool starting = true;  // before the first discovery: inspect and mesh null
  std::string inspect = "null";  // the inspect document without counters, as JSON text
  bool mesh_available = false;
  std::shared_ptr<const overlay::DesiredMesh> mesh;  // the desired mesh, or none
  bool mesh_live = false;
  std::string mesh_error;
  std::string public_key;
  std::optional<std::string> endpoint;  // where peers reach this node
  std::string interface;                // the configured one, shown while no mesh
  uint16_t listen_port = 0;
  std::string pods = "[]";  // JSON text
  std::string health = R"({"conditions":[],"healthy":true})";  // JSON text
  std::string scorecard = R"({"results":[]})";  // JSON text: the last probe result per peer and rail
  std::vector<std::string> warnings{"starting"};
  bool operator==(const StatusParts& o) const;
};

// One generation of /v1/status. The text is made once, by the first reader.
struct Snapshot {
  uint64_t generation = 0;
  std::string etag;  // W/"<instance>-<generation>"
  StatusParts parts;
  const std::string& body() const;  // JSON object text: inspect, mesh, pods, warnings

 private:
  mutable std::once_flag rendered_;
  mutable std::string body_;
};

// An API failure, turned into {error: {code, message, field}} by the handler.
struct ApiFailure {
  int status = 500;
  std::string code;
  std::string message;
  std::string field;
  nlohmann::json details;  // e.g. every validation error
};

using ApiResult = std::variant<nlohmann::json, ApiFailure>;

// What Core uses of pods/ (pods::PodsRuntime, wired by run.cpp). Callbacks,
// so that Core and its unit tests do not depend on pods/. All empty: no pods.
struct PodsHooks {
  std::function<nlohmann::json()> list;                         // {"pods": [...]}
  std::function<std::optional<std::string>()> interface_netns;  // set while a pod holds the mesh interface
  // After each discovery pass (CDI spec, reaping); returns warnings for /v1/status.
  std::function<std::vector<std::string>(const nlohmann::json& inspect)> on_discovery;
};

class Core {
 public:
  Core(Config cfg, std::unique_ptr<Discovery> discovery, std::unique_ptr<MeshOps> mesh);
  ~Core();

  // Loads persisted state (an unusable file is moved aside), makes sure the
  // WireGuard key exists, adopts/reconciles the persisted mesh and runs the
  // first discovery. Errors here are for a person (startup aborts).
  // `before_first_refresh` runs once the state and key are loaded, before the
  // mesh is applied, without the operation lock: the daemon starts pods/
  // there, which adopts a pod still holding the mesh interface, so the apply
  // goes into that pod's namespace instead of creating a second interface on
  // the host.
  Status start(const std::function<void()>& before_first_refresh = {});

  // Rediscovery + reconcile (the interface brought back to the desired
  // mesh). Moves the generation only when the status changed; wakes
  // long-pollers when it does.
  void refresh();

  std::shared_ptr<const Snapshot> snapshot() const;
  // The last discovery's `inspect --json` document, counters included.
  std::shared_ptr<const nlohmann::json> inspect_document() const;
  std::string render_status(const Snapshot& s) const;  // the /v1/status body

  // Long-poll: `fn` is called (on the thread that moved the generation) once
  // per generation change until unsubscribed.
  uint64_t subscribe(std::function<void()> fn);
  void unsubscribe(uint64_t id);

  // Blocking, serialised. Each is one plain sequence: validate, persist the
  // new desired state, apply it, publish; a failed apply puts the previous
  // state back.
  ApiResult get_mesh();
  ApiResult put_mesh(const nlohmann::json& doc);    // the whole desired mesh
  ApiResult patch_mesh(const nlohmann::json& doc);  // some peers of the running mesh
  ApiResult delete_mesh();  // also forgets the login material
  // The rental's SSH login material (pods/login.hpp) for the mesh's cluster,
  // kept 0600 in <state_dir>/login.json until DELETE /v1/login or /v1/mesh.
  ApiResult get_login();
  ApiResult put_login(const nlohmann::json& doc);
  ApiResult delete_login();
  // What the OCI hook writes into a pod: the material and the known_hosts
  // pattern, when there is a mesh and material for it. Under the operation
  // lock, like desired_held.
  std::optional<nlohmann::json> login_held() const;
  // {"pods": [...]}: the registrations as of their last change.
  nlohmann::json pods() const;

  // Pods: hooks are set once, after start(); the next refresh() uses them.
  void set_pods(PodsHooks h);
  // Runs fn under the lock every mesh operation takes (a pod registration
  // moves wg0: it must never interleave with a mesh operation).
  nlohmann::json run_serialized(const std::function<nlohmann::json()>& fn);
  // The desired mesh. Only from inside run_serialized or a PodsHooks
  // callback: the caller already holds the operation lock.
  std::optional<overlay::DesiredMesh> desired_held() const;
  std::string metrics_text();

  // Token: replaced on SIGHUP.
  void set_token(Token t);
  AuthResult check_token(std::string_view authorization) const;

  Config config() const;
  void set_config(Config c);
  // SIGHUP: new config (values read per use) and discovery built from it.
  void reconfigure(Config c, std::unique_ptr<Discovery> discovery);

  RdmaService& rdma() { return *rdma_; }
  ApiMetrics& api_metrics() { return api_metrics_; }
  const std::string& instance() const { return instance_; }
  std::chrono::system_clock::time_point started() const { return started_; }
  bool mesh_available() const { return mesh_ != nullptr; }

 private:
  std::variant<overlay::DesiredMesh, ApiFailure> admit_locked(const Config& cfg, const nlohmann::json& doc);
  ApiResult change_locked(overlay::DesiredMesh next, const overlay::PeerChanges* peers);
  std::optional<std::string> netns_locked(const overlay::DesiredMesh& m);
  const overlay::DesiredMesh& placed_locked(const overlay::DesiredMesh& m, std::optional<overlay::DesiredMesh>& copy);
  StatusParts parts_locked(bool live, const std::string& error);
  void publish_locked(StatusParts parts);
  void recover_locked(const Config& cfg);
  void scorecard_changed();
  std::string key_path() const;
  std::string login_path() const;
  Status forget_login_locked();

  mutable std::mutex cfg_mu_;
  Config cfg_;
  std::unique_ptr<Discovery> discovery_;
  std::unique_ptr<MeshOps> mesh_;

  // Everything below under op_mu_ (held for the length of one blocking op).
  std::mutex op_mu_;
  std::unique_ptr<StateStore> store_;  // made by start()
  std::shared_ptr<const overlay::DesiredMesh> desired_;
  std::optional<pods::Login> login_;
  std::string inspect_text_ = "null";
  std::optional<std::string> fabric_address_;  // RoCE: the fabric netdev's address
  std::vector<std::string> warnings_;
  bool live_ = false;
  std::string live_error_;
  std::string public_key_;
  PodsHooks pods_;
  bool discovered_ = false;
  probes::Health health_;
  std::vector<probes::Condition> conditions_;
  nfd::FeatureFile nfd_file_;  // node labels for Kubernetes

  mutable std::mutex snap_mu_;
  std::shared_ptr<const Snapshot> snap_;
  std::shared_ptr<const nlohmann::json> inspect_full_;  // with counters, for /metrics

  std::mutex sub_mu_;
  std::map<uint64_t, std::function<void()>> subs_;
  uint64_t next_sub_ = 1;

  mutable std::mutex token_mu_;
  Token token_;

  ApiMetrics api_metrics_;
  std::unique_ptr<RdmaService> rdma_;
  std::string instance_;
  std::chrono::system_clock::time_point started_;
  std::atomic<uint64_t> refreshes_{0}, refresh_failures_{0};
  std::atomic<double> last_refresh_seconds_{0};
};

}  // namespace fa::agent
