// SPDX-License-Identifier: Apache-2.0
#include "overlay/internal.hpp"

namespace fa::overlay {

Result<nlohmann::json> apply(const DesiredMesh&, const ApplyOptions&) { return Error{"mesh apply: not yet built"}; }
Result<nlohmann::json> show(const std::string&, const ShowOptions&) { return Error{"mesh show: not yet built"}; }
Status down(const std::string&, const DownOptions&) { return Error{"mesh down: not yet built"}; }

}  // namespace fa::overlay
