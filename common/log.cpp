// SPDX-License-Identifier: Apache-2.0
#include "common/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ansicolor_sink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>

namespace fa {
namespace {
std::mutex g_mu;
std::atomic<spdlog::level::level_enum> g_level{spdlog::level::info};

// The civil date (year, month, day) of a count of days since 1970-01-01, in
// the proleptic Gregorian calendar: Howard Hinnant's civil_from_days, the
// algorithm behind <chrono>'s year_month_day (which GCC 10's library, the
// release build's, does not have).
struct CivilDate {
  long long year;
  unsigned month, day;
};
constexpr CivilDate civil_from_days(long long z) {
  z += 719468;  // days from 0000-03-01 to 1970-01-01
  const long long era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);              // day of the 400-year era
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // year of the era
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);            // day of the March-based year
  const unsigned mp = (5 * doy + 2) / 153;                                 // month, March = 0
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  return {static_cast<long long>(yoe) + era * 400 + (month <= 2), month, doy - (153 * mp + 2) / 5 + 1};
}

// The line's time in UTC, RFC 3339 with milliseconds and a Z, computed from
// the clock alone: unambiguous across hosts and DST, and glibc's
// gmtime/localtime, which load the time zone file (/etc/localtime) on first
// use, are never called: a short-lived command's first line costs no file read.
class UtcTime final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    const auto t = time_point_cast<milliseconds>(msg.time);
    const auto day = floor<days>(t);
    const CivilDate date = civil_from_days(day.time_since_epoch().count());
    const long long ms = (t - day).count();  // [0, 86400000)
    fmt::format_to(std::back_inserter(dest), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", date.year, date.month,
                   date.day, ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, ms % 1000);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<UtcTime>(); }
};

// The syslog priority as sd-daemon(3)'s "<N>" line prefix, which journald
// strips and stores as the entry's PRIORITY.
class SyslogPrefix final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char kPrio[] = {'7', '7', '6', '4', '3', '2'};  // trace, debug, info, warn, err, critical
    const auto l = static_cast<size_t>(msg.level);
    const char p[] = {'<', l < sizeof kPrio ? kPrio[l] : '6', '>'};
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<SyslogPrefix>(); }
};
}  // namespace

bool stderr_is_journal() {
  // systemd sets JOURNAL_STREAM=DEV:INODE of the stream it connected to
  // stderr; a redirected stderr (a pipe, a file) no longer matches it.
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  return ::fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

std::unique_ptr<spdlog::formatter> line_formatter(bool journal) {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  if (journal) f->add_flag<SyslogPrefix>('*').set_pattern("%*%l [%n] %v");
  else f->add_flag<UtcTime>('*').set_pattern("%* %^%l%$ [%n] %v");
  return f;
}

std::unique_ptr<spdlog::formatter> line_formatter() { return line_formatter(stderr_is_journal()); }

std::shared_ptr<spdlog::logger> logger(const std::string& subsystem) {
  std::lock_guard lk(g_mu);
  if (auto l = spdlog::get(subsystem)) return l;
  auto l = std::make_shared<spdlog::logger>(subsystem, std::make_shared<spdlog::sinks::ansicolor_stderr_sink_mt>());
  l->set_level(g_level.load());
  l->set_formatter(line_formatter());
  spdlog::register_logger(l);
  return l;
}

bool set_log_level(const std::string& level) {
  auto lv = spdlog::level::from_str(level);
  if (lv == spdlog::level::off && level != "off") return false;
  std::lock_guard lk(g_mu);
  g_level = lv;
  spdlog::apply_all([lv](const std::shared_ptr<spdlog::logger>& l) { l->set_level(lv); });
  return true;
}

bool log_enabled(spdlog::level::level_enum level) { return level >= g_level.load(std::memory_order_relaxed); }

}  // namespace fa
