// SPDX-License-Identifier: Apache-2.0
// PUT /v1/mesh's body as the daemon reads it: fa::parse_json (depth-capped
// nlohmann), then parse_desired, the one desired-state reader.
#include "common/json.hpp"
#include "fuzz/mesh_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json doc = fa::parse_json(fa_fuzz::text(data, size));
  if (doc.is_discarded()) return 0;
  const fa::overlay::ParseOptions opt;
  auto r = fa::overlay::parse_desired(doc, opt);
  fa_fuzz::check_parsed(r);
  if (r.ok()) fa_fuzz::check_mesh(*r.value, opt);
  return 0;
}
