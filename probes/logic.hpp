// SPDX-License-Identifier: Apache-2.0
// Pure decisions of discovery: parsing sysfs values, choosing the fabric,
// the NCCL variables and GPU affinity. No I/O here: everything takes data,
// so it is unit-tested on tables (tests/probes/logic_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"
#include "probes/inspect.hpp"
#include "probes/sminfo.hpp"

namespace fa::probes {

// --- sysfs value parsing -------------------------------------------------

// "400 Gb/sec (4X NDR)" -> 400; "2.5 Gb/sec (1X SDR)" -> 2.5.
std::optional<double> parse_rate_gbps(std::string_view s);

// "4: ACTIVE" -> {4, "ACTIVE"}; "5: LinkUp" -> {5, "LinkUp"}.
std::optional<std::pair<int, std::string>> parse_numbered_state(std::string_view s);

// "0x1a" -> 26 (lid, sm_lid). Decimal is accepted too.
std::optional<uint32_t> parse_uint(std::string_view s);

// A counter file: a decimal integer, nothing else.
std::optional<uint64_t> parse_counter(std::string_view s);

// The kernel's GID text: eight groups of four hex digits.
bool is_valid_gid(std::string_view gid);
bool is_zero_gid(std::string_view gid);
// IPv4-mapped GID (::ffff:a.b.c.d) -> a.b.c.d as a host-order integer.
std::optional<uint32_t> gid_ipv4(std::string_view gid);
// Upper 64 bits of a GID as written: "fe80:0000:0000:0000".
std::string gid_subnet_prefix(std::string_view gid);

std::string ipv4_to_string(uint32_t addr);
// Network of addr/prefix as "10.20.0.0/16".
std::string ipv4_segment(uint32_t addr, int prefix_len);
// "10.20.0.0/16" -> {network, prefix length}; nullopt when not that form.
std::optional<std::pair<uint32_t, int>> parse_ipv4_segment(std::string_view segment);
// The smallest segment holding every given one: 10.0.0.0/24 .. 10.0.7.0/24
// -> 10.0.0.0/21 (what one NCCL_IB_ADDR_RANGE must name for all rails).
std::string covering_segment(const std::vector<std::string>& segments);

// Text from sysfs is bytes: netdev names, fw_ver, and the garbage a warning
// echoes may be any byte string. Valid UTF-8 passes through; control bytes
// and invalid sequences become \xNN, so JSON and terminals always get text.
std::string printable(std::string_view s);

// --- ordering and formatting ---------------------------------------------

// Natural order: digit runs compare as numbers, so mlx5_2 < mlx5_10.
bool natural_less(std::string_view a, std::string_view b);

// NCCL_IB_HCA value for ports "dev:port": '=' (exact match; without it NCCL
// prefix-matches and mlx5_1 also selects mlx5_10..mlx5_19) + natural order.
std::string format_nccl_ib_hca(std::vector<std::string> ports);

// Fabric ids: stable strings built only from the identifying facts.
std::string infiniband_fabric_id(std::string_view subnet_prefix, uint64_t sm_guid);
// segments: one or more "network/prefix", in the order given (a rail set
// is ordered by network address): roce:<provider>:10.0.0.0/24,10.0.1.0/24.
std::string roce_fabric_id(std::string_view provider_id, const std::vector<std::string>& segments);
std::string format_guid(uint64_t guid);  // 0x0002c90300a1b2c3

// --- network state as rtnetlink reports it --------------------------------

struct Ipv4Addr {
  uint32_t addr = 0;  // host order
  int prefix_len = 0;
};

struct NetLink {
  std::string name;
  bool up = false;  // IFF_UP
  std::vector<Ipv4Addr> addrs;
};

struct NetState {
  std::vector<NetLink> links;
  std::set<std::string> default_route_ifs;  // netdevs carrying a default route
  std::optional<std::string> error;         // when rtnetlink could not be read
  const NetLink* find(std::string_view name) const;
};

// --- decisions ----------------------------------------------------------

// What a port ("dev:port") learnt of its subnet's SMs: the master's SMInfo
// and the SA's SMInfoRecord table, each with the reason it failed. A port
// without entry was not queried.
struct SmLookup {
  std::optional<uint64_t> guid;  // the master's port GUID (SMInfo)
  std::string error;
  std::optional<smp::SmInfo> master;
  std::optional<std::vector<smp::SmInfoRecord>> records;  // SA table
  std::string sa_error;
};

// The subnet's SMs in takeover order (IBA 14.4.1.1: higher priority first,
// then lower GUID), the master (by GUID) moved to the front; the master's
// own SMInfo (at master_lid) is added when the table lacks it.
std::vector<smp::SmInfoRecord> sms_in_takeover_order(std::vector<smp::SmInfoRecord> records,
                                                     const std::optional<smp::SmInfo>& master,
                                                     uint32_t master_lid);

// The SM that names an InfiniBand fabric: the one that would take over
// last (lowest priority, then highest GUID). A failover removes SMs from
// the front of the takeover order, so the last one stays as long as it
// is in the subnet.
const smp::SmInfoRecord* fabric_anchor_sm(const std::vector<smp::SmInfoRecord>& ordered);

struct Selection {
  Fabric fabric;
  NcclEnv nccl;
  std::vector<std::pair<std::string, std::string>> reasons;
  std::vector<std::string> warnings;
};

// Chooses the fabric, its ports and the NCCL variables from the discovered
// HCAs, the network state and the SM lookups.
Selection select_fabric(const std::vector<Hca>& hcas, const NetState& net,
                        const std::vector<std::pair<std::string, SmLookup>>& sm, const InspectOptions& opts);

// Number of leading path components two PCI device paths share, not
// counting the devices themselves: the depth of their deepest common
// upstream bridge (0 = different host bridges).
int common_upstream_depth(std::string_view a, std::string_view b);

// For each GPU, the fabric HCA under the deepest common upstream bridge
// (ties: same NUMA node first, then natural order), as NCCL's topology
// search would pair them. Fills GpuDevice::nearest_hca.
void assign_nearest_hcas(std::vector<GpuDevice>& gpus, const std::vector<Hca>& hcas,
                         const std::vector<std::string>& fabric_ports);

// GPU identification from PCI ids: vendor name or "" when not a GPU vendor
// and class. Model from a table of datacenter parts; the raw id otherwise.
std::string gpu_vendor(std::string_view vendor_id, std::string_view class_code);
std::string gpu_model(std::string_view vendor_id, std::string_view device_id);

// What GPUDirect RDMA readiness is decided on, read once (inspect.cpp).
struct GpuDirectInputs {
  size_t nvidia_gpus = 0;
  bool nvidia_module = false;                 // <sysfs>/module/nvidia
  std::string peer_module;                    // "nvidia_peermem" or "nv_peer_mem" (MLNX_OFED's) when loaded
  std::optional<std::string> driver_version;  // <proc>/driver/nvidia/version, first line
  std::optional<std::string> kernel_release;  // <proc>/sys/kernel/osrelease
};
// Pure. Ready through the peer-memory module when it is loaded; else through
// dma-buf, which needs the open flavour of the NVIDIA kernel module and a
// kernel with RDMA dma-buf memory registration (5.12); else not, and the
// reason names what is missing.
GpuDirect gpudirect_readiness(const GpuDirectInputs& in);

}  // namespace fa::probes
