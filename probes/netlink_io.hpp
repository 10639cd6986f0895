// SPDX-License-Identifier: Apache-2.0
// Links, IPv4 addresses and default routes of the current network namespace,
// read over rtnetlink through libnl-route.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "probes/dcb.hpp"
#include "probes/logic.hpp"

struct nl_cache;

namespace fa::probes {

// On failure NetState::error says what could not be read; the links read
// so far are kept.
NetState read_net_state();

// The part of read_net_state() that reads what the kernel said: the state
// from libnl-route caches of links, addresses and routes (either of the
// last two may be null: not read). Takes no socket, so fuzz/ feeds it
// caches parsed from messages made of any bytes.
NetState net_state_from(nl_cache* links, nl_cache* addrs, nl_cache* routes);

// DCB_CMD_IEEE_GET over RTM_GETDCB for each netdev, on one socket. A driver
// without DCB support answers EOPNOTSUPP (sys_errno), a missing netdev ENODEV.
std::map<std::string, Result<DcbIeee>> read_dcb(const std::vector<std::string>& netdevs);

}  // namespace fa::probes
