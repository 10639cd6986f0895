// SPDX-License-Identifier: Apache-2.0
// LLDP neighbours from a running lldpd, through lldpd's own client: the
// agent runs `lldpcli -f json0 show neighbors` (lldpd keeps its client
// protocol private to liblldpctl and lldpcli, and liblldpctl ships inside
// the lldpd package: linking it would make lldpd a dependency of every
// install). Nothing is sent on the wire here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "probes/inspect.hpp"

namespace fa::probes {

// Neighbours per local interface name. `socket`: lldpd's control socket, ""
// for lldpcli's default. The error says why lldpd could not be asked, in
// the terms an operator acts on.
Result<std::map<std::string, std::vector<LldpNeighbor>>> read_lldp_neighbors(const std::string& socket);

}  // namespace fa::probes
