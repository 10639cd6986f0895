// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <regex>
#include <string>
#include <utility>

#include "common/log.hpp"

TEST_CASE("log lines start with the UTC time in RFC 3339, then level and subsystem", "[log]") {
  auto f = fa::line_formatter();
  spdlog::details::log_msg msg(spdlog::source_loc{}, "overlay", spdlog::level::info, "wg0: peers +1 -0 ~0");
  // 2026-11-29T23:04:47.733Z, a leap day just after midnight
  // (2024-02-29T00:00:00.007Z), the leap day of a year divisible by 400
  // (2000-02-29), the day after February in a century year that is not a
  // leap year (2100-03-01), and the last millisecond before the epoch.
  const std::pair<std::time_t, int> times[] = {
      {1795993487, 733}, {1709164800, 7}, {951782400 + 86399, 999}, {4107542400, 0}, {-1, 999}};
  for (auto [secs, ms] : times) {
    msg.time = std::chrono::system_clock::from_time_t(secs) + std::chrono::milliseconds(ms);
    spdlog::memory_buf_t out;
    f->format(msg, out);
    std::string line(out.data(), out.size());
    std::tm tm{};
    gmtime_r(&secs, &tm);  // the reference: glibc's own calendar
    char want[48];
    std::strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03dZ", ms);
    INFO(line);
    CHECK(line.rfind(std::string(want) + frac + " info [overlay] wg0: peers +1 -0 ~0", 0) == 0);
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

TEST_CASE("under journald a line carries its syslog priority as <N> and no time of its own", "[log]") {
  auto f = fa::line_formatter(true);
  const std::pair<spdlog::level::level_enum, std::string> want[] = {
      {spdlog::level::trace, "<7>trace"}, {spdlog::level::debug, "<7>debug"},     {spdlog::level::info, "<6>info"},
      {spdlog::level::warn, "<4>warning"}, {spdlog::level::err, "<3>error"}, {spdlog::level::critical, "<2>critical"}};
  for (const auto& [level, prefix] : want) {
    spdlog::details::log_msg msg(spdlog::source_loc{}, "pods", level, "no fabric port is ACTIVE");
    spdlog::memory_buf_t out;
    f->format(msg, out);
    CHECK(std::string(out.data(), out.size()) == prefix + " [pods] no fabric port is ACTIVE\n");
  }
}

TEST_CASE("stderr is the journal only when JOURNAL_STREAM names stderr's own device and inode", "[log]") {
  char path[] = "/tmp/fa-log-test.XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::unlink(path);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  REQUIRE(::dup2(fd, STDERR_FILENO) == STDERR_FILENO);
  const std::string match = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  ::setenv("JOURNAL_STREAM", match.c_str(), 1);
  const bool matched = fa::stderr_is_journal();
  ::setenv("JOURNAL_STREAM", (std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1)).c_str(), 1);
  const bool other = fa::stderr_is_journal();
  ::setenv("JOURNAL_STREAM", "garbage", 1);
  const bool garbage = fa::stderr_is_journal();
  ::unsetenv("JOURNAL_STREAM");
  const bool unset = fa::stderr_is_journal();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(fd);
  CHECK(matched);
  CHECK_FALSE(other);
  CHECK_FALSE(garbage);
  CHECK_FALSE(unset);
}
