// SPDX-License-Identifier: Apache-2.0
// Reading HCAs and GPUs from a sysfs root (/sys, or a fixture tree). Every
// path is built from the root, so tests point it at tests/fixtures/<name>.
// Nothing here decides anything: values are parsed (probes/logic.hpp) and
// whatever cannot be read becomes a warning naming the path.
#pragma once

#include <string>
#include <vector>

#include "probes/dcb.hpp"
#include "probes/inspect.hpp"

namespace fa::probes {

struct SysfsScan {
  std::vector<Hca> hcas;        // natural order of names
  std::vector<GpuDevice> gpus;  // PCI address order
};

// HCAs and GPUs in one pass, on the calling thread; warnings in reading
// order (HCAs in listing order, then the PCI scan).
SysfsScan read_sysfs(const std::string& sysfs_root, std::vector<std::string>& warnings);

std::vector<Hca> read_hcas(const std::string& sysfs_root, std::vector<std::string>& warnings);
std::vector<GpuDevice> read_gpus(const std::string& sysfs_root, std::vector<std::string>& warnings);

// mlx5's ECN switches of a netdev (class/net/<netdev>/ecn/roce_np|roce_rp/
// enable/<priority>); nullopt where the driver has none.
std::optional<Ecn> read_ecn(const std::string& sysfs_root, const std::string& netdev);

}  // namespace fa::probes
