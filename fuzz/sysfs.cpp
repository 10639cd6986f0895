// SPDX-License-Identifier: Apache-2.0
// Values discovery reads from sysfs (probes/logic): the input is one
// attribute's content as read_attr hands it over (one page at most, its
// trailing newline stripped), given to every value parser: port rate and
// state, LIDs, counters, GIDs, and the text shown of names and firmware
// versions. Cut at NUL bytes, its parts also go to the natural order of
// device names and to the GPU tables.
// Checked: what each parser promises of its result; printable() gives text
// JSON can hold, with no control byte, and is a fixed point; natural order
// is a strict weak order.
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "fuzz/fuzz.hpp"
#include "probes/logic.hpp"

namespace pr = fa::probes;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  std::string_view v = fa_fuzz::text(data, size);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);

  if (auto r = pr::parse_rate_gbps(v)) FUZZ_CHECK(std::isfinite(*r) && *r > 0 && *r <= 1e6);
  if (auto s = pr::parse_numbered_state(v)) {
    FUZZ_CHECK(s->first >= 0 && !s->second.empty());
    FUZZ_CHECK(s->second.front() != ' ' && s->second.back() != ' ');
  }
  if (auto n = pr::parse_uint(v)) FUZZ_CHECK(pr::parse_uint(std::to_string(*n)) == n);
  if (auto n = pr::parse_counter(v)) FUZZ_CHECK(pr::parse_counter(std::to_string(*n)) == n);
  if (pr::is_valid_gid(v)) {
    FUZZ_CHECK(pr::gid_subnet_prefix(v).size() == 19);
    if (auto a = pr::gid_ipv4(v)) FUZZ_CHECK(pr::ipv4_to_string(*a).size() >= 7);
    if (pr::is_zero_gid(v)) FUZZ_CHECK(!pr::gid_ipv4(v));
  } else {
    FUZZ_CHECK(!pr::gid_ipv4(v));
  }

  const std::string shown = pr::printable(v);
  for (unsigned char c : shown) FUZZ_CHECK(c >= 0x20 && c != 0x7f);
  FUZZ_CHECK(pr::printable(shown) == shown);
  FUZZ_CHECK(!nlohmann::json(shown).dump().empty());  // strict: throws on bytes that are not UTF-8

  std::vector<std::string_view> parts;
  for (size_t pos = 0;;) {
    size_t nul = v.find('\0', pos);
    parts.push_back(v.substr(pos, nul == std::string_view::npos ? std::string_view::npos : nul - pos));
    if (nul == std::string_view::npos || parts.size() == 3) break;
    pos = nul + 1;
  }
  for (auto a : parts) {
    FUZZ_CHECK(!pr::natural_less(a, a));
    for (auto b : parts) {
      FUZZ_CHECK(!(pr::natural_less(a, b) && pr::natural_less(b, a)));
      for (auto c : parts)
        if (pr::natural_less(a, b) && pr::natural_less(b, c)) FUZZ_CHECK(pr::natural_less(a, c));
    }
  }
  if (parts.size() >= 2) {
    (void)pr::gpu_vendor(parts[0], parts[1]);
    FUZZ_CHECK(!pr::gpu_model(parts[0], parts[1]).empty());
  }
  return 0;
}
