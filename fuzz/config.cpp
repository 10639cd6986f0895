// SPDX-License-Identifier: Apache-2.0
// The agent's configuration (agent.yaml and its drop-ins): parse_config over
// yaml-cpp, and parse_config_layers when the input holds a line "#---8<---":
// the text before it is agent.yaml, each part after it a drop-in laid over it.
// Checked: an error names one of the files first, as every config error
// promises (file:line:column, the key, the value, the accepted form).
#include <string>
#include <vector>

#include "common/config.hpp"
#include "fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(fa_fuzz::text(data, size));
  static const std::string cut = "\n#---8<---\n";
  std::vector<fa::ConfigLayer> layers;
  for (size_t from = 0;;) {
    const size_t at = in.find(cut, from);
    const std::string name = layers.empty() ? "agent.yaml" : "agent.yaml.d/" + std::to_string(layers.size()) + ".yaml";
    layers.push_back({in.substr(from, at == std::string::npos ? std::string::npos : at - from), name});
    if (at == std::string::npos) break;
    from = at + cut.size();
  }
  auto r = layers.size() == 1 ? fa::parse_config(layers[0].text, "agent.yaml") : fa::parse_config_layers(layers);
  if (!r) {
    FUZZ_CHECK(r.error().message.rfind("agent.yaml", 0) == 0);
    return 0;
  }
  FUZZ_CHECK(r->source == "agent.yaml");
  FUZZ_CHECK(r->dropins.size() == layers.size() - 1);
  FUZZ_CHECK(fa::parse_host_port(r->listen).ok());
  return 0;
}
