// SPDX-License-Identifier: Apache-2.0
// Failure classification for the RDMA link probe. The control plane acts on
// the reason, not on the message, so every failure path maps to one of a
// small, documented set (docs/probe.md). The mapping from verbs status codes
// and errno values is pure and table-tested.
#pragma once

#include <infiniband/verbs.h>

#include <optional>
#include <string>
#include <string_view>

namespace fa::rdma {

enum class Reason {
  kNone,            // no failure
  kNoRoute,         // side channel: EHOSTUNREACH/ENETUNREACH, or the peer name does not resolve
  kPeerRefused,     // side channel: ECONNREFUSED (no probe server on that port)
  kPeerClosed,      // side channel closed (or reset) by the peer mid-run
  kQpRtrFailed,     // INIT->RTR refused: usually a wrong GID index (GID type/family/subnet mismatch)
  kQpRtsFailed,     // RTR->RTS refused
  kRetryExceeded,   // IBV_WC_RETRY_EXC_ERR: the path drops RDMA (e.g. no lossless queueing) or the peer died
  kTimeout,         // no progress within the deadline (connect, record, completion, ping-pong)
  kRemoteError,     // the peer reported a failure of its own that has no finer reason
  kProtocolError,   // malformed or unexpected side-channel record
  kDeviceError,     // local setup: device/port missing or down, resource creation failed
  kCompletionError, // any other work completion error status
  kBusy,            // the probe server is already running a probe
  kAuthFailed,      // the side channel did not authenticate: wrong or missing probe key, not a fabric-agent peer
  kBelowRate,       // not a failure: the pair ran but under the configured fraction of the port rate
};

// Stable snake_case name used in JSON ("qp_rtr_failed"); the inverse accepts
// exactly these names.
std::string_view reason_name(Reason r);
std::optional<Reason> reason_from_name(std::string_view name);

// errno of connect()/getaddrinfo-level failures on the TCP side channel.
Reason classify_connect_errno(int err);

// errno of a socket read/write after the connection was established.
Reason classify_io_errno(int err);

// Status of a failed work completion.
Reason classify_wc_status(enum ibv_wc_status status);

// A failed ibv_modify_qp towards `target` (RTR or RTS; INIT failures are
// local setup problems). errno is kept for the message only: the kernel
// answers a bad GID index with EINVAL, ENODATA or ETIMEDOUT (address
// resolution) depending on the driver, and all of them mean the same to an
// operator.
Reason classify_modify_qp(enum ibv_qp_state target, int err);

}  // namespace fa::rdma
