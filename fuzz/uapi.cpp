// SPDX-License-Identifier: Apache-2.0
// wireguard-go's answers on its UAPI socket, as the userspace backend
// reads them: a get=1 reply (uapi_parse_get) and a set=1 reply
// (uapi_parse_set_reply), each over the whole input.
// Checked: a device read from a reply can be shown as `mesh show` shows it,
// and a failed reply names an errno only when it carried one.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz.hpp"
#include "overlay/internal.hpp"

namespace ov = fa::overlay;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view reply = fa_fuzz::text(data, size);
  if (auto d = ov::uapi_parse_get(reply)) {
    FUZZ_CHECK(d->public_key.has_value() == d->private_key.has_value());
    ov::Shown s;
    s.interface = "wg0";
    s.backend = ov::Backend::Userspace;
    s.device = std::move(*d);
    std::string out = ov::to_json(s).dump();
    FUZZ_CHECK(!out.empty());
  } else {
    FUZZ_CHECK(!d.error().message.empty());
  }
  if (auto st = ov::uapi_parse_set_reply(reply); !st) FUZZ_CHECK(!st.error().message.empty());
  return 0;
}
