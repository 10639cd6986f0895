// SPDX-License-Identifier: Apache-2.0
#include "agent/slurm_logic.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "agent/cluster.hpp"
#include "common/random.hpp"

namespace fa::agent::slurm {

using nlohmann::json;

namespace {

std::string sha256_hex8(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(s.data(), s.size(), md, &n, EVP_sha256(), nullptr) != 1 || n < 4) return "00000000";
  return to_hex(md, 4);
}

// Lower case, each run of characters outside [a-z0-9] one '_', no '_' at
// either end, at most `max` characters.
std::string readable(const std::string& s, size_t max) {
  std::string out;
  for (unsigned char c : s) {
    c = static_cast<unsigned char>(std::tolower(c));
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) out += static_cast<char>(c);
    else if (!out.empty() && out.back() != '_') out += '_';
  }
  if (out.size() > max) out.resize(max);
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// A comment line of a generated file: printable ASCII only, so no byte of an
// id ends the comment or the line.
std::string comment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  return out;
}

std::string ticked(const std::string& s) { return "`" + s + "'"; }

}  // namespace

std::string fabric_name(const std::string& id) {
  const std::string h = sha256_hex8(id);
  if (id.rfind("ib:", 0) == 0) return "fab_ib_" + h;
  if (id.rfind("roce:", 0) == 0) {
    const size_t last = id.rfind(':');
    const std::string provider = readable(last > 5 ? id.substr(5, last - 5) : std::string(), 16);
    return "fab_roce_" + (provider.empty() ? "" : provider + "_") + h;
  }
  return "fab_" + h;
}

bool valid_node_name(const std::string& name) {
  if (name.empty()) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_' && c != '-' && c != '.') return false;
  if (name[0] == '-' || name[0] == '.') return false;
  std::string upper;
  for (unsigned char c : name) upper += static_cast<char>(std::toupper(c));
  return upper != "ALL" && upper != "DEFAULT";
}

std::variant<Plan, std::vector<Problem>> plan(const std::vector<Input>& in) {
  std::vector<Problem> problems;
  Plan p;
  std::map<std::string, std::string> agent_of_node;  // node name -> agent
  std::map<std::string, std::string> id_of_name;     // fabric name -> fabric id
  std::map<std::string, std::string> agent_of_instance;  // agent.instance -> agent
  static const char* kAccepted =
      "accepted: letters, digits, '_', '-', '.', starting with a letter, digit or '_', not ALL or DEFAULT";
  for (const auto& x : in) {
    auto bad = [&](const std::string& field, const std::string& message) {
      problems.push_back({x.agent, field, message});
    };
    if (!x.status.is_object()) {
      bad("", "its status is not a JSON object");
      continue;
    }
    // One daemon given twice (two URLs of one machine) would be two nodes.
    const json& ag = x.status.value("agent", json::object());
    if (ag.is_object() && ag.contains("instance") && ag["instance"].is_string()) {
      auto [it, fresh] = agent_of_instance.emplace(ag["instance"].get<std::string>(), x.agent);
      if (!fresh) {
        bad("agent.instance", "is the agent " + it->second + "'s: the same daemon given twice");
        continue;
      }
    }
    // The node name: NODE= from the command line, else the host name's
    // short form, which is the name slurmd registers as (`hostname -s`).
    std::string node = x.node;
    std::string node_field = "--agent NODE=URL";
    if (node.empty()) {
      node_field = "agent.hostname";
      const json& a = x.status.value("agent", json::object());
      if (!a.is_object() || !a.contains("hostname") || !a["hostname"].is_string() ||
          a["hostname"].get<std::string>().empty()) {
        bad(node_field, "is missing: the agent does not say its host name; give the Slurm node name as --agent NODE=URL");
        node.clear();
      } else {
        const std::string host = a["hostname"].get<std::string>();
        node = host.substr(0, host.find('.'));
        if (!valid_node_name(node)) {
          bad(node_field, ticked(comment(host)) + " gives no Slurm node name (" + kAccepted +
                              "); give it as --agent NODE=URL");
          node.clear();
        }
      }
    } else if (!valid_node_name(node)) {
      bad(node_field, ticked(comment(node)) + " is not a Slurm node name; " + kAccepted);
      node.clear();
    }
    if (!node.empty()) {
      auto [it, fresh] = agent_of_node.emplace(node, x.agent);
      if (!fresh) {
        bad(node_field, "node name " + ticked(node) + " is also the agent " + it->second +
                            "'s: one Slurm node per agent (give another with --agent NODE=URL)");
        node.clear();
      }
    }

    // The fabric.
    const json& ins = x.status.contains("inspect") ? x.status["inspect"] : json(nullptr);
    std::string id;
    if (!ins.is_object()) {
      std::string why = "the agent has no discovery result";
      const json& w = x.status.value("warnings", json::array());
      if (w.is_array() && !w.empty() && w[0].is_string()) why += " (" + w[0].get<std::string>() + ")";
      bad("inspect", "is null: " + why);
    } else if (!ins.contains("fabric") || !ins["fabric"].is_object()) {
      bad("inspect.fabric", "is missing: the status names no fabric");
    } else {
      const json& f = ins["fabric"];
      const std::string kind = f.contains("kind") && f["kind"].is_string() ? f["kind"].get<std::string>() : "";
      if (kind == "none")
        bad("inspect.fabric.kind",
            "is \"none\": the machine has no RDMA fabric port, so no fabric to put it on (leave it out, or see "
            "`fabric-agent inspect` on it)");
      else if (!f.contains("id") || !f["id"].is_string() || f["id"].get<std::string>().empty())
        bad("inspect.fabric.id", "is null: the fabric (" + (kind.empty() ? std::string("kind unknown") : kind) +
                                     ") has no id, so the machine may be on any fabric: " + unknown_reason(x.status));
      else
        id = f["id"].get<std::string>();
    }
    if (node.empty() || id.empty()) continue;
    const std::string name = fabric_name(id);
    auto [it, fresh] = id_of_name.emplace(name, id);
    if (!fresh && it->second != id) {
      bad("inspect.fabric.id", "fabrics " + ticked(it->second) + " and " + ticked(id) + " both map to " + name +
                                   " (8 hex digits of SHA-256 collide); they cannot be told apart in Slurm");
      continue;
    }
    p.nodes.push_back({node, x.agent, id, name});
  }
  if (!problems.empty()) return problems;

  std::map<std::string, Fabric> by_name;
  for (const auto& n : p.nodes) {
    Fabric& f = by_name[n.feature];
    f.name = n.feature;
    f.id = n.fabric_id;
    f.nodes.push_back(n.name);
  }
  for (auto& [name, f] : by_name) {
    std::sort(f.nodes.begin(), f.nodes.end());
    p.fabrics.push_back(std::move(f));
  }
  return p;
}

