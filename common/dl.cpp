// SPDX-License-Identifier: Apache-2.0
#include "common/dl.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace fa {

void* dl_load_or_die(const char* soname, const char* package) {
  void* h = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    std::fprintf(stderr, "fabric-agent: cannot load %s (%s); install the %s package\n", soname,
                 e ? e : "unknown error", package);
    std::abort();
  }
  return h;
}

void* dl_symbol_or_die(void* handle, const char* soname, const char* name) {
  void* p = ::dlsym(handle, name);
  if (!p) {
    std::fprintf(stderr, "fabric-agent: %s lacks %s\n", soname, name);
    std::abort();
  }
  return p;
}

}  // namespace fa
