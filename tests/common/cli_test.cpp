// SPDX-License-Identifier: Apache-2.0
#include <locale.h>

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

TEST_CASE("parse_decimal reads plain decimals, whatever the locale, and nothing else", "[cli]") {
  CHECK(fa::parse_decimal("400") == 400.0);
  CHECK(fa::parse_decimal("2.5") == 2.5);
  CHECK(fa::parse_decimal(".5") == 0.5);
  CHECK(fa::parse_decimal("5.") == 5.0);
  CHECK(fa::parse_decimal("-0.95") == -0.95);
  CHECK(fa::parse_decimal("1e3") == 1000.0);
  CHECK(fa::parse_decimal("2.5E-1") == 0.25);
  CHECK(fa::parse_decimal("0.1") == 0.1);  // the nearest double, as from_chars gives
  for (const char* bad : {"", "-", ".", "+1", " 1", "1 ", "1,5", "0x10", "inf", "nan", "1e", "1e+", "1.2.3",
                          "e5", "--1", "1e999"})
    CHECK_FALSE(fa::parse_decimal(bad).has_value());
  // A decimal comma locale must not change what is read (the agent never
  // calls setlocale, but a library it loads might).
  if (locale_t de = ::newlocale(LC_NUMERIC_MASK, "de_DE.UTF-8", nullptr)) {
    locale_t old = ::uselocale(de);
    CHECK(fa::parse_decimal("2.5") == 2.5);
    CHECK_FALSE(fa::parse_decimal("2,5").has_value());
    ::uselocale(old);
    ::freelocale(de);
  }
}
