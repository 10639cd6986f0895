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

// HCAs and GPUs in one pass. Nearly all of its time is the kernel's per-file
// cost (openat + read + close of ~2400 attributes on an 8-GPU node), so the
// HCAs and the PCI scan are read by `threads` threads (0: one per CPU this
// process may run on, at most one per HCA plus one). Warnings are appended
// in the same order and the result is the same whatever the thread count.
SysfsScan read_sysfs(const std::string& sysfs_root, std::vector<std::string>& warnings,
                     unsigned threads = 0);

std::vector<Hca> read_hcas(const std::string& sysfs_root, std::vector<std::string>& warnings,
                           unsigned threads = 0);
std::vector<GpuDevice> read_gpus(const std::string& sysfs_root, std::vector<std::string>& warnings);

}  // namespace fa::probes
