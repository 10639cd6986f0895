// SPDX-License-Identifier: Apache-2.0
#include "common/log.hpp"

#include <spdlog/sinks/ansicolor_sink.h>

#include <mutex>

namespace fa {
namespace {
std::mutex g_mu;
spdlog::level::level_enum g_level = spdlog::level::info;
}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& subsystem) {
  std::lock_guard lk(g_mu);
  if (auto l = spdlog::get(subsystem)) return l;
  auto l = std::make_shared<spdlog::logger>(subsystem, std::make_shared<spdlog::sinks::ansicolor_stderr_sink_mt>());
  l->set_level(g_level);
  // RFC 3339 in UTC: unambiguous across hosts and DST, and no time zone
  // file to read before a short-lived command's first line.
  l->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%l%$ [%n] %v", spdlog::pattern_time_type::utc);
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

}  // namespace fa
