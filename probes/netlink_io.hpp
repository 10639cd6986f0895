// SPDX-License-Identifier: Apache-2.0
// Links, IPv4 addresses and default routes of the current network namespace,
// read over rtnetlink through libnl-route.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "probes/dcb.hpp"
#include "probes/logic.hpp"

namespace fa::probes {

// On failure NetState::error says what could not be read; the links read
// so far are kept.
NetState read_net_state();

// DCB_CMD_IEEE_GET over RTM_GETDCB for each netdev, on one socket. A driver
// without DCB support answers EOPNOTSUPP (sys_errno), a missing netdev ENODEV.
std::map<std::string, Result<DcbIeee>> read_dcb(const std::vector<std::string>& netdevs);

}  // namespace fa::probes
