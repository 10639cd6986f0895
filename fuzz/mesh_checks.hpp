// SPDX-License-Identifier: Apache-2.0
// What the mesh readers promise, checked on every input: an error can be
// printed and sent as JSON, and an accepted mesh is written as JSON
// (state.json, the API's answers) and reads back as the same mesh.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "fuzz/fuzz.hpp"
#include "overlay/overlay.hpp"

namespace fa_fuzz {

// The CLI prints str(); the API puts field, value and message into its JSON
// answer with bytes that are not UTF-8 replaced.
inline void check_errors(const std::vector<fa::overlay::ValidationError>& errors) {
  FUZZ_CHECK(!errors.empty());
  for (const auto& e : errors) {
    FUZZ_CHECK(!e.message.empty());
    std::string line = e.str();
    FUZZ_CHECK(line.size() >= e.message.size());
    nlohmann::json j = {{"field", e.field}, {"value", e.value}, {"message", e.message}};
    std::string out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    FUZZ_CHECK(!out.empty());
  }
}

// dump() with its default (strict) error handler, as dump_state writes
// state.json: a mesh it cannot write would end the daemon.
inline void check_mesh(const fa::overlay::DesiredMesh& m, const fa::overlay::ParseOptions& opt) {
  std::string text = fa::overlay::to_json(m).dump();
  auto again = fa::overlay::parse_desired(nlohmann::json::parse(text), opt);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again.value == m);
}

template <class T>
void check_parsed(const fa::overlay::Parsed<T>& r) {
  FUZZ_CHECK(r.ok() == r.errors.empty());
  if (!r.ok()) check_errors(r.errors);
}

}  // namespace fa_fuzz
