// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

#include "common/config.hpp"
#include "probes/health.hpp"

namespace fa::probes {

// fabric-agent check [--sysfs-root DIR] [--config FILE] [--json]: the
// host's health in one discovery pass, NHC-style: exit 0 healthy, 1 a
// condition holds (one line per condition, naming the device), 2 usage or
// config error.
int cmd_check(const std::vector<std::string>& args);

// The config's health: section as the conditions' thresholds.
HealthConfig health_from_config(const Config& c);

}  // namespace fa::probes
