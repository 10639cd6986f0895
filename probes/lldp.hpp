// SPDX-License-Identifier: Apache-2.0
// The switch behind each fabric netdev, as lldpd heard it. lldpd's own
// client, `lldpcli -f json0 show neighbors`, is asked (probes/lldp_io.cpp);
// its "json0" layout is the regular one (every value an array of objects,
// `{"value": ...}` for scalars), the same whether an interface has one
// neighbour or several. Decoding is pure and tested on lldpcli's output
// (tests/probes/lldp_test.cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"
#include "probes/inspect.hpp"

namespace fa::probes {

// Neighbours per local interface name; interfaces without a neighbour are
// absent (lldpcli does not list them).
Result<std::map<std::string, std::vector<LldpNeighbor>>> parse_lldpcli_neighbors(std::string_view json0);

}  // namespace fa::probes
