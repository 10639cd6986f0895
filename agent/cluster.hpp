// SPDX-License-Identifier: Apache-2.0
// What `cluster form` and `cluster verify` share: reading an agent's status
// and refusing a mixed set.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "agent/client.hpp"

namespace fa::agent {

// inspect.fabric.id; "(none)" when the agent has no RDMA fabric, "(unknown)"
// when it has one without an id (never grouped with anything).
std::string fabric_id_of(const nlohmann::json& status);
// Why an agent's fabric has no id, as its discovery said it (its
// "fabric.id is null" warning, else reasons.fabric).
std::string unknown_reason(const nlohmann::json& status);
// "8 x H100 SXM5 80GB", "0 x (none)".
std::string gpu_shape_of(const nlohmann::json& status);
// The index whose value differs from the majority, or -1 when all agree.
int odd_one(const std::vector<std::string>& values);
// An API error answer as one line: its message and field.
std::string error_message(const HttpReply& r);

// Splits argv[from..] into the values of the repeatable --agent (as
// "--agent X" or "--agent=X") and everything else, for Args::parse, which
// keeps one value per option.
void split_agents(const std::vector<std::string>& argv, size_t from, std::vector<std::string>& agents,
                  std::vector<std::string>& rest);

// fabric-agent cluster verify ... (agent/verify.cpp); args after "verify".
int cmd_cluster_verify(const std::vector<std::string>& args);

}  // namespace fa::agent
