// SPDX-License-Identifier: Apache-2.0
#include "overlay/internal.hpp"

namespace fa::overlay {
std::unique_ptr<WgBackend> make_kernel_backend() { return nullptr; }
}  // namespace fa::overlay
