// SPDX-License-Identifier: Apache-2.0
// `fabric-agent cdi generate` and `fabric-agent oci-hook <stage>`.
#pragma once

#include <string>
#include <vector>

namespace fa::pods {

int cmd_cdi(const std::vector<std::string>& args);
int cmd_oci_hook(const std::vector<std::string>& args);

}  // namespace fa::pods
