// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/classify.hpp"

#include <cerrno>
#include <utility>

namespace fa::rdma {
namespace {

constexpr std::pair<Reason, std::string_view> kNames[] = {
    {Reason::kNone, "none"},
    {Reason::kNoRoute, "no_route"},
    {Reason::kPeerRefused, "peer_refused"},
    {Reason::kPeerClosed, "peer_closed"},
    {Reason::kQpRtrFailed, "qp_rtr_failed"},
    {Reason::kQpRtsFailed, "qp_rts_failed"},
    {Reason::kRetryExceeded, "retry_exceeded"},
    {Reason::kTimeout, "timeout"},
    {Reason::kRemoteError, "remote_error"},
    {Reason::kProtocolError, "protocol_error"},
    {Reason::kDeviceError, "device_error"},
    {Reason::kCompletionError, "completion_error"},
    {Reason::kBusy, "busy"},
    {Reason::kAuthFailed, "auth_failed"},
    {Reason::kBelowRate, "below_rate"},
};

}  // namespace

std::string_view reason_name(Reason r) {
  for (const auto& [reason, name] : kNames)
    if (reason == r) return name;
  return "unknown";
}

std::optional<Reason> reason_from_name(std::string_view name) {
  for (const auto& [reason, n] : kNames)
    if (n == name) return reason;
  return std::nullopt;
}

Reason classify_connect_errno(int err) {
  switch (err) {
    case ECONNREFUSED:
      return Reason::kPeerRefused;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case EHOSTDOWN:
      return Reason::kNoRoute;
    case ETIMEDOUT:
    case EAGAIN:
    case EINPROGRESS:
      return Reason::kTimeout;
    case ECONNRESET:
    case EPIPE:
      return Reason::kPeerClosed;
    default:
      return Reason::kNoRoute;
  }
}

Reason classify_io_errno(int err) {
  switch (err) {
    case ETIMEDOUT:
    case EAGAIN:
      return Reason::kTimeout;
    case EHOSTUNREACH:
    case ENETUNREACH:
      return Reason::kNoRoute;
    default:
      // ECONNRESET, EPIPE and anything else after establishment: the peer
      // is gone as far as this probe is concerned.
      return Reason::kPeerClosed;
  }
}

Reason classify_wc_status(enum ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS:
      return Reason::kNone;
    case IBV_WC_RETRY_EXC_ERR:
      return Reason::kRetryExceeded;
    // The responder answered, but not with an ack: it has no receive
    // resources (RNR) or rejected the access. With RDMA WRITE this means
    // the peer's QP/MR went away (peer torn down) or the exchange was wrong.
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
      return Reason::kRemoteError;
    default:
      return Reason::kCompletionError;
  }
}

Reason classify_modify_qp(enum ibv_qp_state target, int /*err*/) {
  switch (target) {
    case IBV_QPS_RTR:
      return Reason::kQpRtrFailed;
    case IBV_QPS_RTS:
      return Reason::kQpRtsFailed;
    default:
      return Reason::kDeviceError;
  }
}

}  // namespace fa::rdma
