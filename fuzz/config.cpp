// SPDX-License-Identifier: Apache-2.0
// The agent's configuration file (agent.yaml): parse_config over yaml-cpp.
// Checked: an error names the file first, as every config error promises
// (file:line:column, the key, the value, the accepted form).
#include <string>

#include "common/config.hpp"
#include "fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = fa::parse_config(fa_fuzz::text(data, size), "agent.yaml");
  if (!r) {
    FUZZ_CHECK(r.error().message.rfind("agent.yaml", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(r->source == "agent.yaml");
  FUZZ_CHECK(fa::parse_host_port(r->listen).ok());
  return 0;
}
