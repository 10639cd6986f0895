// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

namespace fa::overlay {

// `fabric-agent mesh apply --file FILE [--backend auto|kernel|userspace]`,
// `mesh show [--interface IF] [--netns NS] [--json]`, `mesh down [--interface IF] [--netns NS]`.
int cmd_mesh(const std::vector<std::string>& args);

}  // namespace fa::overlay
