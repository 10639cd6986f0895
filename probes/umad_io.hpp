// SPDX-License-Identifier: Apache-2.0
// The one place that talks to the subnet manager, through libibumad:
// SubnGet(SMInfo) to the SM (who is master) and SubnAdmGetTable(SMInfoRecord)
// to its SA (every SM of the subnet). libibumad finds its devices under
// /sys/class/infiniband_mad, whatever sysfs root discovery reads; a device
// it cannot open is an error naming the step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// What one port learns of its subnet's SMs: SMInfo from the master and the
// SA's SMInfoRecord table, each with its own error, over one umad port.
struct SmQuery {
  Result<smp::SmInfo> master = Error{"not queried"};
  Result<std::vector<smp::SmInfoRecord>> records = Error{"not queried"};
};
SmQuery query_subnet_managers(const std::string& ca, int port, uint32_t sm_lid, int timeout_ms = 200,
                              int retries = 2);

}  // namespace fa::probes
