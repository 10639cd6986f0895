// SPDX-License-Identifier: Apache-2.0
// The two seams between the daemon and the modules that touch hardware:
// discovery (probes/) and the WireGuard mesh (overlay/). Both are typed: the
// daemon's logic (generation, persistence, HTTP) sits above them and is
// tested with small in-test implementations; production wires the real
// modules in make_discovery() / make_mesh_ops() (agent/modules.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/config.hpp"
#include "common/result.hpp"
#include "overlay/overlay.hpp"
#include "probes/inspect.hpp"

namespace fa::agent {

class Discovery {
 public:
  virtual ~Discovery() = default;
  // One discovery pass. Failures inside are warnings in the report; an
  // Error means discovery could not run at all.
  virtual Result<probes::Report> discover() = 0;
};

class MeshOps {
 public:
  virtual ~MeshOps() = default;
  // Brings the live interface to `m` (overlay::apply).
  virtual Result<overlay::ApplyResult> apply(const overlay::DesiredMesh& m) = 0;
  // Sends a change of some peers of the running mesh `m` (overlay::apply_peers).
  virtual Result<overlay::ApplyResult> apply_peers(const overlay::DesiredMesh& m,
                                                   const overlay::PeerChanges& changes) = 0;
  // Live view; Error when the interface is absent or unreadable.
  virtual Result<overlay::Shown> show(const std::string& ifname, const std::optional<std::string>& netns) = 0;
  // Removes the interface; absent is fine.
  virtual Status down(const std::string& ifname, const std::optional<std::string>& netns) = 0;
  // Creates the private key file (0600, base64) if missing; returns its public key (base64).
  virtual Result<std::string> ensure_key(const std::string& path) = 0;
};

// Production seams over probes/ and overlay/ (agent/modules.cpp). Core also
// accepts nullptr for either and then answers 503 for what needs it.
std::unique_ptr<Discovery> make_discovery(const Config& cfg);
std::unique_ptr<MeshOps> make_mesh_ops(const Config& cfg);

}  // namespace fa::agent
