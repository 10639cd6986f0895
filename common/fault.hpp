// SPDX-License-Identifier: Apache-2.0
// Crash points for the kill-point tests (tests/agent/killpoints.py): the
// places where a process dying (a power cut, kill -9, the OOM killer) must
// leave state that the next start converges from: between the steps of a
// state write, between the requests of a change to the kernel or to
// wireguard-go, between the link's configuration steps.
//
// Inert unless the environment of the process says otherwise:
//   FA_FAULT_AT=N     the Nth point passed kills the process with SIGKILL
//   FA_FAULT_LOG=F    each point passed is appended to F as "N name"
#pragma once

namespace fa {

void fault_point(const char* name);

}  // namespace fa
