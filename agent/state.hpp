// SPDX-License-Identifier: Apache-2.0
// What the agent must remember across restarts: the desired mesh, in
// <state_dir>/state.json, written with write_file_atomic (temp, fsync,
// rename, fsync dir) so a crash leaves the old or the new file.
#pragma once

#include <optional>
#include <string>

#include "common/result.hpp"
#include "overlay/overlay.hpp"

namespace fa::agent {

struct PersistedState {
  std::optional<overlay::DesiredMesh> mesh;  // canonical desired mesh
  bool operator==(const PersistedState&) const = default;
};

struct LoadedState {
  PersistedState state;
  // Set when the file was unusable as state (not JSON, another shape, a
  // mesh that does not validate) and was moved aside: the path it was moved
  // to. The agent then rebuilds from the kernel's view.
  std::string moved_aside;
  std::string problem;  // why it was moved aside
};

// Missing file: empty state. An unusable file is renamed to
// state.json.corrupt-<unix time> and empty state returned with the reason.
// An Error only for I/O failures that leave us unable to tell.
Result<LoadedState> load_state(const std::string& state_dir, const overlay::ParseOptions& opt);
Status save_state(const std::string& state_dir, const PersistedState& s);

// Parses a state document; Error names what is wrong (pure, unit-tested).
Result<PersistedState> parse_state(const std::string& text, const overlay::ParseOptions& opt);
std::string dump_state(const PersistedState& s);

}  // namespace fa::agent
