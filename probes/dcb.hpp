// SPDX-License-Identifier: Apache-2.0
// Is a RoCE port's path lossless? The kernel's DCB netlink interface
// (RTM_GETDCB, DCB_CMD_IEEE_GET, include/uapi/linux/dcbnl.h) reports the
// IEEE 802.1Qaz state a driver keeps (mlx5, ice, bnxt, ...): PFC (which
// priorities are paused instead of dropped, with per-priority pause frame
// counters), ETS (priority -> traffic class, bandwidth) and the APP table
// (DSCP -> priority); mlx5 also exposes its ECN switches per priority in
// sysfs. Decoding and the verdict are pure and tested on replies laid out
// as mlx5 returns them (tests/probes/dcb_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "common/result.hpp"
#include "probes/inspect.hpp"

namespace fa::probes {

struct DcbIeee {
  // PFC (DCB_ATTR_IEEE_PFC, struct ieee_pfc)
  bool has_pfc = false;
  uint8_t pfc_cap = 0;                        // how many priorities can be lossless at once
  uint8_t pfc_en = 0;                         // bit p: priority p is lossless
  std::array<uint64_t, 8> pfc_requests{};     // pause frames sent, per priority
  std::array<uint64_t, 8> pfc_indications{};  // pause frames received, per priority
  // ETS (DCB_ATTR_IEEE_ETS, struct ieee_ets)
  bool has_ets = false;
  std::array<uint8_t, 8> prio_tc{};
  std::array<uint8_t, 8> tc_tsa{};  // 0 strict, 1 CBS, 2 ETS, 255 vendor
  std::array<uint8_t, 8> tc_tx_bw{};
  // APP table (DCB_ATTR_IEEE_APP_TABLE): DSCP -> priority (selector 5)
  std::map<int, int> dscp_prio;
  std::optional<uint8_t> dcbx;  // DCB_ATTR_DCBX: DCB_CAP_DCBX_* bits
};

// The attributes of an RTM_GETDCB reply to DCB_CMD_IEEE_GET: the bytes after
// the nlmsghdr and the struct dcbmsg. Errors name the attribute at fault.
Result<DcbIeee> decode_dcb_ieee(std::span<const uint8_t> attrs);

// mlx5's ECN switches: bit p set when ECN is enabled for priority p, as
// notification point (roce_np: marks CNPs back) and reaction point (roce_rp:
// slows down on CNPs).
struct Ecn {
  uint8_t np = 0;
  uint8_t rp = 0;
};

// The verdict for one fabric port: `dcb` is the decoded reply or why there
// is none (errno EOPNOTSUPP: the driver has no DCB support), `ecn` what sysfs
// said (nullopt: the driver exposes no ECN switches).
Lossless lossless_verdict(const std::string& netdev, const Result<DcbIeee>& dcb,
                          const std::optional<Ecn>& ecn);

}  // namespace fa::probes
