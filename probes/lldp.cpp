// SPDX-License-Identifier: Apache-2.0
#include "probes/lldp.hpp"

#include <nlohmann/json.hpp>

namespace fa::probes {
namespace {

using nlohmann::json;

// json0 wraps each object in an array of one; a key lldpcli had nothing
// for is absent.
const json* first(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  if (it == o.end() || !it->is_array() || it->empty() || !(*it)[0].is_object()) return nullptr;
  return &(*it)[0];
}

std::string field(const json* o, const char* key) {
  if (!o) return "";
  auto it = o->find(key);
  return it != o->end() && it->is_string() ? it->get<std::string>() : "";
}

// {"value": "..."} under key.
std::string value(const json& o, const char* key) { return field(first(o, key), "value"); }

}  // namespace

Result<std::map<std::string, std::vector<LldpNeighbor>>> parse_lldpcli_neighbors(std::string_view json0) {
  json doc = json::parse(json0, nullptr, false);
  const json* lldp = doc.is_discarded() ? nullptr : first(doc, "lldp");
  if (!lldp) return Error{"lldpcli's answer is not its json0 document (no \"lldp\" list)", EPROTO};
  std::map<std::string, std::vector<LldpNeighbor>> out;
  auto ifs = lldp->find("interface");
  if (ifs == lldp->end()) return out;  // no neighbour anywhere
  if (!ifs->is_array()) return Error{"lldpcli's answer: \"interface\" is not a list", EPROTO};
  for (const json& i : *ifs) {
    std::string name = i.is_object() ? field(&i, "name") : "";
    if (name.empty()) return Error{"lldpcli's answer: an interface without a name", EPROTO};
    const json* chassis = first(i, "chassis");
    const json* port = first(i, "port");
    LldpNeighbor n;
    n.chassis_id = field(chassis ? first(*chassis, "id") : nullptr, "value");
    n.chassis_id_subtype = field(chassis ? first(*chassis, "id") : nullptr, "type");
    n.system_name = chassis ? value(*chassis, "name") : "";
    n.port_id = field(port ? first(*port, "id") : nullptr, "value");
    n.port_id_subtype = field(port ? first(*port, "id") : nullptr, "type");
    n.port_descr = port ? value(*port, "descr") : "";
    out[name].push_back(std::move(n));
  }
  return out;
}

}  // namespace fa::probes
