// SPDX-License-Identifier: Apache-2.0
// parse_json: JSON from outside the process, with nesting bounded so that
// copying, comparing or dumping a document can never exhaust the stack.
#include <catch2/catch.hpp>

#include <string>

#include "common/json.hpp"

using fa::json_depth;
using fa::kJsonMaxDepth;
using fa::parse_json;
using nlohmann::json;

namespace {
std::string nested(size_t levels, const std::string& inner = "1") {
  std::string t;
  for (size_t i = 0; i < levels; ++i) t += i % 2 ? "[" : "{\"k\":";
  t += inner;
  for (size_t i = levels; i-- > 0;) t += i % 2 ? "]" : "}";
  return t;
}
}  // namespace

TEST_CASE("json_depth counts levels of arrays and objects without recursion", "[json]") {
  CHECK(json_depth(json(7)) == 0);
  CHECK(json_depth(json::array()) == 1);
  CHECK(json_depth(json::object()) == 1);
  CHECK(json_depth(json::parse(R"({"a":[1,{"b":[[]]}],"c":{}})")) == 5);
  CHECK(json_depth(json::parse(nested(30))) == 30);
  // It stops counting once past the limit.
  CHECK(json_depth(json::parse(nested(30)), 10) == 11);
}

TEST_CASE("parse_json refuses documents nested deeper than the limit, and only those", "[json]") {
  bool deep = true;
  auto ok = parse_json(R"({"cluster_id":"c","peers":[{"allowed_ips":["10.42.0.2/32"]}]})", &deep);
  CHECK_FALSE(ok.is_discarded());
  CHECK_FALSE(deep);
  CHECK(ok["cluster_id"] == "c");

  auto bad = parse_json(R"({"cluster_id": )", &deep);
  CHECK(bad.is_discarded());
  CHECK_FALSE(deep);  // a syntax error, not depth

  CHECK_FALSE(parse_json(nested(kJsonMaxDepth)).is_discarded());
  auto over = parse_json(nested(kJsonMaxDepth + 1), &deep);
  CHECK(over.is_discarded());
  CHECK(deep);

  // 200000 levels (~0.8 MB of text): nlohmann's parser and destructor take it,
  // a dump or a copy of it would overflow the stack; parse_json hands back
  // a discarded value that is safe to copy and dump.
  auto huge = parse_json(nested(200000), &deep);
  CHECK(huge.is_discarded());
  CHECK(deep);
  json copy = huge;
  CHECK(copy.is_discarded());
  CHECK_FALSE(huge.dump().empty());
}
