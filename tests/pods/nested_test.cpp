// SPDX-License-Identifier: Apache-2.0
// fabric-agent-runtime's logic on data: the CDI spec read into edits, the
// edits applied to config.json, the runtime's argument line. The executable
// itself, with real engines, is in nested_runtime_test.cpp.
#include <catch2/catch.hpp>

#include "pods/nested.hpp"
#include "pods/pods.hpp"

using namespace fa::pods::nested;
using nlohmann::json;

namespace {

json spec_doc() {
  return json::parse(R"({
    "cdiVersion": "0.5.0", "kind": "fabric-agent.io/rdma",
    "devices": [ { "name": "all", "containerEdits": { "deviceNodes": [
        { "path": "/dev/infiniband/rdma_cm", "hostPath": "/t/dev/infiniband/rdma_cm" },
        { "path": "/dev/infiniband/uverbs0" } ] } } ],
    "containerEdits": {
      "env": [ "NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=wg0" ],
      "hooks": [ { "hookName": "createRuntime", "path": "/usr/bin/fabric-agent", "args": ["fabric-agent", "oci-hook", "create-runtime"], "timeout": 30 } ],
      "mounts": [ { "hostPath": "/run/fabric-agent/nested-cdi.json", "containerPath": "/var/run/cdi/fabric-agent.io-rdma.json", "options": ["ro", "bind"] } ] } })");
}

Edits stated_edits() {
  Edits e;
  REQUIRE_FALSE(edits_from_cdi(spec_doc(), e).has_value());
  e.nodes[0].major = 10, e.nodes[0].minor = 58;
  e.nodes[1].major = 231, e.nodes[1].minor = 192;
  return e;
}

json user_config() {
  return json::parse(R"({ "ociVersion": "1.0.2",
    "process": { "args": ["sh"], "env": ["PATH=/bin", "NCCL_IB_HCA=mine"],
                 "rlimits": [ { "type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024 },
                              { "type": "RLIMIT_MEMLOCK", "hard": 65536, "soft": 65536 } ] },
    "linux": { "resources": { "devices": [ { "allow": false, "access": "rwm" } ] } } })");
}

}  // namespace

TEST_CASE("nested container: the CDI spec read into edits (hostPath, env, hooks, mounts)", "[unit]") {
  Edits e;
  REQUIRE_FALSE(edits_from_cdi(spec_doc(), e).has_value());
  REQUIRE(e.nodes.size() == 2);
  CHECK(e.nodes[0].path == "/dev/infiniband/rdma_cm");
  CHECK(e.nodes[0].host_path == "/t/dev/infiniband/rdma_cm");
  CHECK(e.nodes[1].host_path == "/dev/infiniband/uverbs0");
  CHECK(e.env == std::vector<std::string>{"NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=wg0"});
  CHECK(e.hooks["createRuntime"][0]["path"] == "/usr/bin/fabric-agent");
  CHECK(e.mounts[0] == json::parse(R"({"destination": "/var/run/cdi/fabric-agent.io-rdma.json",
      "source": "/run/fabric-agent/nested-cdi.json", "type": "bind", "options": ["ro", "bind"]})"));
}

TEST_CASE("nested container: a bad spec is refused naming what is wrong", "[unit]") {
  Edits e;
  json s = spec_doc();
  s["kind"] = "nvidia.com/gpu";
  CHECK(edits_from_cdi(s, e).value_or("") == "CDI spec: kind `\"nvidia.com/gpu\"' is not fabric-agent.io/rdma");
  s = spec_doc();
  s["devices"][0]["name"] = "x";
  CHECK(edits_from_cdi(s, e).value_or("") == "CDI spec: no device named `all'");
  s = spec_doc();
  s["devices"][0]["containerEdits"]["deviceNodes"][1]["path"] = "dev/uverbs0";
  CHECK(edits_from_cdi(s, e).value_or("") == "devices[all].containerEdits.deviceNodes[1].path: must be an absolute path");
  s = spec_doc();
  s["containerEdits"]["env"][0] = "NOEQUALS";
  CHECK(edits_from_cdi(s, e).value_or("") == "containerEdits.env: `\"NOEQUALS\"' is not NAME=VALUE");
  s = spec_doc();
  s["containerEdits"]["hooks"][0]["hookName"] = "later";
  CHECK(edits_from_cdi(s, e).value_or("").find("hookName `later' is not an OCI hook stage") != std::string::npos);
  CHECK(edits_from_cdi(json::array(), e).value_or("") == "CDI spec is not a JSON object");
}

