// SPDX-License-Identifier: Apache-2.0
#include "common/secure.hpp"

#include <openssl/crypto.h>
#include <string.h>

namespace fa {

void secure_wipe(void* p, size_t n) noexcept {
  if (n) ::explicit_bzero(p, n);
}

bool secure_equal(const void* a, const void* b, size_t n) noexcept { return CRYPTO_memcmp(a, b, n) == 0; }

}  // namespace fa
