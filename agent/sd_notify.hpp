// SPDX-License-Identifier: Apache-2.0
// sd_notify(3) and sd_watchdog_enabled(3) from libsystemd, loaded on first
// use and only when systemd asked for it ($NOTIFY_SOCKET, $WATCHDOG_USEC):
// both calls do nothing without those variables, and linking libsystemd
// drags six more shared libraries (gcrypt, lzma, zstd, lz4, cap, gpg-error)
// into every short `inspect`, `mesh apply` and OCI-hook run.
#pragma once

#include <cstdint>
#include <string>

namespace fa::agent::sd {

// As sd_notify(0, state): > 0 sent, 0 nobody listening, < 0 -errno.
// -ELIBACC: $NOTIFY_SOCKET is set but libsystemd.so.0 could not be loaded
// (load_error() says why).
int notify(const char* state);

// As sd_watchdog_enabled(0, usec): > 0 with *usec set when systemd expects
// pings, 0 when not, < 0 -errno.
int watchdog_enabled(uint64_t* usec);

// dlerror() text of a failed load; empty when loaded or never needed.
std::string load_error();

}  // namespace fa::agent::sd
