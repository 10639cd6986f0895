// SPDX-License-Identifier: Apache-2.0
#include "common/secure.hpp"

#include <string.h>

namespace fa {

void secure_wipe(void* p, size_t n) noexcept {
  if (n) ::explicit_bzero(p, n);
}

bool secure_equal(const void* a, const void* b, size_t n) noexcept {
  // Every byte is read and folded into one accumulator; volatile keeps the
  // compiler from turning the loop back into an early-exit memcmp.
  const volatile unsigned char* x = static_cast<const volatile unsigned char*>(a);
  const volatile unsigned char* y = static_cast<const volatile unsigned char*>(b);
  unsigned char diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(x[i] ^ y[i]);
  return diff == 0;
}

}  // namespace fa