std::string render_topology(const Plan& p) {
  std::string out =
      "# Slurm topology.conf for TopologyPlugin=topology/tree, written by `fabric-agent slurm`\n"
      "# from the /v1/status of " +
      std::to_string(p.nodes.size()) +
      " agent(s). One switch per RDMA fabric and no switch above them:\n"
      "# Slurm places a job only on nodes under one switch tree, so never on two fabrics.\n"
      "# Copy it next to slurm.conf, then `scontrol reconfigure`. Do not set\n"
      "# TopologyParam=TopoOptional: with it Slurm lets a job span unconnected switches.\n";
  for (const auto& f : p.fabrics) {
    out += "\n# " + comment(f.id) + " (" + std::to_string(f.nodes.size()) + " node(s))\n";
    out += "SwitchName=" + f.name + " Nodes=";
    for (size_t i = 0; i < f.nodes.size(); ++i) out += (i ? "," : "") + f.nodes[i];
    out += "\n";
  }
  return out;
}

std::string render_features(const Plan& p) {
  std::string out = R"sh(#!/bin/sh
# Written by `fabric-agent slurm` from the /v1/status of )sh" +
                    std::to_string(p.nodes.size()) + R"sh( agent(s).
# Gives each node the feature of its RDMA fabric, available and active, with
# `scontrol update`. The node's other features (as `scontrol show node` has
# them when this runs) are kept; another fab_* feature is dropped.
# Run it where scontrol works, as a Slurm administrator, after topology.conf
# is loaded, and again after every `scontrol reconfigure` or slurmctld
# restart: Slurm keeps features set by scontrol only until then.
# A job then stays on one fabric with: sbatch --constraint='[)sh";
  for (size_t i = 0; i < p.fabrics.size(); ++i) out += (i ? "|" : "") + p.fabrics[i].name;
  out += R"sh(]' ...
set -eu

# The value of KEY= in a `scontrol show node --oneliner` line; "" for (null).
value() {
  v=$(printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1)
  [ "$v" = "(null)" ] || printf '%s' "$v"
}
# The features of a comma-separated list that are not fab_*.
others() {
  printf '%s\n' "$1" | tr ',' '\n' | grep -v -e '^fab_' -e '^$' | paste -sd, -
}
# fabric FEATURE NODE...
fabric() {
  f=$1
  shift
  for n in "$@"; do
    line=$(scontrol show node "$n" --oneliner)
    avail=$(others "$(value AvailableFeatures "$line")")
    active=$(others "$(value ActiveFeatures "$line")")
    scontrol update NodeName="$n" AvailableFeatures="${avail:+$avail,}$f" ActiveFeatures="${active:+$active,}$f"
    echo "$n: ${avail:+$avail,}$f"
  done
}
)sh";
  for (const auto& f : p.fabrics) {
    out += "\n# " + comment(f.id) + "\nfabric " + f.name;
    for (const auto& n : f.nodes) out += " " + n;
    out += "\n";
  }
  return out;
}

json to_json(const Plan& p) {
  json fabrics = json::array(), nodes = json::array();
  for (const auto& f : p.fabrics) fabrics.push_back({{"name", f.name}, {"id", f.id}, {"nodes", f.nodes}});
  for (const auto& n : p.nodes)
    nodes.push_back({{"node", n.name}, {"agent", n.agent}, {"fabric_id", n.fabric_id}, {"feature", n.feature}});
  return {{"fabrics", std::move(fabrics)}, {"nodes", std::move(nodes)}};
}

}  // namespace fa::agent::slurm
