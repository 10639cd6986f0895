// SPDX-License-Identifier: Apache-2.0
// One spdlog logger per subsystem ("probes", "overlay", "api", ...), all
// writing to stderr, where journald picks them up under systemd.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace fa {

std::shared_ptr<spdlog::logger> logger(const std::string& subsystem);

// Every line: "2026-11-29T23:04:47.733Z info [overlay] message", the time
// in UTC (RFC 3339, milliseconds). When stderr is the journal
// (stderr_is_journal()): "<4>warning [overlay] message", the syslog priority
// as sd-daemon's prefix, which journald turns into the entry's priority
// (`journalctl -p warning`), and no time, which the journal keeps itself.
std::unique_ptr<spdlog::formatter> line_formatter();
std::unique_ptr<spdlog::formatter> line_formatter(bool journal);

// Whether stderr is the stream systemd connected to the journal
// ($JOURNAL_STREAM names its device and inode).
bool stderr_is_journal();

// Applies to every logger, existing and future. Accepts spdlog level names
// (trace, debug, info, warn, error, critical, off).
bool set_log_level(const std::string& level);

// Whether a line at `level` would be written (the level set_log_level
// set): lets a caller skip computing a line's arguments, and a short-lived
// command that logs nothing skip creating its logger (an stderr sink, its
// isatty(3), a pattern compiled).
bool log_enabled(spdlog::level::level_enum level);

}  // namespace fa
