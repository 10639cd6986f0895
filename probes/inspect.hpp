// SPDX-License-Identifier: Apache-2.0
// The discovery seam: one call reads a sysfs root, rtnetlink and (on real
// InfiniBand) the subnet manager, and returns plain data; a second call turns
// that data into the `inspect --json` document of docs/inspect.md. The daemon
// (status API, metrics), the CDI generator and the CLI all use these two.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace fa::probes {

struct InspectOptions {
  std::string sysfs_root = "/sys";
  std::string provider_id;            // RoCE fabric identity; from config
  std::string fabric_netdev;          // pin, optional (config fabric.netdev)
  std::vector<std::string> hcas;      // optional allow-list (config fabric.hcas)
  std::string socket_ifname = "wg0";  // NCCL_SOCKET_IFNAME (config overlay.interface)
  bool query_sm = true;               // SMInfo MAD to the SM (InfiniBand only)
  std::string lldpd_socket;           // lldpd's control socket (config fabric.lldpd_socket); "": default
  std::string proc_root = "/proc";    // kernel release, NVIDIA driver flavour (GPUDirect readiness)
};

struct Gid {
  int index = 0;
  std::string gid;     // as sysfs writes it: fe80:0000:0000:0000:1c95:bcff:fea6:281c
  std::string type;    // "IB/RoCE v1" | "RoCE v2" | "" when unreadable
  std::string netdev;  // gid_attrs/ndevs/N, "" when none
};

struct Port {
  int port = 0;
  std::string state;       // ACTIVE, DOWN, INIT, ARMED, ... ("" when unreadable)
  std::string phys_state;  // LinkUp, Polling, Disabled, ...
  std::string link_layer;  // InfiniBand | Ethernet
  std::optional<double> rate_gbps;
  std::optional<uint32_t> lid;
  std::optional<uint32_t> sm_lid;
  std::string netdev;  // RoCE: the port's netdev; "" when none
  std::vector<Gid> gids;
  std::map<std::string, uint64_t> counters;     // ports/N/counters/*
  std::map<std::string, uint64_t> hw_counters;  // ports/N/hw_counters/*
};

struct Hca {
  std::string name;
  std::string node_guid;
  std::string fw_ver;
  std::string board_id;
  std::string pci;  // 0000:03:00.0, "" when not a PCI function (rxe)
  std::optional<int> numa_node;
  std::string pci_path;  // devices/-relative path, for PCIe affinity
  std::vector<Port> ports;
};

struct GpuDevice {
  std::string pci;
  std::string vendor;     // nvidia | amd
  std::string device_id;  // 0x2330
  std::string model;      // "H100 SXM5 80GB", or the raw id when unknown
  std::optional<int> numa_node;
  std::string pci_path;
  std::string nearest_hca;  // "" when there is no fabric HCA
};

struct Gpus {
  std::string vendor;  // "" when none, "mixed" when several
  std::string model;   // "" when none, "mixed" when several
  std::vector<GpuDevice> devices;
};

// One subnet manager as the SA lists it (SMInfoRecord).
struct SubnetManager {
  std::string guid;  // port GUID, 0x0002c90300a1b2c3
  uint32_t lid = 0;
  int priority = 0;   // 0..15
  std::string state;  // master | standby | discovering | not active
};

// Can this port's path carry RDMA? A switch without lossless queueing
// (PFC, with ECN for congestion) drops RoCE under load and NCCL falls back
// to TCP.
struct Lossless {
  std::string state = "unknown";  // yes | no | unknown
  std::string reason;
  std::vector<int> pfc_priorities;                        // priorities PFC keeps lossless
  std::map<int, uint64_t> pfc_requests, pfc_indications;  // pause frames sent / received, per priority
  std::optional<std::vector<int>> prio_tc;                // ETS: traffic class of each priority
  std::optional<std::vector<std::string>> tc_tsa;  // ETS: per traffic class: strict | ets | cbs | vendor
  std::optional<std::vector<int>> tc_tx_bw;        // ETS: bandwidth share of each traffic class, %
  std::map<int, int> dscp_priority;                // APP table: DSCP -> priority
  std::optional<std::vector<int>> ecn_np, ecn_rp;  // priorities with ECN on (mlx5 sysfs)
  std::optional<int> nccl_ib_tc;  // the IP traffic class reaching the PFC priority (DSCP << 2)
};

