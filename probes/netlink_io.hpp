// SPDX-License-Identifier: Apache-2.0
// Links, IPv4 addresses and default routes of the current network namespace,
// read over rtnetlink through libnl-route.
#pragma once

#include "probes/logic.hpp"

namespace fa::probes {

// On failure NetState::error says what could not be read; the links read
// so far are kept.
NetState read_net_state();

}  // namespace fa::probes
