// SPDX-License-Identifier: Apache-2.0
// The owner of a libnl socket, for every module that opens one (overlay's
// rtnetlink and genl, discovery's rtnetlink read, the daemon's watch).
#pragma once

#include <netlink/socket.h>

#include <memory>

namespace fa {

struct NlSockFree {
  void operator()(nl_sock* s) const { nl_socket_free(s); }
};
using NlSock = std::unique_ptr<nl_sock, NlSockFree>;

}  // namespace fa
