// SPDX-License-Identifier: Apache-2.0
// Short-lived helper processes of the agent's own binaries.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace fa {

// Runs `path` with `argv` (argv[0] included) and the caller's environment:
// `input` on its stdin (then end of file), and returns what it printed on
// stdout (at most 4 KiB; stderr is the caller's). The child gets one end of
// a socket pair as both streams, so a child that is gone is an error here,
// never a SIGPIPE. `input` may hold a secret: the copy made for sending is
// wiped, and the caller wipes its own. A child that has not finished within
// `timeout` is killed. A non-zero exit or a signal is an error naming
// `what`, the exit status or the signal.
Result<std::string> run_child(const std::string& path, const std::vector<std::string>& argv,
                              const std::string& input, const std::string& what,
                              std::chrono::milliseconds timeout = std::chrono::seconds(10));

// The agent is two executables (docs/packaging.md, "Two executables"): the
// command-line front at bin/fabric-agent, static and free of the shared
// libraries the daemon needs, and the whole agent at
// libexec/fabric-agent/fabric-agent, which the front runs for every other
// command. This is the whole agent's path, found from this process's own
// executable: <prefix>/libexec/fabric-agent/fabric-agent for a front at
// <prefix>/<dir>/fabric-agent (the build tree has the same layout:
// build/agent/fabric-agent, build/libexec/fabric-agent/fabric-agent).
Result<std::string> whole_agent_path();

}  // namespace fa
