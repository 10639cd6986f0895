// SPDX-License-Identifier: Apache-2.0
// The daemon's state, independent of sockets: the status snapshot and its
// generation, the persisted desired mesh, the token, and the mesh operations.
//
// Threads: the HTTP server reads snapshots from its I/O thread; everything that
// blocks (discovery, mesh apply/show/down, state writes) runs on one worker
// thread, which is what serialises PUT/DELETE /v1/mesh. A mutex still guards
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
#include "agent/seams.hpp"
#include "agent/state.hpp"
#include "common/config.hpp"
#include "common/result.hpp"

namespace fa::agent {

class RdmaService;

// What /v1/status serves for one generation. The body holds only what moves
// the generation (no counters, byte counts or handshake times: those change
// every second and live in /metrics and GET /v1/mesh), so a control plane
// polling with If-None-Match pays for a 304 until something real changes.
struct Snapshot {
  uint64_t generation = 0;
  std::string etag;         // W/"<instance>-<generation>"
  std::string stable_body;  // JSON object text: inspect, mesh, pods, warnings
  nlohmann::json inspect;   // full inspect document (with counters), for /metrics
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

  // Loads persisted state (a corrupt file is moved aside), makes sure the
  // WireGuard key exists, adopts/reconciles the persisted mesh and runs the
  // first discovery. Errors here are for a person (startup aborts).
  // `before_first_refresh` runs once the state and key are loaded, before the
  // mesh is applied, without the operation lock: the daemon starts pods/
  // there, which adopts a pod still holding the mesh interface, so the apply
  // goes into that pod's namespace (mesh_netns) instead of creating a second
  // interface on the host; the first generation carries the CDI warnings and
  // the pods.
  Status start(const std::function<void()>& before_first_refresh = {});

  // Rediscovery + reconcile. Moves the generation only when the stable
  // status changed; wakes long-pollers when it does.
  void refresh();

  std::shared_ptr<const Snapshot> snapshot() const;
  std::string render_status(const Snapshot& s) const;  // the /v1/status body

  // Long-poll: `fn` is called (on the thread that moved the generation) once
  // per generation change until unsubscribed.
  uint64_t subscribe(std::function<void()> fn);
  void unsubscribe(uint64_t id);

  // Blocking, serialised.
  ApiResult get_mesh();
  ApiResult put_mesh(nlohmann::json doc);
  // PUT /v1/mesh's body as it came: nullopt when it is not of the usual shape
  // (MeshOps::validate_text), and the caller then parses it for put_mesh().
  std::optional<ApiResult> put_mesh_text(std::string_view body);
  ApiResult delete_mesh();
  nlohmann::json pods() const;

  // Pods: hooks are set once, after start(); the next refresh() uses them.
  void set_pods(PodsHooks h);
  // Runs fn under the lock every mesh operation takes (a pod registration
  // moves wg0: it must never interleave with PUT/DELETE /v1/mesh).
  nlohmann::json run_serialized(const std::function<nlohmann::json()>& fn);
  // The persisted canonical mesh (or null). Only from inside run_serialized or
  // a PodsHooks callback: the caller already holds the operation lock.
  nlohmann::json persisted_mesh_held() const { return persisted_.mesh; }
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
  // The status's mesh block for a desired mesh (persisted_.mesh, or one
  // being applied), as JSON text.
  std::string mesh_summary_locked(const nlohmann::json& desired, bool live, const std::string& live_error);
  // The status text without its agent block (Snapshot::stable_body).
  std::string stable_body_locked(const nlohmann::json& inspect, const std::string& mesh_summary);
  void publish_locked(std::string stable_body, nlohmann::json inspect);
  // put_mesh's work once the document is validated.
  ApiResult put_validated_locked(const Config& cfg, MeshValidation v);
  std::optional<std::string> own_endpoint_locked(const nlohmann::json& inspect) const;
  std::string key_path() const;
  std::optional<std::string> mesh_netns_locked(const nlohmann::json& desired);
  nlohmann::json pods_array_locked();

  mutable std::mutex cfg_mu_;
  Config cfg_;
  std::unique_ptr<Discovery> discovery_;
  std::unique_ptr<MeshOps> mesh_;

  // Everything below under op_mu_ (held for the length of one blocking op).
  std::mutex op_mu_;
  PersistedState persisted_;
  nlohmann::json last_inspect_;
  std::vector<std::string> warnings_;
  std::string public_key_;
  PodsHooks pods_;

  mutable std::mutex snap_mu_;
  std::shared_ptr<const Snapshot> snap_;

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
