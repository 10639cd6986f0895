// SPDX-License-Identifier: Apache-2.0
// The default runtime for engines that read no CDI (Docker 20.10, containerd
// 1.6) and for the Docker daemon a renter runs inside the pod:
// `fabric-agent-runtime` edits the bundle's config.json with the edits of the
// CDI spec (device nodes, env, hooks, mounts), raises the memlock limit, and
// execs the real runtime. See docs/pods.md, "Nested containers".
//
// This header is only the logic (pure, on JSON); the executable
// (runtime_main.cpp) adds stat, the file rewrite and exec. It depends on
// nlohmann-json and libc alone: the executable is linked static, because it is
// bind-mounted into renters' images, whose C library may be older than the
// host's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fa::pods::nested {

inline constexpr const char* kSpecEnv = "FABRIC_AGENT_CDI_SPEC";       // the spec to apply
inline constexpr const char* kRuntimeEnv = "FABRIC_AGENT_RUNTIME";     // the real runtime
inline constexpr const char* kDefaultSpec = "/var/run/cdi/fabric-agent.io-rdma.json";
// Where the pod finds the shim: the same path as on the host, so one
// daemon.json snippet serves both.
inline constexpr const char* kShimPath = "/usr/bin/fabric-agent-runtime";

struct Node {
  std::string path;       // in the container
  std::string host_path;  // where it is stat'ed (CDI hostPath, else path)
  char type = 'c';
  int64_t major = -1, minor = -1;  // -1 until stat'ed
};

struct Edits {
  std::vector<Node> nodes;
  std::vector<std::string> env;  // NAME=VALUE
  nlohmann::json hooks = nlohmann::json::object();  // OCI form: stage -> [ {path, args, env, timeout} ]
  nlohmann::json mounts = nlohmann::json::array();  // OCI form
};

// The edits of a fabric-agent.io/rdma spec: containerEdits of the spec and of
// its device "all". Errors name the field and what is accepted.
std::optional<std::string> edits_from_cdi(const nlohmann::json& spec, Edits& out);

// Applies `e` to a config.json document, and sets RLIMIT_MEMLOCK to `memlock`
// (soft = hard). A variable already in process.env keeps its value (the
// user's -e); a device, device rule, hook or mount already there is not added
// twice, so applying twice equals applying once. Every node must have been
// stat'ed. On error `config` is unchanged.
std::optional<std::string> apply_edits(nlohmann::json& config, const Edits& e, uint64_t memlock);

// What the runtime was asked: the verb (first argument that is not a global
// option) and, for create/run, the bundle (--bundle/-b, default the working
// directory, as runc and crun) and the --log file and format.
struct Call {
  std::string verb;
  std::string bundle = ".";
  std::string log, log_format;
};
Call parse_call(const std::vector<std::string>& args);

// A runtime's `--log` line, in its format ("json": what containerd reads
// for the error it shows).
std::string log_line(const std::string& format, const std::string& message);

}  // namespace fa::pods::nested
