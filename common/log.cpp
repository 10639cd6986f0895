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
#include <ctime>
#include <iterator>
#include <mutex>

namespace fa {
namespace {
std::mutex g_mu;
std::atomic<spdlog::level::level_enum> g_level{spdlog::level::info};

// The line's time in UTC, RFC 3339 with milliseconds and a Z: unambiguous
// across hosts and DST. glibc's gmtime_r is the calendar, as elsewhere in
// the agent; seconds are floored so a time before the epoch reads right.
class UtcTime final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    const auto secs = floor<seconds>(msg.time);
    const std::time_t t = secs.time_since_epoch().count();
    std::tm tm{};
    gmtime_r(&t, &tm);
    fmt::format_to(std::back_inserter(dest), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900,
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   duration_cast<milliseconds>(msg.time - secs).count());
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
