// SPDX-License-Identifier: Apache-2.0
// The decisions of `fabric-agent slurm`, as pure functions of the agents'
// /v1/status documents, tested on data (tests/agent/slurm_logic_test.cpp):
//   fabric_name      the Slurm feature and switch name of a fabric id
//   plan             which Slurm node is on which fabric, or every problem found
//   render_topology  topology.conf for topology/tree: one switch per fabric, no root
//   render_features  the sh script that gives each node its fabric feature
// docs/slurm.md says what an operator does with the two files.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <variant>
#include <vector>

namespace fa::agent::slurm {

// "fab_" + a readable part + "_" + the first 8 hex digits of SHA-256(id):
//   ib:...             -> fab_ib_<hash>
//   roce:<provider>:.. -> fab_roce_<provider>_<hash>, the provider lower-cased,
//                         each run of characters outside [a-z0-9] one '_',
//                         at most 16 characters (left out when nothing is left)
//   anything else      -> fab_<hash>
// Only [a-z0-9_]: a valid Slurm feature (no constraint operator & | * [ ] ( ) ,)
// and a valid switch name (no hostlist bracket or comma), whatever the id.
std::string fabric_name(const std::string& fabric_id);

// A Slurm node name as `fabric-agent slurm` accepts it: [A-Za-z0-9_.-]+,
// starting with a letter, digit or '_', and not ALL or DEFAULT (Slurm
// reserves both).
bool valid_node_name(const std::string& name);

struct Input {
  std::string agent;      // the agent's URL, for messages
  std::string node;       // the Slurm node name given with NODE=URL; "" to use agent.hostname
  nlohmann::json status;  // its GET /v1/status document
};

struct Node {
  std::string name;     // Slurm NodeName
  std::string agent;
  std::string fabric_id;
  std::string feature;  // fabric_name(fabric_id)
};

struct Fabric {
  std::string name;                // feature and switch name
  std::string id;                  // inspect.fabric.id
  std::vector<std::string> nodes;  // sorted
};

struct Plan {
  std::vector<Fabric> fabrics;  // sorted by name
  std::vector<Node> nodes;      // in input order
};

// One thing wrong with one agent's status: the agent, the status field at
// fault ("inspect.fabric.id", "agent.hostname", ...) and what is wrong.
struct Problem {
  std::string agent;
  std::string field;
  std::string message;
};

// Each agent's node name (NODE= or the short form of agent.hostname) and
// fabric (inspect.fabric.id). Every agent is checked; any problem (no
// inspect, no fabric, a fabric without id, no or a bad host name, two agents
// with one node name, one agent (agent.instance) given twice, two fabric ids
// with one name) means no plan.
std::variant<Plan, std::vector<Problem>> plan(const std::vector<Input>& in);

// topology.conf: a comment header, then per fabric its id as a comment and
// "SwitchName=<name> Nodes=<n1>,<n2>,..." with no switch above.
std::string render_topology(const Plan& p);

// A POSIX sh script run where scontrol works: for each node, the fabric's
// feature becomes its one fab_* feature, available and active, by
// `scontrol update`; its other features, as `scontrol show node` has them
// when the script runs, are kept.
std::string render_features(const Plan& p);

// {"fabrics": [{name, id, nodes}], "nodes": [{node, agent, fabric_id, feature}]}
nlohmann::json to_json(const Plan& p);

}  // namespace fa::agent::slurm
