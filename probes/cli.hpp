// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "common/config.hpp"
#include "probes/inspect.hpp"

namespace fa::probes {

// fabric-agent inspect [--sysfs-root DIR] [--config FILE] [--json]
int cmd_inspect(const std::vector<std::string>& args);

// The config keys discovery uses: provider_id, fabric.netdev, fabric.hcas,
// overlay.interface (NCCL_SOCKET_IFNAME), sysfs_root.
InspectOptions options_from_config(const Config& c);

}  // namespace fa::probes
