// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <vector>

namespace fa::rdma {

// fabric-agent probe rdma serve [--port P] [--bind ADDR] [--hca DEV:PORT] [--gid-index N]
// fabric-agent probe rdma run --peer HOST[:P] [--hca DEV:PORT] [--gid-index N] [--duration S]
//     [--size BYTES] [--window N] [--latency-iters N] [--min-fraction F] [--timeout S] [--json]
// --hca/--gid-index default to discovery's fabric port and NCCL_IB_GID_INDEX.
int cmd_probe(const std::vector<std::string>& args);

}  // namespace fa::rdma
