// SPDX-License-Identifier: Apache-2.0
// Test helper: the bytes of built WG_CMD_SET_DEVICE messages.
#pragma once

#include <netlink/msg.h>

#include <cstdint>
#include <vector>

#include "overlay/internal.hpp"

namespace fa_test {

// The built messages' bytes (nlmsg_len of each), as the kernel reads them.
inline std::vector<std::vector<uint8_t>> bytes_of(const std::vector<fa::overlay::WipedMsg>& msgs) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& m : msgs) {
    const nlmsghdr* h = nlmsg_hdr(m.get());
    const auto* b = reinterpret_cast<const uint8_t*>(h);
    out.emplace_back(b, b + h->nlmsg_len);
  }
  return out;
}

}  // namespace fa_test
