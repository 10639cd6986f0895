// SPDX-License-Identifier: Apache-2.0
// What a container runtime hands the OCI hook: the state on its stdin
// (parse_oci_state) and the bundle's config.json (parse_oci_config), each
// over the whole input, then the whole-machine decision on a host with
// eight NVIDIA GPUs and one with an AMD GPU.
// Checked: errors say which document they are about; an accepted state
// names an absolute bundle; a refusal names what is missing.
#include "fuzz/fuzz.hpp"
#include "pods/pods.hpp"

namespace pods = fa::pods;

namespace {

pods::HostGpus nvidia_host() {
  pods::HostGpus h;
  for (uint32_t i = 0; i < 8; ++i) h.nvidia.push_back({"/dev/nvidia" + std::to_string(i), 'c', 195, i});
  return h;
}

pods::HostGpus amd_host() {
  pods::HostGpus h;
  h.amd_kfd = true;
  h.amd = {{"/dev/kfd", 'c', 235, 0}, {"/dev/dri/renderD128", 'c', 226, 128}};
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fa_fuzz::text(data, size);
  if (auto s = pods::parse_oci_state(text)) {
    FUZZ_CHECK(!s->id.empty());
    FUZZ_CHECK(!s->bundle.empty() && s->bundle[0] == '/');
    FUZZ_CHECK(s->pid >= 0);
  } else {
    FUZZ_CHECK(s.error().message.rfind("OCI state: ", 0) == 0);
  }
  auto c = pods::parse_oci_config(text);
  if (!c) {
    FUZZ_CHECK(c.error().message.rfind("config.json: ", 0) == 0);
    return 0;
  }
  static const pods::HostGpus nvidia = nvidia_host(), amd = amd_host();
  for (const auto* host : {&nvidia, &amd})
    if (auto why = pods::check_whole_machine(*host, *c)) FUZZ_CHECK(why->find("missing") != std::string::npos);
  return 0;
}
