// SPDX-License-Identifier: Apache-2.0
// Handling of secrets (tokens, private keys): wiped when done with, and
// compared in a time that does not depend on their content (OpenSSL's
// CRYPTO_memcmp).
#pragma once

#include <cstddef>

namespace fa {

// Overwrites `n` bytes at `p` with zeros in a way the compiler does not
// elide (explicit_bzero(3)).
void secure_wipe(void* p, size_t n) noexcept;

// True when the `n` bytes at `a` and `b` are equal. The time taken depends
// on `n` only, never on where the first difference is.
bool secure_equal(const void* a, const void* b, size_t n) noexcept;

}  // namespace fa