// The other end of a fabric netdev's link as LLDP tells it (lldpd).
struct LldpNeighbor {
  std::string chassis_id;          // e.g. the switch's MAC, 0c:42:a1:00:00:01
  std::string chassis_id_subtype;  // mac | ifname | local | ...
  std::string system_name;         // leaf-07
  std::string port_id;             // Ethernet1/7, swp7, or a MAC
  std::string port_id_subtype;
  std::string port_descr;
};

// One port of a RoCE rail (one IPv4 segment of the fabric).
struct RailPort {
  std::string port;                  // dev:port
  std::string state;                 // ACTIVE, DOWN, ...
  std::string netdev;                // the GID's netdev
  std::string address;               // its address in the rail's segment
  int gid_index = -1;                // the RoCE v2 GID holding that address
  std::optional<Lossless> lossless;  // set by discover() for the fabric's ports
  // lldpd's neighbours on the port's netdev; nullopt where lldpd could not
  // be asked (Fabric::lldp_reason says why).
  std::optional<std::vector<LldpNeighbor>> lldp;
};

struct Rail {
  std::string segment;  // 10.0.3.0/24
  std::vector<RailPort> ports;
};

struct Fabric {
  std::string kind = "none";  // infiniband | roce | none
  std::optional<std::string> id;
  std::vector<std::string> ports;  // dev:port, ACTIVE fabric ports, natural order
  // InfiniBand
  std::optional<std::string> subnet_prefix;  // fe80:0000:0000:0000
  std::optional<uint32_t> sm_lid;
  std::optional<std::string> sm_guid;  // the master's, from SMInfo: 0x0002c90300a1b2c3
  // Every SM of the subnet (SA SMInfoRecord table): the master first, then
  // in the order they would take over (priority high to low, GUID low to
  // high). The last one names the fabric (docs/inspect.md).
  std::vector<SubnetManager> sms;
  // RoCE
  // Every segment of the fabric, one rail each (one segment: one rail),
  // ordered by network address; ports not ACTIVE included.
  std::vector<Rail> rails;
  std::optional<std::string> segment;  // the first ACTIVE port's: 10.20.0.0/16
  std::optional<std::string> address;  // 10.20.0.11
  std::optional<std::string> netdev;
  std::optional<std::string> provider_id;
  // Every fabric port's path lossless (InfiniBand: by design), none of
  // them (no), or not known for some; per port in rails[].ports[].lossless.
  std::string lossless = "unknown";
  std::string lossless_reason;
  std::string lldp_reason;  // RoCE: why there are no LLDP neighbours to report, "" when lldpd answered
};

struct NcclEnv {
  std::optional<std::string> ib_hca;        // =mlx5_0:1,mlx5_1:1
  std::optional<std::string> ib_gid_index;  // RoCE only
  std::optional<std::string> ib_tc;         // RoCE: the traffic class of the PFC priority
  std::string socket_ifname = "wg0";
};

// Whether NCCL can move GPU memory over the fabric without a copy through
// host memory (GPUDirect RDMA), and through what.
struct GpuDirect {
  std::optional<bool> ready;  // nullopt: no NVIDIA GPU, the question does not arise
  std::string via;            // "nvidia_peermem" | "dma-buf" | "" when not ready
  std::string reason;
};

struct Report {
  std::vector<Hca> hcas;
  Fabric fabric;
  NcclEnv nccl;
  Gpus gpus;
  GpuDirect gpudirect;
  // One human sentence per decision, keyed by what was decided
  // ("fabric", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_SOCKET_IFNAME", "gpus").
  std::vector<std::pair<std::string, std::string>> reasons;
  std::vector<std::string> warnings;
};

// One discovery pass. Never throws for bad or partial sysfs: what could not
// be read becomes a warning naming the path.
Report discover(const InspectOptions& opts);

// The `inspect --json` document (docs/inspect.md), "reasons" and "counters" included.
nlohmann::json to_json(const Report& report);

// Compact table for a person (the default `inspect` output).
std::string to_table(const Report& report);

}  // namespace fa::probes
