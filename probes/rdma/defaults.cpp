// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/defaults.hpp"

namespace fa::rdma {

Result<Target> target_from(const probes::Report& report, std::optional<HcaPort> hca, std::optional<int> gid_index) {
  Target t;
  if (hca) {
    t.hca = *hca;
  } else {
    if (report.fabric.ports.empty()) {
      std::string why = "discovery found no ACTIVE fabric port (fabric kind '" + report.fabric.kind + "')";
      if (!report.warnings.empty()) why += "; first warning: " + report.warnings.front();
      return Error{why + "; pass --hca DEV:PORT"};
    }
    auto h = parse_hca(report.fabric.ports.front());
    if (!h) return Error{"discovery's fabric port: " + h.error().message};
    t.hca = *h;
  }
  if (gid_index) {
    t.gid_index = *gid_index;
  } else if (report.nccl.ib_gid_index) {
    auto g = parse_gid_index(*report.nccl.ib_gid_index);
    if (!g) return Error{"discovery's NCCL_IB_GID_INDEX: " + g.error().message};
    t.gid_index = *g;
  } else if (report.fabric.kind == "infiniband") {
    t.gid_index = 0;
  } else {
    return Error{"discovery chose no NCCL_IB_GID_INDEX (fabric kind '" + report.fabric.kind +
                 "'); pass --gid-index N"};
  }
  return t;
}

}  // namespace fa::rdma
