// SPDX-License-Identifier: Apache-2.0
// What the agent must remember across restarts: the desired mesh.
//
//   <state_dir>/state.json     the whole desired mesh, written with
//                              write_file_atomic (temp, fsync, rename, fsync
//                              dir): a crash leaves the old or the new file
//   <state_dir>/state.journal  the peer changes made since (PATCH /v1/mesh),
//                              one JSON line each, appended and fdatasync'd
//
// A peer change costs one short append instead of rewriting the whole mesh
// (a 4000-peer state is ~0.5 MB to serialise and fsync per change); the
// journal is folded into a new state.json once it outgrows it. Both files
// carry the snapshot's serial: a journal of another snapshot (a crash
// between writing a new state.json and removing the old journal) is never
// replayed. A last line cut by a crash was never acknowledged (the change is
// persisted before it is applied) and is dropped.
#pragma once

#include <optional>
#include <string>

#include "common/fd.hpp"
#include "common/result.hpp"
#include "overlay/overlay.hpp"

namespace fa::agent {

// An interface being removed (DELETE /v1/mesh): written before it is
// removed, so that a crash in between finishes the removal at the next start
// instead of leaving an interface no desired mesh accounts for.
struct Removal {
  std::string interface;
  std::optional<std::string> netns;
  bool operator==(const Removal&) const = default;
};

struct PersistedState {
  std::optional<overlay::DesiredMesh> mesh;  // canonical desired mesh
  std::optional<Removal> removing;
  bool operator==(const PersistedState&) const = default;
};

struct LoadedState {
  PersistedState state;
  // Set when the files were unusable as state (not JSON, another shape, a
  // mesh or a change that does not validate) and were moved aside: the path
  // state.json was moved to. The agent then rebuilds from the kernel's view.
  std::string moved_aside;
  std::string problem;  // why
};

class StateStore {
 public:
  StateStore(std::string dir, overlay::ParseOptions opt);

  // Missing files: empty state. Unusable files are renamed to
  // <name>.corrupt-<unix time> and empty state returned with the reason.
  // An Error only for I/O failures that leave us unable to tell.
  Result<LoadedState> load();
  // The whole state as a new snapshot; the journal is dropped.
  Status save(const PersistedState& s);
  // A change of some peers, `after` being the mesh with it made (folded into
  // a new snapshot when the journal has outgrown the last one).
  Status append(const overlay::PeerChanges& change, const overlay::DesiredMesh& after);

 private:
  std::string snapshot_path() const { return dir_ + "/state.json"; }
  std::string journal_path() const { return dir_ + "/state.journal"; }
  Result<PersistedState> replay(PersistedState s, const std::string& journal, size_t* good_bytes);

  std::string dir_;
  overlay::ParseOptions opt_;
  uint64_t serial_ = 0;
  size_t snapshot_bytes_ = 0;
  size_t journal_bytes_ = 0;
  Fd journal_;  // open for appending once the journal of serial_ exists
};

// Convenience for one-shot use (tests, tools).
Result<LoadedState> load_state(const std::string& state_dir, const overlay::ParseOptions& opt);
Status save_state(const std::string& state_dir, const PersistedState& s);

// Parses a state.json document; Error names what is wrong (pure, unit-tested).
Result<PersistedState> parse_state(const std::string& text, const overlay::ParseOptions& opt,
                                   uint64_t* serial = nullptr);
std::string dump_state(const PersistedState& s, uint64_t serial = 0);

}  // namespace fa::agent