TEST_CASE("nested container: config.json gets the nodes, device rules, env without overriding -e, memlock, hooks, mounts", "[unit]") {
  json c = user_config();
  REQUIRE_FALSE(apply_edits(c, stated_edits(), UINT64_MAX).has_value());
  // -e NCCL_IB_HCA=mine stays; the variable the user did not set is added.
  CHECK(c["process"]["env"] == json::parse(R"(["PATH=/bin", "NCCL_IB_HCA=mine", "NCCL_SOCKET_IFNAME=wg0"])"));
  CHECK(c["linux"]["devices"] == json::parse(R"([
      {"path": "/dev/infiniband/rdma_cm", "type": "c", "major": 10, "minor": 58, "fileMode": 438, "uid": 0, "gid": 0},
      {"path": "/dev/infiniband/uverbs0", "type": "c", "major": 231, "minor": 192, "fileMode": 438, "uid": 0, "gid": 0}])"));
  // After Docker's deny-all: later rules win.
  CHECK(c["linux"]["resources"]["devices"] == json::parse(R"([ {"allow": false, "access": "rwm"},
      {"allow": true, "type": "c", "major": 10, "minor": 58, "access": "rwm"},
      {"allow": true, "type": "c", "major": 231, "minor": 192, "access": "rwm"}])"));
  CHECK(c["process"]["rlimits"] == json::parse(R"([ { "type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024 },
      { "type": "RLIMIT_MEMLOCK", "hard": 18446744073709551615, "soft": 18446744073709551615 } ])"));
  CHECK(c["hooks"]["createRuntime"].size() == 1);
  CHECK(c["mounts"].size() == 1);
  CHECK(c["ociVersion"] == "1.0.2");
  CHECK(c["process"]["args"] == json::array({"sh"}));
}

TEST_CASE("nested container: applying twice equals applying once", "[unit]") {
  json once = user_config();
  REQUIRE_FALSE(apply_edits(once, stated_edits(), UINT64_MAX).has_value());
  json twice = once;
  REQUIRE_FALSE(apply_edits(twice, stated_edits(), UINT64_MAX).has_value());
  CHECK(twice == once);
  // A device the user passed already (--device /dev/infiniband/uverbs0) is not listed twice.
  json c = user_config();
  c["linux"]["devices"] = json::parse(R"([{"path": "/dev/infiniband/uverbs0", "type": "c", "major": 231, "minor": 192}])");
  REQUIRE_FALSE(apply_edits(c, stated_edits(), UINT64_MAX).has_value());
  CHECK(c["linux"]["devices"].size() == 2);
}

TEST_CASE("nested container: a bad config.json is refused and left as it was", "[unit]") {
  Edits e = stated_edits();
  json c = user_config();
  c["process"]["env"] = "PATH=/bin";
  json before = c;
  CHECK(apply_edits(c, e, UINT64_MAX).value_or("") == "config.json: process.env is not a list");
  CHECK(c == before);
  c = user_config();
  c["linux"]["devices"] = json::object();
  before = c;
  CHECK(apply_edits(c, e, UINT64_MAX).value_or("") == "config.json: linux.devices is not a list");
  CHECK(c == before);
  c = json::parse(R"({"ociVersion": "1.0.2"})");
  CHECK(apply_edits(c, e, UINT64_MAX).value_or("") == "config.json: process is missing");
  e.nodes[1].major = -1;
  c = user_config();
  CHECK(apply_edits(c, e, UINT64_MAX).value_or("") == "/dev/infiniband/uverbs0: device number unknown");
}

