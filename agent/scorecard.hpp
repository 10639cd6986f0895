// SPDX-License-Identifier: Apache-2.0
// The agent's scorecard: the last RDMA probe result this agent ran, per peer
// and rail (its own fabric port), kept in <state_dir>/scorecard.json so that
// a restart does not forget what was measured. Recorded by the run endpoint,
// shown in /v1/status (`scorecard`) and /metrics (fabric_agent_rail_*).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/result.hpp"

namespace fa::agent {

// What the scorecard keeps of one run: peer, rail, status, reason, message,
// gbps, latency_us, gid_index, gid, port_rate_gbps, measured_unix. `result`
// is the probe's result document (rdma::to_json).
nlohmann::json scorecard_entry(const std::string& peer, const std::string& rail, const nlohmann::json& result,
                               long long measured_unix);

class Scorecard {
 public:
  // A bound on the entries: a machine measured against every other of a
  // large fabric on each of its rails stays well under it; past it the
  // oldest measurement goes.
  static constexpr size_t kMaxEntries = 4096;

  explicit Scorecard(std::string path);  // "" keeps it in memory only

  // Reads the file once; a missing file is an empty scorecard. A file that
  // is not a scorecard is an error (the caller logs it) and is replaced at
  // the next record.
  Status load();
  // Replaces the entry for (peer, rail) and writes the file atomically. On a
  // write error the entry is still kept in memory.
  Status record(nlohmann::json entry);
  // {"results": [entry...]} sorted by peer, then rail.
  nlohmann::json to_json() const;

 private:
  std::string path_;
  mutable std::mutex mu_;
  bool loaded_ = false;
  std::map<std::pair<std::string, std::string>, nlohmann::json> entries_;
};

}  // namespace fa::agent
