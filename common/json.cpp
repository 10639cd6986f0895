// SPDX-License-Identifier: Apache-2.0
#include "common/json.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace fa {

size_t json_depth(const nlohmann::json& doc, size_t limit) {
  size_t deepest = 0;
  std::vector<std::pair<const nlohmann::json*, size_t>> todo;  // a structured value, its depth
  if (doc.is_structured()) todo.emplace_back(&doc, 1);
  while (!todo.empty()) {
    auto [j, depth] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, depth);
    if (deepest > limit) break;
    for (const auto& child : *j)
      if (child.is_structured()) todo.emplace_back(&child, depth + 1);
  }
  return deepest;
}

nlohmann::json parse_json(std::string_view text, bool* too_deep, size_t max_depth) {
  if (too_deep) *too_deep = false;
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_discarded() && json_depth(doc, max_depth) > max_depth) {
    if (too_deep) *too_deep = true;
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return doc;
}

}  // namespace fa
