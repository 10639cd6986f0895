// SPDX-License-Identifier: Apache-2.0
// JSON from outside the process (HTTP bodies, the pod socket, the runtime's
// OCI state, other agents' answers, files) is parsed through parse_json().
//
// nlohmann's parser and destructor need no stack per level, but copying,
// comparing and dumping a document recurse once per level of nesting: a
// 300 KB body of 150000 nested arrays overflowed the stack of the daemon
// the first time a value of it was echoed in an error message. Documents
// this project reads nest 4 levels; deeper than kJsonMaxDepth is refused
// like a syntax error.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

namespace fa {

inline constexpr size_t kJsonMaxDepth = 64;

// Levels of arrays and objects in `doc` (a scalar: 0, [] or {}: 1), counted
// without recursion; stops as soon as the count passes `limit`.
size_t json_depth(const nlohmann::json& doc, size_t limit = kJsonMaxDepth);

// nlohmann::json::parse(text, nullptr, false), except that a document nested
// deeper than max_depth is a discarded value as well (*too_deep says which).
nlohmann::json parse_json(std::string_view text, bool* too_deep = nullptr, size_t max_depth = kJsonMaxDepth);

}  // namespace fa
