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
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/fd.hpp"
#include "common/result.hpp"
#include "probes/rdma/classify.hpp"
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
  std::string bind = "0.0.0.0";  // address of the side-channel listener
  uint16_t port = kDefaultPort;  // 0: any free port (see Server::port())
  HcaPort hca;
  int gid_index = -1;
  double io_timeout_s = 10.0;    // per side-channel record and per ping
};

// Listens for probe clients on a background thread and serves them one at a
// time (a second client queues in the listen backlog). A failed session is
// logged and its resources released; the server keeps serving.
class Server {
 public:
  struct Stats {
    uint64_t sessions = 0;
    uint64_t failed = 0;
    std::string last_peer;
    std::string last_reason;  // reason name of the last session ("none" when ok)
    std::string last_message;
  };

  // Checks the device, port and GID index and binds the listener before
  // returning, so a bad option or a busy port is reported here.
  static Result<std::unique_ptr<Server>> start(const ServeOptions& opts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }
  // Stops accepting, aborts a running session, joins the thread. Idempotent.
  void stop();
  Stats stats() const;

  struct Impl;  // opaque: device, listener, stop signal

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  void loop();

  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  Stats stats_;
};

}  // namespace fa::rdma
