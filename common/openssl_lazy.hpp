// SPDX-License-Identifier: Apache-2.0
// OpenSSL, loaded on first use (common/openssl_lazy.cpp).
#pragma once

namespace fa {

// True once libcrypto has been loaded into this process (by the first call
// of any OpenSSL function the agent uses).
bool openssl_loaded() noexcept;

}  // namespace fa
