// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <cerrno>

#include "probes/rdma/classify.hpp"

using namespace fa::rdma;

TEST_CASE("side-channel connect errors", "[rdma][classify]") {
  CHECK(classify_connect_errno(ECONNREFUSED) == Reason::kPeerRefused);
  CHECK(classify_connect_errno(EHOSTUNREACH) == Reason::kNoRoute);
  CHECK(classify_connect_errno(ENETUNREACH) == Reason::kNoRoute);
  CHECK(classify_connect_errno(EADDRNOTAVAIL) == Reason::kNoRoute);
  CHECK(classify_connect_errno(ETIMEDOUT) == Reason::kTimeout);
  CHECK(classify_connect_errno(ECONNRESET) == Reason::kPeerClosed);
}

TEST_CASE("side-channel io errors after connect", "[rdma][classify]") {
  CHECK(classify_io_errno(ECONNRESET) == Reason::kPeerClosed);
  CHECK(classify_io_errno(EPIPE) == Reason::kPeerClosed);
  CHECK(classify_io_errno(ETIMEDOUT) == Reason::kTimeout);
  CHECK(classify_io_errno(EHOSTUNREACH) == Reason::kNoRoute);
}

TEST_CASE("work completion status", "[rdma][classify]") {
  CHECK(classify_wc_status(IBV_WC_SUCCESS) == Reason::kNone);
  CHECK(classify_wc_status(IBV_WC_RETRY_EXC_ERR) == Reason::kRetryExceeded);
  CHECK(classify_wc_status(IBV_WC_RNR_RETRY_EXC_ERR) == Reason::kRemoteError);
  CHECK(classify_wc_status(IBV_WC_REM_ACCESS_ERR) == Reason::kRemoteError);
  CHECK(classify_wc_status(IBV_WC_REM_OP_ERR) == Reason::kRemoteError);
  CHECK(classify_wc_status(IBV_WC_WR_FLUSH_ERR) == Reason::kCompletionError);
  CHECK(classify_wc_status(IBV_WC_LOC_PROT_ERR) == Reason::kCompletionError);
  CHECK(classify_wc_status(IBV_WC_GENERAL_ERR) == Reason::kCompletionError);
}

TEST_CASE("QP transitions: RTR failure is the wrong-GID-index reason whatever the errno", "[rdma][classify]") {
  for (int e : {EINVAL, ENODATA, ETIMEDOUT, ENETUNREACH, EHOSTUNREACH}) {
    CHECK(classify_modify_qp(IBV_QPS_RTR, e) == Reason::kQpRtrFailed);
    CHECK(classify_modify_qp(IBV_QPS_RTS, e) == Reason::kQpRtsFailed);
    CHECK(classify_modify_qp(IBV_QPS_INIT, e) == Reason::kDeviceError);
  }
}

TEST_CASE("reason names are stable and invertible", "[rdma][classify]") {
  CHECK(reason_name(Reason::kQpRtrFailed) == "qp_rtr_failed");
  CHECK(reason_name(Reason::kRetryExceeded) == "retry_exceeded");
  CHECK(reason_name(Reason::kPeerRefused) == "peer_refused");
  CHECK(reason_name(Reason::kNoRoute) == "no_route");
  CHECK(reason_name(Reason::kTimeout) == "timeout");
  for (Reason r : {Reason::kNone, Reason::kNoRoute, Reason::kPeerRefused, Reason::kPeerClosed, Reason::kQpRtrFailed,
                   Reason::kQpRtsFailed, Reason::kRetryExceeded, Reason::kTimeout, Reason::kRemoteError,
                   Reason::kProtocolError, Reason::kDeviceError, Reason::kCompletionError, Reason::kBusy,
                   Reason::kAuthFailed, Reason::kBelowRate}) {
    auto back = reason_from_name(reason_name(r));
    REQUIRE(back);
    CHECK(*back == r);
  }
  CHECK_FALSE(reason_from_name("QP_RTR_FAILED"));
  CHECK_FALSE(reason_from_name(""));
}
