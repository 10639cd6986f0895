// SPDX-License-Identifier: Apache-2.0
#include "probes/cli.hpp"

#include <cstdio>

namespace fa::probes {

int cmd_inspect(const std::vector<std::string>&) {
  std::fprintf(stderr, "fabric-agent inspect: discovery is being built (issue 2)\n");
  return 1;
}

}  // namespace fa::probes
