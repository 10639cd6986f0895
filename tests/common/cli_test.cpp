// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "common/cli.hpp"

using fa::Args;

TEST_CASE("options take values in both spellings and booleans take none", "[cli]") {
  auto a = Args::parse({"--sysfs-root", "/x", "--json", "pos", "--config=/c.yaml"},
                       {{"sysfs-root", true}, {"config", true}, {"json", false}});
  REQUIRE(a.ok());
  CHECK(a->get("sysfs-root") == "/x");
  CHECK(a->get("config") == "/c.yaml");
  CHECK(a->has("json"));
  CHECK_FALSE(a->has("other"));
  REQUIRE(a->positional().size() == 1);
  CHECK(a->positional()[0] == "pos");
}

TEST_CASE("unknown options and missing values are named", "[cli]") {
  auto a = Args::parse({"--jsn"}, {{"json", false}, {"config", true}});
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().message == "unknown option '--jsn' (accepted: --json, --config)");

  auto b = Args::parse({"--config"}, {{"config", true}});
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().message == "option '--config' needs a value");

  auto c = Args::parse({"--json=yes"}, {{"json", false}});
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message.find("takes no value") != std::string::npos);
}
