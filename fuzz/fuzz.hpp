// SPDX-License-Identifier: Apache-2.0
// What the harnesses share. Each harness is one libFuzzer entry point over
// one reader of outside input; it feeds the bytes the way the daemon or the
// CLI does and then checks what the reader promises (a round trip, an error
// that can itself be written out), so that a wrong answer is a crash too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/log.hpp"

// A promise the input broke: libFuzzer keeps the input as a crash.
#define FUZZ_CHECK(cond)                                                                     \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);     \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)

namespace fa_fuzz {

inline std::string_view text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Millions of inputs: the daemon's log lines would be all libFuzzer prints.
inline void quiet() { fa::set_log_level("off"); }

}  // namespace fa_fuzz

// Every harness defines LLVMFuzzerTestOneInput; this one runs once first.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fa_fuzz::quiet();
  return 0;
}
