// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <ctime>
#include <regex>

#include "common/log.hpp"

TEST_CASE("log lines start with the UTC time in RFC 3339, then level and subsystem", "[log]") {
  auto f = fa::line_formatter();
  spdlog::details::log_msg msg(spdlog::source_loc{}, "overlay", spdlog::level::info, "wg0: peers +1 -0 ~0");
  // 2026-11-29T23:04:47.733Z, and a leap day just after midnight,
  // 2024-02-29T00:00:00.007Z.
  for (std::time_t secs : {std::time_t(1795993487), std::time_t(1709164800)}) {
    msg.time = std::chrono::system_clock::from_time_t(secs) +
               std::chrono::milliseconds(secs == 1709164800 ? 7 : 733);
    spdlog::memory_buf_t out;
    f->format(msg, out);
    std::string line(out.data(), out.size());
    std::tm tm{};
    gmtime_r(&secs, &tm);  // the reference: glibc's own calendar
    char want[32];
    std::strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
    INFO(line);
    CHECK(line.rfind(std::string(want) + (secs == 1709164800 ? ".007Z" : ".733Z") +
                         " info [overlay] wg0: peers +1 -0 ~0",
                     0) == 0);
  }
}

TEST_CASE("log_enabled follows the level set_log_level sets", "[log]") {
  REQUIRE(fa::set_log_level("warn"));
  CHECK_FALSE(fa::log_enabled(spdlog::level::debug));
  CHECK_FALSE(fa::log_enabled(spdlog::level::info));
  CHECK(fa::log_enabled(spdlog::level::warn));
  CHECK(fa::log_enabled(spdlog::level::err));
  REQUIRE(fa::set_log_level("debug"));
  CHECK(fa::log_enabled(spdlog::level::debug));
  CHECK_FALSE(fa::log_enabled(spdlog::level::trace));
  CHECK_FALSE(fa::set_log_level("loud"));  // refused, the level stays
  CHECK(fa::log_enabled(spdlog::level::debug));
  REQUIRE(fa::set_log_level("info"));
  CHECK_FALSE(fa::log_enabled(spdlog::level::debug));
}
