// SPDX-License-Identifier: Apache-2.0
// The decisions of `fabric-agent cluster verify`, as pure functions of data,
// so each one is tested on tables without machines or verbs:
//   round_robin   which pairs run together (each machine in one pair a round)
//   rails_of      the fabric ports NCCL will use on a machine, in order
//   judge         a rail's status from the probe's answer and the ports' rates
//   pick_reference / blame   which end of a failing pair is the bad one
//   closed_overlay_ports      which machine's WireGuard port its peers cannot reach
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fa::agent::verify {

using Pair = std::pair<int, int>;  // (runs the probe, serves it), indexes into the agents

// The circle method: machine 0 stays, the others rotate one place a round.
// n even: n-1 rounds of n/2 pairs; n odd: n rounds, one machine sits out each
// round (the bye). Every pair exactly once, no machine twice in a round.
std::vector<std::vector<Pair>> round_robin(int n);

// One fabric port of a machine as verify uses it: its rate as the kernel
// reports it (0 when it does not).
struct Rail {
  std::string hca;  // "mlx5_0:1"
  double rate_gbps = 0;
};

// The machine's rails from its /v1/status `inspect`: `fabric.ports` (the
// ACTIVE fabric ports, which is NCCL_IB_HCA's list, in its order) with each
// port's `rate_gbps` from `hcas[].ports[]`. Empty without a fabric.
std::vector<Rail> rails_of(const nlohmann::json& inspect);

// NCCL_IB_GID_INDEX of the machine's status, as the probe defaults to it:
// InfiniBand without one is index 0; none otherwise (nullopt).
std::optional<int> gid_index_of(const nlohmann::json& inspect);

enum class Status { kOk, kDegraded, kFailed };
const char* status_name(Status s);

struct Judged {
  Status status = Status::kFailed;
  std::string reason;   // "" when ok; the probe's reason, or below_rate / port_rate_unknown
  std::string message;  // for a person
  double pass_gbps = 0;  // the pass line: min_fraction x the slower port's rate
};

// A rail passes at >= min_fraction of the slower port's rate as the kernel
// reports it. `probe` is the run endpoint's answer (status, reason, message,
// gbps): a probe that failed keeps its classified reason.
Judged judge(const nlohmann::json& probe, double rate_a_gbps, double rate_b_gbps, double min_fraction);

// The fraction to send to the runner's probe so that its own verdict (taken
// against its own port rate) matches judge()'s against the slower port.
double runner_fraction(double rate_runner_gbps, double rate_server_gbps, double min_fraction);

// passed[i][j] (symmetric): the rail's result between machines i and j, as
// measured: true passed, false did not, nullopt not measured.
using PassMatrix = std::vector<std::vector<std::optional<bool>>>;

// A machine other than a and b that passed with some machine on this rail,
// the one with the most passes (the lowest index on a tie); -1 if none.
int pick_reference(const PassMatrix& passed, int a, int b);

enum class Blame {
  kFirst,         // a is the bad end: b passes with the reference, a does not
  kSecond,        // b is the bad end
  kBoth,          // neither end passes with the reference
  kPath,          // both pass with the reference: the path between them (cable, switch port)
  kUndetermined,  // no reference machine, or a re-measurement missing
};
const char* blame_name(Blame b);

// Which end of a failing pair (a, b) is bad, from the re-measurements of each
// end against a reference machine that passed: kFirst names a, kSecond b.
Blame blame(std::optional<bool> a_with_reference, std::optional<bool> b_with_reference);

// Overlay reachability. reachable(i, j): i and j each report a recent
// WireGuard handshake with the other. up[i]: machine i has its overlay
// interface up. A machine is named when its interface is down, or when none
// of its peers reach it while at least one pair without it does.
std::vector<int> closed_overlay_ports(int n, const std::function<bool(int, int)>& reachable, const std::vector<bool>& up);

}  // namespace fa::agent::verify
