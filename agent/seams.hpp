// SPDX-License-Identifier: Apache-2.0
// The two seams between the daemon and the modules that touch hardware:
// discovery (probes/) and the WireGuard mesh (overlay/). The daemon's logic
// (generation, persistence, serialisation, HTTP) sits above them and is
// tested with small in-test implementations; production wires the real
// modules in make_discovery() / make_mesh_ops() (agent/modules.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/result.hpp"

namespace fa::agent {

class Discovery {
 public:
  virtual ~Discovery() = default;
  // One discovery pass: the `inspect --json` document. Failures inside are
  // warnings in the document; an Error means discovery could not run at all.
  virtual Result<nlohmann::json> discover() = 0;
};

struct MeshFieldError {
  std::string field;    // e.g. "peers[3].endpoint"
  std::string value;    // as written
  std::string message;  // what is accepted
};

struct MeshValidation {
  std::optional<nlohmann::json> canonical;  // set when valid
  std::vector<MeshFieldError> errors;
  // Set when valid: names this validation, so that apply() of the very
  // document in `canonical` reuses its parsed form (0: none).
  uint64_t token = 0;
};

class MeshOps {
 public:
  virtual ~MeshOps() = default;
  // Validates the whole document (no side effect on the interface; it may
  // start reading it, see overlay::EarlyGet).
  virtual MeshValidation validate(const nlohmann::json& doc) = 0;
  // The same for the document as JSON text (the body of PUT /v1/mesh), with
  // `key_file` as its private_key_file when it names none (absent or null),
  // read without building a document when the text has the usual shape.
  // nullopt for any other text (another shape, a syntax error) and where
  // there is no such path: the caller then parses it and calls validate(),
  // which says exactly what is wrong.
  virtual std::optional<MeshValidation> validate_text(std::string_view /*text*/,
                                                      const std::string& /*key_file*/) {
    return std::nullopt;
  }
  // Forgets what validate() kept for the apply() of the same document (its
  // parsed form, a read of the device already sent) when that document is
  // not going to be applied after all.
  virtual void discard() {}
  // Brings the live interface to the canonical desired document; returns
  // the `mesh show --json` document. `validated`: the token of the
  // validate() that returned exactly this document as `canonical`, which is
  // then not parsed again (0: it is parsed). `while_waiting`, if set: the
  // caller's work to run while the backend applies the change
  // (overlay::ApplyOptions::while_waiting).
  virtual Result<nlohmann::json> apply(const nlohmann::json& canonical, uint64_t validated,
                                       const std::function<void()>& while_waiting) = 0;
  // Live view; Error when the interface is absent or unreadable.
  virtual Result<nlohmann::json> show(const std::string& ifname, const std::optional<std::string>& netns) = 0;
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
