// SPDX-License-Identifier: Apache-2.0
// What the agent must remember across restarts: the desired mesh and the pod
// registrations, in <state_dir>/state.json, written with write_file_atomic
// (temp, fsync, rename, fsync dir) so a crash leaves the old or the new file.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "common/result.hpp"

namespace fa::agent {

struct PersistedState {
  nlohmann::json mesh;                                // canonical desired mesh, or null
  nlohmann::json pods = nlohmann::json::array();      // registrations
  bool operator==(const PersistedState&) const = default;
};

struct LoadedState {
  PersistedState state;
  // Set when the file was unreadable as state and was moved aside: the path
  // it was moved to. The agent then rebuilds from the kernel's view.
  std::string moved_aside;
  std::string problem;  // why it was moved aside
};

// Missing file: empty state. Corrupt file (not JSON, wrong shape): renamed to
// state.json.corrupt-<unix time> and empty state returned with the reason.
// An Error only for I/O failures that leave us unable to tell.
Result<LoadedState> load_state(const std::string& state_dir);
Status save_state(const std::string& state_dir, const PersistedState& s);
// The same from its two parts, for a writer that must not copy them.
Status save_state(const std::string& state_dir, const nlohmann::json& mesh, const nlohmann::json& pods);

// Parses a state document; Error names what is wrong (pure, unit-tested).
Result<PersistedState> parse_state(const std::string& text);
std::string dump_state(const nlohmann::json& mesh, const nlohmann::json& pods);

}  // namespace fa::agent
