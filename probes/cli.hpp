// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

namespace fa::probes {

// fabric-agent inspect [--sysfs-root DIR] [--config FILE] [--json]
int cmd_inspect(const std::vector<std::string>& args);

}  // namespace fa::probes
