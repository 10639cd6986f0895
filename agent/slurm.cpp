// SPDX-License-Identifier: Apache-2.0
// `fabric-agent slurm`: the Slurm configuration of a set of agents, so that
// Slurm never puts one job on two RDMA fabrics:
//   1. GET /v1/status from every agent (every one is asked, every problem
//      reported, before anything is written);
//   2. each agent's Slurm node name (NODE=URL, else its host name) and fabric;
//   3. DIR/topology.conf: one topology/tree switch per fabric, no root above;
//   4. DIR/features.sh: gives each node its fabric's feature with scontrol.
// The decisions are pure functions in slurm_logic.hpp; docs/slurm.md is the
// operator's walkthrough.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <tuple>

#include "agent/auth.hpp"
#include "agent/cli.hpp"
#include "agent/client.hpp"
#include "agent/cluster.hpp"
#include "agent/slurm_logic.hpp"
#include "common/cli.hpp"
#include "common/fs.hpp"
#include "common/json.hpp"

namespace fa::agent {

using nlohmann::json;
namespace s = slurm;

namespace {

constexpr const char* kCmd = "fabric-agent slurm";

int usage(FILE* out) {
  std::fprintf(out,
               "usage: fabric-agent slurm --agent [NODE=]URL --agent [NODE=]URL ... --token-file F --output DIR\n"
               "         [--json] [--ca-file F] [--cert F --key F]\n"
               "  writes DIR/topology.conf (one topology/tree switch per RDMA fabric, none above them) and\n"
               "  DIR/features.sh (scontrol updates: each node's fabric feature), from the agents' /v1/status;\n"
               "  NODE is the Slurm node name of that agent (default: its host name's short form)\n");
  return out == stdout ? 0 : 2;
}

}  // namespace

int cmd_slurm(const std::vector<std::string>& argv_in) {
  if (argv_in.size() == 1 && (argv_in[0] == "--help" || argv_in[0] == "-h")) return usage(stdout);
  std::vector<std::string> agents, rest;
  split_agents(argv_in, 0, agents, rest);
  auto args = Args::parse(rest, {{"token-file", true},
                                 {"output", true},
                                 {"json", false},
                                 {"ca-file", true},
                                 {"cert", true},
                                 {"key", true}});
  if (!args) {
    std::fprintf(stderr, "%s: %s\n", kCmd, args.error().message.c_str());
    return 2;
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", kCmd, args->positional()[0].c_str());
    return 2;
  }
  if (agents.empty()) {
    std::fprintf(stderr, "%s: give at least one --agent [NODE=]URL\n", kCmd);
    return usage(stderr);
  }
  auto token_file = args->get("token-file");
  auto out_dir = args->get("output");
  if (!token_file || !out_dir || out_dir->empty()) {
    std::fprintf(stderr, "%s: --token-file F and --output DIR are required\n", kCmd);
    return 2;
  }
  // NODE=URL: a URL starts with its scheme, so a '=' before "http" is the split.
  std::vector<std::pair<std::string, Url>> targets;
  for (const auto& a : agents) {
    std::string node, url = a;
    if (a.rfind("http://", 0) != 0 && a.rfind("https://", 0) != 0 && a.find('=') != std::string::npos) {
      node = a.substr(0, a.find('='));
      url = a.substr(a.find('=') + 1);
      if (node.empty()) {
        std::fprintf(stderr, "%s: --agent '%s': the node name before '=' is empty; accepted: [NODE=]URL\n", kCmd,
                     a.c_str());
        return 2;
      }
    }
    auto u = parse_url(url);
    if (!u) {
      std::fprintf(stderr, "%s: --agent '%s': %s\n", kCmd, a.c_str(), u.error().message.c_str());
      return 2;
    }
    targets.emplace_back(node, *u);
  }
  auto secret = read_token_secret(*token_file);
  if (!secret) {
    std::fprintf(stderr, "%s: %s\n", kCmd, secret.error().message.c_str());
    return 1;
  }
  ClientOptions opt;
  opt.token = *secret;
  opt.ca_file = args->get_or("ca-file", "");
  opt.cert_file = args->get_or("cert", "");
  opt.key_file = args->get_or("key", "");

  // 1. Every agent's status; one that does not answer is a problem like any other.
  std::vector<s::Input> inputs;
  std::vector<s::Problem> unreachable;
  for (const auto& [node, u] : targets) {
    auto r = http_request(u, "GET", "/v1/status", "", opt);
    if (!r) {
      std::string why = r.error().message;  // "<url>: connect: ...": the line names the agent already
      if (why.rfind(u.base + ": ", 0) == 0) why.erase(0, u.base.size() + 2);
      unreachable.push_back({u.base, "", "GET /v1/status failed: " + why});
      continue;
    }
    if (r->status != 200) {
      unreachable.push_back({u.base, "", "GET /v1/status answered " + std::to_string(r->status) + ": " + error_message(*r)});
      continue;
    }
    inputs.push_back({u.base, node, fa::parse_json(r->body)});
  }

  // 2. The plan, or every problem with every agent.
  auto planned = s::plan(inputs);
  std::vector<s::Problem> problems = unreachable;
  if (auto* ps = std::get_if<std::vector<s::Problem>>(&planned)) problems.insert(problems.end(), ps->begin(), ps->end());
  if (!problems.empty()) {
    for (const auto& p : problems)
      std::fprintf(stderr, "%s: %s: %s%s%s\n", kCmd, p.agent.c_str(), p.field.c_str(), p.field.empty() ? "" : " ",
                   p.message.c_str());
    std::fprintf(stderr, "%s: refused: %zu problem(s) with %zu agent(s); nothing written\n", kCmd, problems.size(),
                 targets.size());
    return 1;
  }
  const s::Plan& plan = std::get<s::Plan>(planned);

  // 3, 4. The two files, each written whole or not at all.
  if (::mkdir(out_dir->c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "%s: --output %s: mkdir: %s\n", kCmd, out_dir->c_str(), std::strerror(errno));
    return 1;
  }
  const std::string topo = *out_dir + "/topology.conf", feat = *out_dir + "/features.sh";
  for (const auto& [path, text, mode] : {std::tuple{topo, s::render_topology(plan), 0644u},
                                         std::tuple{feat, s::render_features(plan), 0755u}}) {
    if (auto w = write_file_atomic(path, text, mode); !w) {
      std::fprintf(stderr, "%s: %s\n", kCmd, w.error().message.c_str());
      return 1;
    }
  }
  if (args->has("json")) {
    json doc = s::to_json(plan);
    doc["topology_conf"] = topo;
    doc["features_sh"] = feat;
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  for (const auto& f : plan.fabrics) {
    std::string nodes;
    for (const auto& n : f.nodes) nodes += " " + n;
    std::printf("%s  %s  %zu node(s):%s\n", f.name.c_str(), f.id.c_str(), f.nodes.size(), nodes.c_str());
  }
  std::printf("wrote %s (%zu switch(es)) and %s (%zu node(s))\n", topo.c_str(), plan.fabrics.size(), feat.c_str(),
              plan.nodes.size());
  std::printf("load: topology.conf next to slurm.conf (TopologyPlugin=topology/tree), `scontrol reconfigure`, then %s\n",
              feat.c_str());
  return 0;
}

}  // namespace fa::agent