TEST_CASE("nested container: the runtime's arguments (global options, verb, bundle, log)", "[unit]") {
  // As containerd-shim-runc-v2 calls runc for Docker.
  Call d = parse_call({"--root", "/var/run/docker/runtime-runc/moby", "--log", "/run/x/log.json", "--log-format",
                       "json", "--systemd-cgroup", "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "ID"});
  CHECK(d.verb == "create");
  CHECK(d.bundle == "/run/b");
  CHECK(d.log == "/run/x/log.json");
  CHECK(d.log_format == "json");
  // As conmon calls crun for Podman.
  Call p = parse_call({"--root=/run/crun", "--cgroup-manager", "cgroupfs", "run", "-b", "/b2", "ID"});
  CHECK(p.verb == "run");
  CHECK(p.bundle == "/b2");
  CHECK(parse_call({"create", "--bundle=/b3", "ID"}).bundle == "/b3");
  CHECK(parse_call({"create", "ID"}).bundle == ".");
  CHECK(parse_call({"--debug", "delete", "--force", "ID"}).verb == "delete");
  CHECK(parse_call({"--version"}).verb.empty());
}

TEST_CASE("nested container: the pod's spec has the nodes by their pod path, the env, no hooks, and the host spec mounts it", "[unit]") {
  json inspect = {{"fabric", {{"kind", "infiniband"}, {"ports", {"mlx5_0:1"}}}},
                  {"nccl_env", {{"NCCL_IB_HCA", "=mlx5_0:1"}, {"NCCL_SOCKET_IFNAME", "wg0"}}}};
  fa::pods::CdiOptions o;
  o.hook_path = "/usr/bin/fabric-agent";
  o.dev_root = "/tmp/devroot";
  o.runtime_path = "/usr/bin/fabric-agent-runtime";
  o.nested_spec = fa::pods::nested_spec_path("/run/fabric-agent/pods.sock");
  CHECK(o.nested_spec == "/run/fabric-agent/nested-cdi.json");
  auto s = fa::pods::build_cdi_spec(inspect, {{"mlx5_0", "uverbs0"}}, o);
  REQUIRE(s.ok());
  CHECK(s->nested == json::parse(R"({"cdiVersion": "0.3.0", "kind": "fabric-agent.io/rdma",
      "devices": [ { "name": "all", "containerEdits": { "deviceNodes": [
          { "path": "/dev/infiniband/rdma_cm" }, { "path": "/dev/infiniband/uverbs0" } ] } } ],
      "containerEdits": { "env": [ "NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME=wg0" ] } })"));
  CHECK(s->doc["containerEdits"]["mounts"] == json::parse(R"([
      { "hostPath": "/usr/bin/fabric-agent-runtime", "containerPath": "/usr/bin/fabric-agent-runtime", "options": ["ro", "nosuid", "nodev", "bind"] },
      { "hostPath": "/run/fabric-agent/nested-cdi.json", "containerPath": "/var/run/cdi/fabric-agent.io-rdma.json", "options": ["ro", "nosuid", "nodev", "bind"] } ])"));
  // What the shim reads inside the pod: nodes where the pod has them, no hook
  // (there is no daemon in the pod).
  Edits e;
  REQUIRE_FALSE(edits_from_cdi(s->nested, e).has_value());
  CHECK(e.nodes[1].host_path == "/dev/infiniband/uverbs0");
  CHECK(e.hooks.empty());
  o.runtime_path.clear();
  auto w = fa::pods::build_cdi_spec(inspect, {{"mlx5_0", "uverbs0"}}, o);
  CHECK_FALSE(w->doc["containerEdits"].contains("mounts"));
  CHECK(std::find(w->warnings.begin(), w->warnings.end(),
                  "no fabric-agent-runtime beside /usr/bin/fabric-agent: the pod gets no runtime for nested containers") !=
        w->warnings.end());
}
