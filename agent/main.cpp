// SPDX-License-Identifier: Apache-2.0
// fabric-agent: one subcommand per job. Each module exposes its subcommands
// as `int cmd_xxx(const std::vector<std::string>& args)`; this file only
// dispatches and turns escaped exceptions into one line on stderr.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "agent/cli.hpp"
#include "overlay/cli.hpp"
#include "pods/cli.hpp"
#include "probes/check.hpp"
#include "probes/cli.hpp"
#include "probes/rdma/cli.hpp"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*fn)(const std::vector<std::string>&);
};

int cmd_version(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--help") {
    std::printf("usage: fabric-agent version\n");
    return 0;
  }
  if (!args.empty()) {
    std::fprintf(stderr, "fabric-agent version: unexpected argument '%s'\n", args[0].c_str());
    return 2;
  }
  std::printf("fabric-agent %s\n", FA_VERSION);
  return 0;
}

// `fabric-agent CMD ... --help` (or -h, anywhere before a `--`) prints CMD's
// usage whatever else is on the line, as the man page says: every command
// answers a lone "--help" with its usage, so `mesh apply --help` or `probe
// rdma run --peer X -h` need no parsing of their own.
bool wants_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

const Command kCommands[] = {
    {"run", "the daemon: HTTP API for the control plane (see docs/api.md)", fa::agent::cmd_run},
    {"status", "the local daemon's view: fabric, NCCL env, mesh, pods", fa::agent::cmd_status},
    {"cluster", "cluster form|verify --agent URL...: form a set of agents' mesh, or measure every pair and rail",
     fa::agent::cmd_cluster},
    {"slurm", "slurm --agent URL... --output DIR: topology.conf (a switch per fabric) and node features for Slurm",
     fa::agent::cmd_slurm},
    {"check", "the host's health, NHC-style: exit 0 healthy, 1 one line per failing condition",
     fa::probes::cmd_check},
    {"cdi", "CDI spec for fabric-agent.io/rdma=all: cdi generate [--output DIR]", fa::pods::cmd_cdi},
    {"inspect", "one discovery pass: HCAs, GIDs, GPUs, fabric identity, NCCL env", fa::probes::cmd_inspect},
    {"mesh", "WireGuard overlay: mesh apply --file F | show [--json] | down", fa::overlay::cmd_mesh},
    {"oci-hook", "run by the container runtime: oci-hook create-runtime|poststop", fa::pods::cmd_oci_hook},
    {"probe", "RDMA link probe between two agents: probe rdma serve|run", fa::rdma::cmd_probe},
    {"version", "print the version", cmd_version},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: fabric-agent <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    usage(stdout);
    return 0;
  }
  if (name == "--version") name = "version";
  std::vector<std::string> args(argv + 2, argv + argc);
  if (wants_help(args)) args = {"--help"};
  for (const auto& c : kCommands) {
    if (name != c.name) continue;
    try {
      return c.fn(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fabric-agent %s: %s\n", c.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "fabric-agent: unknown command '%s'\n", name.c_str());
  usage(stderr);
  return 2;
}
