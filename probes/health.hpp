// SPDX-License-Identifier: Apache-2.0
// The host's health as conditions (docs/health.md): each a stable code, the
// device or peer it is about, the evidence as first seen, and since when.
// Pure: observations in (discovery reports, the mesh's handshakes, PCIe link
// attributes read by the caller), conditions out; tested on data.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probes/inspect.hpp"

namespace fa::probes {

// Thresholds; the defaults are those of the anchors docs/health.md cites.
struct HealthConfig {
  int64_t flap_down_seconds = 25;         // gpud: down at least this long, then up again ...
  int flap_count = 3;                     // ... this many times ...
  int64_t flap_window_seconds = 12 * 3600;  // ... within this window
  int carrier_losses = 5;                 // Azure: this many losses of the link ...
  int64_t carrier_window_seconds = 24 * 3600;  // ... within this window
  double symbol_errors_per_hour = 120;    // NVSentinel
  int64_t handshake_seconds = 180;        // a peer's last handshake older than this: down
  // A condition that clears stays raised this long after it last held, so
  // that a flapping one changes the status once, not at every flap.
  int64_t hold_seconds = 300;
  // The HCAs the fabric is pinned to (config fabric.hcas: "mlx5_0" or
  // "mlx5_0:1"): watched even when down, when discovery no longer counts
  // them as fabric ports.
  std::vector<std::string> pinned;
};

struct Condition {
  std::string code;      // port_down, link_flapping, port_errors, symbol_errors, port_slow,
                         // pcie_degraded, fabric_changed, gid_changed, peer_down
  std::string subject;   // "mlx5_0:1", "0000:13:00.0", "fabric", "peer <key>"
  std::string evidence;  // what was seen when it was raised
  int64_t since_unix = 0;
  bool operator==(const Condition&) const = default;
};

// One PCIe link as sysfs shows it (current_link_* and max_link_* of a
// function or bridge), speeds in GT/s.
struct PcieLink {
  double speed = 0, max_speed = 0;
  int width = 0, max_width = 0;
};
// The link attributes of each element of a devices/-relative path
// ("pci0000:00/0000:00:01.0/0000:13:00.0"), upstream first; elements
// without them (a root complex) are left out.
using PcieReader = std::vector<std::pair<std::string, PcieLink>> (*)(const std::string& sysfs_root,
                                                                      const std::string& pci_path);
std::vector<std::pair<std::string, PcieLink>> read_pcie_path(const std::string& sysfs_root,
                                                             const std::string& pci_path);

struct PeerSeen {
  std::string public_key;
  int64_t last_handshake_unix = 0;  // 0: never
};

// The conditions one snapshot shows: ports down, PCIe links trained below
// what both ends can do, a port slower than its siblings (what
// `fabric-agent check` reports).
std::vector<Condition> snapshot_conditions(const Report& r, const std::string& sysfs_root,
                                           const HealthConfig& c, int64_t now, PcieReader pcie = read_pcie_path);

// The daemon's view over time: conditions that need a history (flaps,
// counters that grow, a fabric or GID that changed, peers silent) on top of
// the snapshot's.
class Health {
 public:
  explicit Health(HealthConfig c = {}) : cfg_(c) {}
  void configure(HealthConfig c) { cfg_ = c; }  // a reload keeps the history
  // peers: the mesh's peers as the interface reports them (empty: no mesh).
  // Returns every condition raised, sorted by code and subject.
  std::vector<Condition> observe(const Report& r, const std::string& sysfs_root, const std::vector<PeerSeen>& peers,
                                 int64_t now, PcieReader pcie = read_pcie_path);

 private:
  struct PortHistory {
    bool up = true;
    int64_t down_since = 0;
    std::vector<int64_t> flaps;   // ends of down periods long enough to count
    std::vector<int64_t> losses;  // up -> down transitions and link_downed increments
    std::map<std::string, uint64_t> counters;
    std::vector<std::pair<int64_t, uint64_t>> symbol_errors;  // (time, value) over the last hour
  };
  void raise(std::map<std::pair<std::string, std::string>, Condition>& now_raised, Condition c);
  HealthConfig cfg_;
  std::map<std::string, PortHistory> ports_;   // every fabric port ever seen
  std::optional<std::string> first_fabric_;    // the fabric id first seen
  std::map<std::string, std::string> gids_;    // port -> the GID NCCL uses, as first seen with a mesh
  std::map<std::string, int64_t> peer_first_;  // peer -> first seen
  std::map<std::pair<std::string, std::string>, Condition> raised_;  // by (code, subject)
  std::map<std::pair<std::string, std::string>, int64_t> last_held_;
};

// "mlx5_0:1: port_down: state DOWN, phys Polling (since 2026-12-02T10:00:00Z)"
std::string condition_line(const Condition& c);
nlohmann::json to_json(const std::vector<Condition>& conditions);

}  // namespace fa::probes
