// SPDX-License-Identifier: Apache-2.0
// Reading HCAs and GPUs from a sysfs root (/sys, or a fixture tree). Every
// path is built from the root, so tests point it at tests/fixtures/<name>.
// Nothing here decides anything: values are parsed (probes/logic.hpp) and
// whatever cannot be read becomes a warning naming the path.
#pragma once

#include <string>
#include <vector>

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

}  // namespace fa::probes
