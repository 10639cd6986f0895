// SPDX-License-Identifier: Apache-2.0
// The one place that talks to the subnet manager: SubnGet(SMInfo) through
// libibumad. libibumad finds its devices under the real
// /sys/class/infiniband_mad (it cannot follow --sysfs-root), so callers only
// use this against the real /sys.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.hpp"
#include "probes/sminfo.hpp"

namespace fa::probes {

// Whether libibumad can work here at all (ib_umad loaded); the error says
// why not. Checked once per discovery pass instead of once per port.
Status umad_available();

// Sends SubnGet(SMInfo) from ca:port to sm_lid and waits for the reply.
// Errors say which step failed and why (no ib_umad, no permission, timeout).
Result<smp::SmInfo> query_sminfo(const std::string& ca, int port, uint32_t sm_lid, int timeout_ms = 200,
                                 int retries = 2);

}  // namespace fa::probes
