// SPDX-License-Identifier: Apache-2.0
// Randomness from the kernel's CSPRNG (getrandom(2)) for tokens, ids and
// private keys, as `wg genkey` reads it.
#pragma once

#include <cstddef>
#include <string>

#include "common/result.hpp"

namespace fa {

// Fills `out`, blocking only until the pool is initialised at boot.
Status random_bytes(unsigned char* out, size_t n);

// Lower-case hex of `n` bytes.
std::string to_hex(const unsigned char* data, size_t n);

// `nbytes` random bytes as lower-case hex (2 * nbytes characters); the raw
// bytes are wiped before returning.
Result<std::string> random_hex(size_t nbytes);

}  // namespace fa
