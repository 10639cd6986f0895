// SPDX-License-Identifier: Apache-2.0
// dlopen()/dlsym() for a library the package depends on but the binary does
// not load at start (common/openssl_lazy.cpp, probes/ib_lazy.cpp): missing,
// it is a broken install, so the process stops and says which package.
#pragma once

namespace fa {

// RTLD_NOW | RTLD_LOCAL; on failure prints "cannot load SONAME (...);
// install the PACKAGE package" and aborts.
void* dl_load_or_die(const char* soname, const char* package);

// The default version of `name` in `handle`; on failure prints "SONAME
// lacks NAME" and aborts.
void* dl_symbol_or_die(void* handle, const char* soname, const char* name);

}  // namespace fa
