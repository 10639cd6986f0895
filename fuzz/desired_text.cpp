// SPDX-License-Identifier: Apache-2.0
// A `mesh apply` file: parse_desired_text reads JSON (text starting with
// '{') or YAML, converted to the same document, then parse_desired.
#include "fuzz/mesh_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fa::overlay::ParseOptions opt;
  auto r = fa::overlay::parse_desired_text(fa_fuzz::text(data, size), opt);
  fa_fuzz::check_parsed(r);
  if (r.ok()) fa_fuzz::check_mesh(*r.value, opt);
  return 0;
}
