// SPDX-License-Identifier: Apache-2.0
// RDMA link probe: RDMA WRITE bandwidth and write ping-pong latency between
// two agents over RC queue pairs on the exact HCA port and GID index NCCL
// will use. The out-of-band exchange (QPN, PSN, GID, rkey, address) runs over
// a TCP side channel, as perftest's ib_write_bw does. See docs/probe.md.
//
// Library API for the CLI and the daemon:
//   run_probe(ProbeOptions)   -> one measurement against a serving peer
//   Server::start(ServeOptions) -> a background listener, one probe at a time
//   to_json(ProbeResult)      -> the result document
// Both ends hold the same probe key (auth.hpp): the side channel
// authenticates before anything is registered or exchanged.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "probes/rdma/auth.hpp"
#include "probes/rdma/classify.hpp"
#include "probes/rdma/listener.hpp"
#include "probes/rdma/stats.hpp"

namespace fa::rdma {

inline constexpr uint16_t kDefaultPort = 18520;

// "mlx5_0:1" (or "mlx5_0", meaning port 1).
struct HcaPort {
  std::string device;
  uint8_t port = 1;
  bool operator==(const HcaPort&) const = default;
};
Result<HcaPort> parse_hca(std::string_view s);

// "host", "host:port", "[v6addr]:port" or a bare IPv6 address.
struct PeerAddr {
  std::string host;
  uint16_t port = kDefaultPort;
  bool operator==(const PeerAddr&) const = default;
};
Result<PeerAddr> parse_peer(std::string_view s, uint16_t default_port = kDefaultPort);

// Message size: bytes, or with a binary K/M suffix ("64K"); 1 B .. 64 MiB.
Result<uint64_t> parse_size(std::string_view s);
// Seconds, decimal ("0.5", "10"); 0.1 .. 3600.
Result<double> parse_duration(std::string_view s);
// GID table index 0..255.
Result<int> parse_gid_index(std::string_view s);

// Nominal port rate in Gb/s from ibv_port_attr active_width/active_speed
// codes (4X EDR -> 100). 0 when a code is unknown.
double port_rate_gbps(uint8_t active_width, uint8_t active_speed);

struct ProbeOptions {
  PeerAddr peer;
  Key key;                         // required: the serving peer's probe key
  HcaPort hca;
  int gid_index = -1;              // required until discovery supplies NCCL_IB_GID_INDEX
  double duration_s = 5.0;         // bandwidth phase
  uint64_t size = 65536;           // bytes per RDMA WRITE
  uint32_t window = 128;           // outstanding WRITE work requests
  uint32_t latency_iters = 1000;   // ping-pong round trips
  double min_fraction = 0.7;       // below this fraction of the port rate: degraded
  double connect_timeout_s = 5.0;  // TCP side channel
  double stall_timeout_s = 10.0;   // no completion / pong / record for this long: timeout
};

enum class ProbeStatus { kOk, kDegraded, kFailed };
std::string_view status_name(ProbeStatus s);

struct ProbeResult {
  ProbeStatus status = ProbeStatus::kFailed;
  Reason reason = Reason::kNone;  // kNone when ok, kBelowRate when degraded
  std::string message;            // for a person; empty when ok
  uint64_t bytes = 0;
  double seconds = 0;
  double gbps = 0;
  std::optional<Percentiles> latency_us;  // one-way (half the round trip), as perftest reports
  std::string hca;
  int port = 0;
  int gid_index = -1;
  std::string gid;  // local GID, IPv6 text form
  std::string peer;
  uint64_t size = 0;
  uint32_t latency_iters = 0;
  double port_rate_gbps = 0;
};

// Runs one probe against `opts.peer`. A probe that ran and failed (peer
// refused, QP did not reach RTR, retry exceeded, ...) is a ProbeResult with
// status kFailed and a classified reason; Error is only for options that
// cannot describe a probe (window 0, missing --hca, ...).
Result<ProbeResult> run_probe(const ProbeOptions& opts);

nlohmann::json to_json(const ProbeResult& r);

struct ServeOptions {
  // Address of the side-channel listener. Empty: the probed port's fabric
  // address (RoCE: the IP of its GID; InfiniBand: its IPoIB address), so the
  // listener is not reachable from the machine's other networks. "0.0.0.0"
  // or "::" only when asked for.
  std::string bind;
  uint16_t port = kDefaultPort;  // 0: any free port (see Server::port())
  HcaPort hca;
  int gid_index = -1;
  Key key;                           // required: clients must prove they hold it
  double io_timeout_s = 10.0;        // idle: per side-channel record and per ping
  double handshake_timeout_s = 5.0;  // from accept to the client authenticated
  std::string sysfs_root = "/sys";   // where the IPoIB netdev of an InfiniBand port is found
};

// The address the listener binds to by default: for a RoCE port the IP of
// its GID at the chosen index (IPv4-mapped or global IPv6), for an
// InfiniBand port the first address of its IPoIB netdev. Fails, naming the
// option to pass, when there is none.
Result<std::string> fabric_bind_address(const Gid& gid, bool ethernet, const std::string& device, uint8_t port,
                                        const std::string& sysfs_root);

// Listens for probe clients on a background thread and serves them one at a
// time (a second client queues in the listen backlog). Each connection must
// authenticate within the handshake timeout; one that does not, or stalls,
// is dropped and the next is served. A failed session is logged and its
// resources released; the server keeps serving.
class Server {
 public:
  using Stats = ServeStats;

  // Checks the key, the device, port and GID index and binds the listener
  // before returning, so a bad option or a busy port is reported here.
  static Result<std::unique_ptr<Server>> start(const ServeOptions& opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const;
  const std::string& address() const;  // the address bound
  // Stops accepting, aborts a running session, joins the thread. Idempotent.
  void stop();
  Stats stats() const;

  struct Impl;  // opaque: device, registered bytes, listener

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fa::rdma
