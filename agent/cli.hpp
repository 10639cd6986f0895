// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

namespace fa::agent {

// fabric-agent run [--config FILE]
int cmd_run(const std::vector<std::string>& args);
// fabric-agent status [--config FILE] [--url URL] [--token-file F] [--ca-file F] [--json]
int cmd_status(const std::vector<std::string>& args);
// fabric-agent cluster form|verify --agent URL... --token-file F ...
int cmd_cluster(const std::vector<std::string>& args);
// fabric-agent slurm --agent [NODE=]URL... --token-file F --output DIR [--json]
int cmd_slurm(const std::vector<std::string>& args);

}  // namespace fa::agent
