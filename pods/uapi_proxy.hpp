// SPDX-License-Identifier: Apache-2.0
// A read-only UAPI socket inside a pod, so that `wg show` works there on a
// wireguard-go interface without handing the container its keys or the
// power to reconfigure it (see uapi_proxy.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace fa::pods {

// A UAPI `get` reply without its private_key= and preshared_key= lines.
std::string filter_uapi_get(std::string_view reply);

class UapiProxy {
 public:
  // Serves <rootfs>/var/run/wireguard/<ifname>.sock (resolved inside the
  // root, mode 0600) on a thread of its own: `get` is forwarded to `upstream`
  // (wireguard-go's socket on the host) and answered filtered, anything else
  // is answered EPERM. Destroying it stops the thread and removes the socket.
  static Result<std::unique_ptr<UapiProxy>> start(const std::string& rootfs, const std::string& ifname,
                                                   const std::string& upstream);
  ~UapiProxy();

 private:
  UapiProxy() = default;
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fa::pods
