// SPDX-License-Identifier: Apache-2.0
#include "agent/sd_notify.hpp"

#include <dlfcn.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstdlib>
#include <mutex>

namespace fa::agent::sd {
namespace {

struct Lib {
  decltype(&::sd_notify) notify = nullptr;
  decltype(&::sd_watchdog_enabled) watchdog_enabled = nullptr;
  std::string error;
};

const Lib& lib() {
  static const Lib l = [] {
    Lib out;
    // The soname, as the package's Depends (libsystemd0 / systemd-libs) provides it.
    void* h = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = ::dlerror();
      out.error = e ? e : "dlopen libsystemd.so.0 failed";
      return out;
    }
    out.notify = reinterpret_cast<decltype(&::sd_notify)>(::dlsym(h, "sd_notify"));
    out.watchdog_enabled = reinterpret_cast<decltype(&::sd_watchdog_enabled)>(::dlsym(h, "sd_watchdog_enabled"));
    if (!out.notify || !out.watchdog_enabled) out.error = "libsystemd.so.0 lacks sd_notify or sd_watchdog_enabled";
    return out;
  }();
  return l;
}

bool asked(const char* var) {
  const char* v = std::getenv(var);
  return v && *v;
}

}  // namespace

int notify(const char* state) {
  if (!asked("NOTIFY_SOCKET")) return 0;
  const Lib& l = lib();
  if (!l.notify) return -ELIBACC;
  return l.notify(0, state);
}

int watchdog_enabled(uint64_t* usec) {
  if (!asked("WATCHDOG_USEC")) return 0;
  const Lib& l = lib();
  if (!l.watchdog_enabled) return -ELIBACC;
  return l.watchdog_enabled(0, usec);
}

std::string load_error() {
  if (!asked("NOTIFY_SOCKET") && !asked("WATCHDOG_USEC")) return {};
  return lib().error;
}

}  // namespace fa::agent::sd
