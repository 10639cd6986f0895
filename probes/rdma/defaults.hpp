// SPDX-License-Identifier: Apache-2.0
// Where --hca and --gid-index come from when they are not given: discovery's
// fabric port and NCCL_IB_GID_INDEX, so the probe exercises exactly what a
// renter's NCCL job will.
#pragma once

#include <optional>

#include "common/result.hpp"
#include "probes/inspect.hpp"
#include "probes/rdma/probe.hpp"

namespace fa::rdma {

struct Target {
  HcaPort hca;
  int gid_index = 0;
};

// Fills what `hca`/`gid_index` leave open from a discovery report: the first
// fabric port and NCCL_IB_GID_INDEX (InfiniBand without one: index 0, the
// port GID, which is what NCCL uses there). Fails naming what is missing and
// which option supplies it.
Result<Target> target_from(const probes::Report& report, std::optional<HcaPort> hca, std::optional<int> gid_index);

}  // namespace fa::rdma
