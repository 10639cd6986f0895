// SPDX-License-Identifier: Apache-2.0
// The pure parts of pods/: OCI input, whole-machine / active-port /
// exclusivity decisions, and the CDI spec, fed with data.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/fs.hpp"
#include "pods/pods.hpp"

using namespace fa::pods;
using nlohmann::json;

namespace {

HostGpus nvidia_host(int n) {
  HostGpus h;
  for (int i = 0; i < n; ++i) h.nvidia.push_back({"/dev/nvidia" + std::to_string(i), 'c', 195, static_cast<uint32_t>(i)});
  return h;
}

OciConfig config_with(std::vector<int> gpus, std::vector<std::string> env = {}) {
  json c = {{"ociVersion", "1.0.2"}, {"process", {{"env", env}}}, {"linux", {{"devices", json::array()}}}};
  c["linux"]["devices"].push_back({{"path", "/dev/nvidiactl"}, {"type", "c"}, {"major", 195}, {"minor", 255}});
  for (int g : gpus)
    c["linux"]["devices"].push_back({{"path", "/dev/nvidia" + std::to_string(g)}, {"type", "c"}, {"major", 195}, {"minor", g}});
  auto r = parse_oci_config(c.dump());
  REQUIRE(r.ok());
  return *r;
}

// An `inspect --json` document: an InfiniBand host with two fabric HCAs and
// an Ethernet card (mlx5_2) that is not on the fabric.
json ib_inspect(const std::string& state0 = "ACTIVE", const std::string& state1 = "ACTIVE") {
  auto port = [](const std::string& st) { return json{{"port", 1}, {"state", st}, {"link_layer", "InfiniBand"}}; };
  json fabric_ports = json::array();
  if (state0 == "ACTIVE") fabric_ports.push_back("mlx5_0:1");
  if (state1 == "ACTIVE") fabric_ports.push_back("mlx5_1:1");
  return {{"hcas", {{{"name", "mlx5_0"}, {"ports", {port(state0)}}},
                    {{"name", "mlx5_1"}, {"ports", {port(state1)}}},
                    {{"name", "mlx5_2"}, {"ports", {json{{"port", 1}, {"state", "ACTIVE"}, {"link_layer", "Ethernet"}}}}}}},
          {"fabric", {{"kind", "infiniband"}, {"ports", fabric_ports}}},
          {"nccl_env", {{"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}, {"NCCL_IB_GID_INDEX", nullptr}, {"NCCL_SOCKET_IFNAME", "wg0"}}}};
}

std::string tmpdir() {
  char t[] = "/tmp/fa-pods-unit-XXXXXX";
  REQUIRE(::mkdtemp(t) != nullptr);
  return t;
}

}  // namespace

TEST_CASE("OCI state: fields, and errors that name the field") {
  auto s = parse_oci_state(R"({"ociVersion":"1.0","id":"c1","pid":4242,"root":"rootfs","bundle":"/b/c1","status":"created"})");
  REQUIRE(s.ok());
  CHECK(s->id == "c1");
  CHECK(s->pid == 4242);
  CHECK(s->bundle == "/b/c1");
  CHECK(parse_oci_state(R"({"id":"c1","bundle":"/b","status":"stopped"})")->pid == 0);

  CHECK(parse_oci_state("{not json").error().message == "OCI state: not valid JSON");
  CHECK(parse_oci_state("[]").error().message.find("expected a JSON object") != std::string::npos);
  CHECK(parse_oci_state(R"({"bundle":"/b"})").error().message.find("`id'") != std::string::npos);
  CHECK(parse_oci_state(R"({"id":"c","bundle":"rel"})").error().message.find("bundle `rel'") != std::string::npos);
  CHECK(parse_oci_state(R"({"id":"c","bundle":"/b","pid":-3})").error().message.find("pid `-3'") != std::string::npos);
  CHECK(parse_oci_state(R"({"id":"c","bundle":"/b","pid":"12"})").error().message.find("pid `\"12\"'") != std::string::npos);
}

TEST_CASE("OCI config: env and devices, bad shapes are errors") {
  auto c = parse_oci_config(R"({"process":{"env":["A=1","NVIDIA_VISIBLE_DEVICES=all"]},
      "linux":{"devices":[{"path":"/dev/nvidia0","type":"c","major":195,"minor":0},{"path":"/dev/fuse"}]}})");
  REQUIRE(c.ok());
  CHECK(c->env.size() == 2);
  REQUIRE(c->devices.size() == 2);
  CHECK(*c->devices[0].major == 195);
  CHECK_FALSE(c->devices[1].major.has_value());
  CHECK(parse_oci_config(R"({"linux":{"devices":{}}})").error().message == "config.json: linux.devices is not a list");
  CHECK(parse_oci_config(R"({"linux":{"devices":[{"path":"/dev/x","major":"a"}]}})").error().message ==
        "config.json: linux.devices[0].major: `\"a\"': expected an integer");
  CHECK(parse_oci_config(R"({"process":{"env":[1]}})").error().message.find("process.env holds 1") != std::string::npos);
  CHECK(parse_oci_config("{}").ok());
}

TEST_CASE("whole machine: every NVIDIA GPU, by major:minor or NVIDIA_VISIBLE_DEVICES=all") {
  HostGpus host = nvidia_host(8);
  CHECK_FALSE(check_whole_machine(host, config_with({0, 1, 2, 3, 4, 5, 6, 7})).has_value());
  CHECK_FALSE(check_whole_machine(host, config_with({}, {"NVIDIA_VISIBLE_DEVICES=all"})).has_value());

  auto half = check_whole_machine(host, config_with({0, 1, 2, 3}));
  REQUIRE(half.has_value());
  CHECK(half->find("container holds 4 of 8 NVIDIA GPUs (missing /dev/nvidia4, /dev/nvidia5, /dev/nvidia6, /dev/nvidia7)") == 0);
  CHECK(half->find("whole machine") != std::string::npos);
  // A list of indices is not "all", and the last assignment wins.
  CHECK(check_whole_machine(host, config_with({}, {"NVIDIA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"})).has_value());
  CHECK(check_whole_machine(host, config_with({}, {"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES=0"})).has_value());
  CHECK(check_whole_machine(host, config_with({}, {"NVIDIA_VISIBLE_DEVICES_X=all"})).has_value());

  // Renamed in the container: still the same GPU (matched by major:minor).
  auto renamed = parse_oci_config(json{{"linux", {{"devices", {{{"path", "/dev/gpu0"}, {"type", "c"}, {"major", 195}, {"minor", 0}}}}}}}.dump());
  CHECK_FALSE(check_whole_machine(nvidia_host(1), *renamed).has_value());
  // Same path, other device: not that GPU.
  auto other = parse_oci_config(json{{"linux", {{"devices", {{{"path", "/dev/nvidia0"}, {"type", "c"}, {"major", 1}, {"minor", 3}}}}}}}.dump());
  CHECK(check_whole_machine(nvidia_host(1), *other).has_value());

  // No GPU on the host: nothing to hold.
  CHECK_FALSE(check_whole_machine(HostGpus{}, config_with({})).has_value());
}

TEST_CASE("whole machine: AMD needs /dev/kfd and every render node") {
  HostGpus h;
  h.amd_kfd = true;
  h.amd = {{"/dev/kfd", 'c', 235, 0}, {"/dev/dri/renderD128", 'c', 226, 128}, {"/dev/dri/renderD129", 'c', 226, 129}};
  CHECK(h.count() == 2);
  auto cfg = [&](std::vector<size_t> idx) {
    json d = json::array();
    for (size_t i : idx) d.push_back({{"path", h.amd[i].path}, {"type", "c"}, {"major", h.amd[i].major}, {"minor", h.amd[i].minor}});
    return *parse_oci_config(json{{"linux", {{"devices", d}}}}.dump());
  };
  CHECK_FALSE(check_whole_machine(h, cfg({0, 1, 2})).has_value());
  auto r = check_whole_machine(h, cfg({0, 1}));
  REQUIRE(r.has_value());
  CHECK(r->find("missing /dev/dri/renderD129") != std::string::npos);
  CHECK(check_whole_machine(h, cfg({1, 2}))->find("missing /dev/kfd") != std::string::npos);
}

TEST_CASE("active port: one fabric port ACTIVE now, the refusal names each port and its state") {
  json fab = ib_inspect();
  CHECK(fabric_ports(fab) == std::vector<std::string>{"mlx5_0:1", "mlx5_1:1"});  // not the Ethernet card
  CHECK_FALSE(check_active_port(fab, {{"mlx5_0:1", "ACTIVE", ""}, {"mlx5_1:1", "ACTIVE", ""}}).has_value());
  CHECK_FALSE(check_active_port(fab, {{"mlx5_0:1", "DOWN", ""}, {"mlx5_1:1", "ACTIVE", ""}}).has_value());
  // What discovery saw does not count, only the states read now.
  CHECK(check_active_port(fab, {{"mlx5_0:1", "DOWN", ""}, {"mlx5_1:1", "INIT", ""}}) ==
        "no fabric port is ACTIVE (mlx5_0:1 is DOWN, mlx5_1:1 is INIT)");
  CHECK(check_active_port(fab, {{"mlx5_0:1", "", "open /sys/x: No such file or directory"}}) ==
        "no fabric port is ACTIVE (mlx5_0:1 state unreadable: open /sys/x: No such file or directory)");
  auto none = ib_inspect("DOWN", "DOWN");
  CHECK(fabric_ports(none).empty());
  CHECK(check_active_port(none, {}) == "no fabric port is ACTIVE (fabric kind infiniband, no fabric ports)");
  // Discovery took the ports out: the last fabric's are named, whatever they read.
  CHECK(check_active_port(none, {}, {{"mlx5_0:1", "DOWN", ""}, {"mlx5_1:1", "DOWN", ""}}) ==
        "no fabric port is ACTIVE (mlx5_0:1 is DOWN, mlx5_1:1 is DOWN)");
  CHECK(check_active_port(none, {}, {{"mlx5_0:1", "ACTIVE", ""}}).value().find(
            "no fabric port is ACTIVE: discovery takes none of this host's ports now (the last fabric's mlx5_0:1 is "
            "ACTIVE") == 0);
  // The last fabric's ports count only when discovery has none now.
  CHECK(check_active_port(fab, {{"mlx5_0:1", "DOWN", ""}}, {{"mlx5_1:1", "ACTIVE", ""}}) ==
        "no fabric port is ACTIVE (mlx5_0:1 is DOWN)");
  CHECK(check_active_port(json(), {}).value().find("no discovery result") == 0);
  CHECK(check_active_port(json{{"fabric", {{"kind", nullptr}}}}, {}).value() ==
        "no fabric port is ACTIVE (fabric kind none, no fabric ports)");
}

TEST_CASE("port states: read from <sysfs>/class/infiniband/DEV/ports/N/state at the call") {
  std::string d = tmpdir();
  auto state_file = [&](const std::string& dev, const std::string& text) {
    std::string dir = d + "/class/infiniband/" + dev + "/ports/1";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/state") << text;
  };
  state_file("rxe0", "4: ACTIVE\n");
  state_file("mlx5_1", "1: DOWN\n");
  state_file("mlx5_2", "garbage\n");
  auto s = read_port_states(d, {"rxe0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_9:1", "../../etc:1", "rxe0", "rxe0:x"});
  REQUIRE(s.size() == 7);
  CHECK((s[0].state == "ACTIVE" && s[0].error.empty()));
  CHECK(s[1].state == "DOWN");
  CHECK(s[2].state.empty());
  CHECK(s[2].error == d + "/class/infiniband/mlx5_2/ports/1/state: expected '<n>: <NAME>' like '4: ACTIVE', got 'garbage'");
  CHECK(s[3].error.find(d + "/class/infiniband/mlx5_9/ports/1/state") != std::string::npos);
  for (size_t i = 4; i < 7; ++i) {
    INFO(s[i].port);
    CHECK(s[i].state.empty());
    CHECK(s[i].error == "not a port name (expected <device>:<port number>)");
  }
  // Read again after a change: no cache between calls.
  state_file("rxe0", "1: DOWN\n");
  CHECK(read_port_states(d, {"rxe0:1"})[0].state == "DOWN");
  std::filesystem::remove_all(d);
}

TEST_CASE("exclusive: one live fabric container per machine") {
  PodRecord a;
  a.id = "first";
  a.pid = 77;
  CHECK_FALSE(check_exclusive({}, "x").has_value());
  CHECK(check_exclusive({a}, "second").value() ==
        "container first (pid 77) already holds the RDMA fabric of this host; one fabric container per machine");
  CHECK_FALSE(check_exclusive({a}, "first").has_value());
}

TEST_CASE("CDI spec: fabric uverbs only, NCCL env, absolute hooks, lowest cdiVersion") {
  std::map<std::string, std::string> uverbs = {{"mlx5_0", "uverbs0"}, {"mlx5_1", "uverbs1"}, {"mlx5_2", "uverbs2"}};
  CdiOptions o;
  o.hook_path = "/usr/bin/fabric-agent";
  auto s = build_cdi_spec(ib_inspect(), uverbs, o);
  REQUIRE(s.ok());
  const json& d = s->doc;
  CHECK(d["cdiVersion"] == "0.3.0");
  CHECK(d["kind"] == "fabric-agent.io/rdma");
  REQUIRE(d["devices"].size() == 1);
  CHECK(d["devices"][0]["name"] == "all");
  json nodes = d["devices"][0]["containerEdits"]["deviceNodes"];
  CHECK(nodes == json::parse(R"([{"path":"/dev/infiniband/rdma_cm"},{"path":"/dev/infiniband/uverbs0"},
                                 {"path":"/dev/infiniband/uverbs1"}])"));
  CHECK(nodes.dump().find("umad") == std::string::npos);
  CHECK(nodes.dump().find("issm") == std::string::npos);
  CHECK(d["containerEdits"]["env"] == json::parse(R"(["NCCL_IB_HCA==mlx5_0:1,mlx5_1:1","NCCL_SOCKET_IFNAME=wg0"])"));
  json hooks = d["containerEdits"]["hooks"];
  REQUIRE(hooks.size() == 2);
  CHECK(hooks[0]["hookName"] == "createRuntime");
  CHECK(hooks[0]["path"] == "/usr/bin/fabric-agent");
  CHECK(hooks[0]["args"] == json::parse(R"(["fabric-agent","oci-hook","create-runtime","--socket","/run/fabric-agent/pods.sock"])"));
  CHECK(hooks[1]["hookName"] == "poststop");
  CHECK(hooks[1]["args"][2] == "poststop");

  // RoCE: the GID index goes in too.
  json roce = ib_inspect();
  roce["nccl_env"]["NCCL_IB_GID_INDEX"] = "3";
  CHECK(build_cdi_spec(roce, uverbs, o)->doc["containerEdits"]["env"][1] == "NCCL_IB_GID_INDEX=3");

  // A test device root needs hostPath, which CDI has since 0.5.0, and the hooks learn the root.
  o.dev_root = "/tmp/devroot";
  auto t = build_cdi_spec(ib_inspect("DOWN", "ACTIVE"), uverbs, o);
  REQUIRE(t.ok());
  CHECK(t->doc["cdiVersion"] == "0.5.0");
  CHECK(t->doc["devices"][0]["containerEdits"]["deviceNodes"][1] ==
        json{{"path", "/dev/infiniband/uverbs1"}, {"hostPath", "/tmp/devroot/infiniband/uverbs1"}});
  CHECK(t->doc["containerEdits"]["hooks"][0]["args"].back() == "/tmp/devroot");
  CHECK_FALSE(t->warnings.empty());  // the nodes do not exist under /tmp/devroot

  // No ACTIVE fabric port: rdma_cm only, and a warning says why.
  auto none = build_cdi_spec(ib_inspect("DOWN", "DOWN"), uverbs, CdiOptions{"/dev", "/usr/bin/fabric-agent", kDefaultSocket, 30, {}, {}, {}});
  REQUIRE(none.ok());
  CHECK(none->doc["devices"][0]["containerEdits"]["deviceNodes"].size() == 1);
  CHECK(none->warnings[0].find("no fabric port is ACTIVE") == 0);

  // A fabric HCA without uverbs is left out, loudly.
  auto miss = build_cdi_spec(ib_inspect(), {{"mlx5_0", "uverbs0"}}, CdiOptions{"/dev", "/usr/bin/fabric-agent", kDefaultSocket, 30, {}, {}, {}});
  CHECK(miss->doc["devices"][0]["containerEdits"]["deviceNodes"].size() == 2);
  bool warned = false;
  for (const auto& w : miss->warnings) warned |= w.find("mlx5_1 has no uverbs device") == 0;
  CHECK(warned);

  // An agent in a container: the hooks run its copy for the host through
  // the copied loader, the copy's libraries first.
  CdiOptions h;
  h.hook_path = "/var/lib/fabric-agent/hook/fabric-agent";
  h.hook_loader = "/var/lib/fabric-agent/hook/lib/ld-linux-x86-64.so.2";
  auto c = build_cdi_spec(ib_inspect(), uverbs, h);
  REQUIRE(c.ok());
  CHECK(c->doc["containerEdits"]["hooks"][0]["path"] == h.hook_loader);
  CHECK(c->doc["containerEdits"]["hooks"][0]["args"] == json::parse(R"(["fabric-agent","--library-path",
    "/var/lib/fabric-agent/hook/lib","/var/lib/fabric-agent/hook/fabric-agent","oci-hook","create-runtime",
    "--socket","/run/fabric-agent/pods.sock"])"));
  CHECK(c->doc["containerEdits"]["hooks"][1]["args"][4] == "oci-hook");
  CHECK(c->doc["containerEdits"]["hooks"][1]["args"][5] == "poststop");

  CdiOptions rel;
  rel.hook_path = "fabric-agent";
  CHECK(build_cdi_spec(ib_inspect(), uverbs, rel).error().message ==
        "hook path: `fabric-agent': must be absolute (OCI hooks run without PATH)");
  CHECK_FALSE(build_cdi_spec(json::object(), uverbs, o).ok());
}

TEST_CASE("uverbs map from a sysfs tree, CDI file written atomically") {
  std::string root = tmpdir();
  namespace fs = std::filesystem;
  fs::create_directories(root + "/class/infiniband_verbs/uverbs0");
  fs::create_directories(root + "/class/infiniband_verbs/uverbs3");
  std::ofstream(root + "/class/infiniband_verbs/abi_version") << "6\n";
  std::ofstream(root + "/class/infiniband_verbs/uverbs0/ibdev") << "mlx5_0\n";
  std::ofstream(root + "/class/infiniband_verbs/uverbs3/ibdev") << "rxe0\n";
  auto m = uverbs_by_hca(root);
  REQUIRE(m.ok());
  CHECK(*m == std::map<std::string, std::string>{{"mlx5_0", "uverbs0"}, {"rxe0", "uverbs3"}});
  CHECK(uverbs_by_hca(root + "/nothing")->empty());

  auto p = write_cdi_spec(root + "/cdi", json{{"cdiVersion", "0.3.0"}});
  REQUIRE(p.ok());
  CHECK(*p == root + "/cdi/fabric-agent.io-rdma.json");
  CHECK(json::parse(*fa::read_text_file(*p))["cdiVersion"] == "0.3.0");
  fs::remove_all(root);
}

TEST_CASE("copy for the host: each loaded object once, by path, the executable and the vDSO left out") {
  auto m = objects_to_copy({"", "linux-vdso.so.1", "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6",
                            "/lib/x86_64-linux-gnu/libstdc++.so.6", "/opt/a dir/libsp ace.so", "/lib64/ld-linux-x86-64.so.2"});
  REQUIRE(m.ok());
  CHECK(*m == std::vector<std::string>{"/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6",
                                       "/opt/a dir/libsp ace.so", "/lib64/ld-linux-x86-64.so.2"});
  // One directory holds the copy: two objects of one name cannot both be in it.
  auto twice = objects_to_copy({"/lib/x86_64-linux-gnu/libnl-3.so.200", "/opt/other/libnl-3.so.200"});
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().message ==
        "shared objects /lib/x86_64-linux-gnu/libnl-3.so.200 and /opt/other/libnl-3.so.200 have one name: one directory "
        "cannot hold both");
}

TEST_CASE("copy for the host: this process copied runs through the copied loader, every library from the copy") {
  const std::string dir = tmpdir() + "/hook";
  auto c = copy_for_host(dir);
  REQUIRE(c.ok());
  CHECK(c->binary == dir + "/fabric-agent");
  CHECK(c->library_path == dir + "/lib");
  CHECK(c->loader.rfind(dir + "/lib/ld-linux", 0) == 0);
  CHECK(c->objects >= 3);  // the loader, libc, libstdc++ at least
  struct stat st{};
  REQUIRE(::stat(dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  REQUIRE(::stat(c->binary.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);

  // The loader's own listing: each library the binary needs is found in the copy.
  auto run = [](const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    int rc = ::pclose(p);
    return std::make_pair(rc, out);
  };
  auto [rc, listing] = run(c->loader + " --library-path " + c->library_path + " --list " + c->binary + " 2>&1");
  CHECK(rc == 0);
  INFO(listing);
  size_t needed = 0;
  std::istringstream in(listing);
  for (std::string line; std::getline(in, line);) {
    auto arrow = line.find(" => ");
    if (arrow == std::string::npos) continue;
    ++needed;
    CHECK(line.find(" => " + c->library_path + "/") != std::string::npos);
  }
  CHECK(needed >= 2);
  // And it runs: this test binary's copy runs one of its tests.
  auto [rc2, tests] = run("env -i " + c->loader + " --library-path " + c->library_path + " " + c->binary +
                          " 'copy for the host: each loaded object once*' 2>&1");
  INFO(tests);
  CHECK(rc2 == 0);
  CHECK(tests.find("All tests passed") != std::string::npos);

  // A second copy rewrites nothing (same inode: a hook running it keeps it).
  REQUIRE(::stat(c->binary.c_str(), &st) == 0);
  const ino_t before = st.st_ino;
  REQUIRE(copy_for_host(dir).ok());
  REQUIRE(::stat(c->binary.c_str(), &st) == 0);
  CHECK(st.st_ino == before);

  // A directory others may write is refused: root runs what is in it.
  REQUIRE(::chmod(dir.c_str(), 0775) == 0);
  auto refused = copy_for_host(dir);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message.find(dir + ": owned by uid ") == 0);
  CHECK(refused.error().message.find("with mode 0775; accepted: ") != std::string::npos);
  std::filesystem::remove_all(dir.substr(0, dir.rfind('/')));
}

TEST_CASE("process start time: own pid, comm with spaces and parentheses") {
  auto me = process_start_time(::getpid());
  REQUIRE(me.ok());
  CHECK(*me > 0);
  CHECK_FALSE(process_start_time(0).ok());
  std::string root = tmpdir();
  std::filesystem::create_directories(root + "/42");
  std::ofstream(root + "/42/stat") << "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 1 x\n";
  CHECK(process_start_time(42, root).value() == 987654);
  std::filesystem::remove_all(root);
}

TEST_CASE("registry: persisted, reloaded, corrupt file is an error naming it") {
  std::string dir = tmpdir();
  std::string path = dir + "/pods.json";
  auto r = PodRegistry::load(path);
  REQUIRE(r.ok());
  CHECK(r->pods().empty());
  PodRecord p;
  p.id = "c1";
  p.pid = 123;
  p.start_time = 456;
  p.interface = "wg0";
  p.address = "10.42.0.1/24";
  REQUIRE(r->add(p).ok());
  auto again = PodRegistry::load(path);
  REQUIRE(again.ok());
  REQUIRE(again->pods().size() == 1);
  CHECK(again->find("c1")->start_time == 456);
  CHECK(again->find("c1")->address == "10.42.0.1/24");
  REQUIRE(again->remove("c1").ok());
  CHECK(PodRegistry::load(path)->pods().empty());
  std::ofstream(path) << "{\"pods\": [ {\"pid\": 3} ]}";
  auto bad = PodRegistry::load(path);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find(path + ": pods[0]: pod record:") == 0);
  std::filesystem::remove_all(dir);
}
