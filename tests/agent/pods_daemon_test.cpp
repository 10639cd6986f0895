// SPDX-License-Identifier: Apache-2.0
// The pods library as wired into the real daemon (`fabric-agent run`): the
// CDI spec is written at start into the configured dir; `fabric-agent
// oci-hook create-runtime` registers a pod over the daemon's unix socket;
// GET /v1/pods and /v1/status list it; while the pod holds the mesh interface
// GET /v1/mesh reads it inside the pod's namespace (no second one on the
// host); poststop gives it back.
//
// Isolation: this process enters a network namespace of its own before the
// daemon is forked, so the daemon's loopback listener, wireguard-go and its
// interface live there. The "pod" is `unshare -n sleep`: a process in a
// network namespace of its own, which is all the hook and the mover need
// (the crun path is covered by tests/pods/hook_crun_test.cpp).
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <functional>
#include <thread>

#include "../overlay/netns_helpers.hpp"
#include "agent_process.hpp"
#include "../pods/ssh_keys.hpp"
#include "common/fs.hpp"
#include "overlay/overlay.hpp"
#include "pods/pods.hpp"

using fa::test::AgentProcess;
using fa::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string abs_binary() { return fs::absolute(fa::test::agent_binary()).string(); }
// The hook the daemon's CDI spec names: its own executable (/proc/self/exe).
std::string self_binary() { return fs::canonical(fs::absolute(fa::test::agent_binary())).string(); }

void mknod_c(const std::string& p, unsigned ma, unsigned mi) {
  REQUIRE(::mknod(p.c_str(), S_IFCHR | 0666, makedev(ma, mi)) == 0);
}

// A process in a network namespace of its own, killed at the end.
struct Pod {
  pid_t pid = -1;
  Pod() {
    pid = ::fork();
    if (pid == 0) {
      ::execlp("unshare", "unshare", "-n", "sleep", "600", nullptr);
      ::_exit(127);
    }
    // unshare execs sleep in the same pid once the namespace is made.
    std::string ours = fa::read_link("/proc/self/ns/net").value_or("");
    for (int i = 0; i < 200; ++i) {
      std::string theirs = fa::read_link("/proc/" + std::to_string(pid) + "/ns/net").value_or("");
      if (!theirs.empty() && theirs != ours && fa_test::read_file("/proc/" + std::to_string(pid) + "/comm") == "sleep\n")
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("the pod process did not get a network namespace of its own");
  }
  ~Pod() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

}  // namespace

TEST_CASE("daemon: CDI spec at start, oci-hook registers a pod, /v1/pods and /v1/status list it", "[netns]") {
  REQUIRE(::unshare(CLONE_NEWNET) == 0);
  REQUIRE(fa_test::run("ip link set lo up").rc == 0);
  TempDir dir;
  const std::string tag = fa_test::tag();
  const std::string ifn = "fwd" + tag;
  const std::string dev = dir.path + "/dev";
  fs::create_directories(dev + "/infiniband");
  // Two "GPUs" (NVIDIA's major 195): the pod below holds both, so it is whole-machine.
  mknod_c(dev + "/nvidia0", 195, 0);
  mknod_c(dev + "/nvidia1", 195, 1);
  mknod_c(dev + "/infiniband/rdma_cm", 10, 58);

  AgentProcess agent(dir.path, "sysfs_root: " + std::string(FA_FIXTURES_DIR) + "/a-ib-8gpu\n" +
                                   "overlay:\n  backend: userspace\n  interface: " + ifn + "\n" +
                                   "pods:\n  socket: " + dir.path + "/pods.sock\n  cdi_dir: " + dir.path +
                                   "/cdi\n  dev_root: " + dev + "\nrefresh_interval: 1h\n");
  const std::string auth = "-H 'Authorization: Bearer " + agent.token() + "'";
  auto get = [&](const std::string& path) {
    auto r = fa_test::run("curl -sS -f " + auth + " " + agent.url() + path);
    INFO(path << ": " << r.out << "\nlog:\n" << agent.log());
    REQUIRE(r.rc == 0);
    return json::parse(r.out);
  };
  // The mesh runs in this namespace; taken down at the end, pass or fail
  // (wireguard-go would outlive the namespace otherwise).
  struct MeshDown {
    std::function<void()> fn;
    ~MeshDown() { fn(); }
  } mesh_down{[&] { fa_test::run("curl -s -X DELETE " + auth + " " + agent.url() + "/v1/mesh >/dev/null"); }};

  // 1. The CDI spec exists once the daemon is ready, in the configured dir.
  const std::string spec_path = dir.path + "/cdi/" + fa::pods::cdi_spec_filename();
  REQUIRE(fs::exists(spec_path));
  json spec = json::parse(fa_test::read_file(spec_path));
  CHECK(spec["kind"] == "fabric-agent.io/rdma");
  bool hook_is_us = false;
  for (const auto& h : spec["containerEdits"]["hooks"])
    if (h["path"] == self_binary() && h["args"].dump().find(dir.path + "/pods.sock") != std::string::npos)
      hook_is_us = true;
  CHECK(hook_is_us);
  CHECK(get("/v1/pods")["pods"].empty());

  // 2. A mesh, so the pod has a wg interface to take.
  json mesh = {{"cluster_id", "c-" + tag},
               {"interface", ifn},
               {"address", "10.42.0.1/24"},
               {"listen_port", 20000 + ::getpid() % 20000},
               {"peers", json::array()}};
  fa_test::write_file(dir.path + "/mesh.json", mesh.dump());
  auto put = fa_test::run("curl -sS -f -X PUT " + auth + " -H 'Content-Type: application/json' --data-binary @" +
                          dir.path + "/mesh.json " + agent.url() + "/v1/mesh");
  INFO(put.out << "\nlog:\n" << agent.log());
  REQUIRE(put.rc == 0);

  // The rental's SSH login material, for that mesh's node 10.42.0.1.
  fa_test::SshKeys keys;
  fa_test::write_file(dir.path + "/login.json", [&] {
    json l = keys.doc();
    l["cluster_id"] = "c-" + tag;
    return l.dump();
  }());
  auto put_login = fa_test::run("curl -sS -f -X PUT " + auth + " -H 'Content-Type: application/json' --data-binary @" +
                                dir.path + "/login.json " + agent.url() + "/v1/login");
  INFO(put_login.out << "\nlog:\n" << agent.log());
  REQUIRE(put_login.rc == 0);

  // 3. The hook, as a runtime runs it: OCI state on stdin.
  Pod pod;
  fs::create_directories(dir.path + "/bundle/rootfs/etc");
  json cfg = {{"ociVersion", "1.0.2"},
              {"root", {{"path", "rootfs"}}},
              {"process", {{"env", {"PATH=/bin", "NCCL_IB_HCA==mlx5_0:1"}}}},
              {"linux", {{"devices", {{{"path", "/dev/nvidia0"}, {"type", "c"}, {"major", 195}, {"minor", 0}},
                                      {{"path", "/dev/nvidia1"}, {"type", "c"}, {"major", 195}, {"minor", 1}}}}}}};
  fa_test::write_file(dir.path + "/bundle/config.json", cfg.dump());
  json state = {{"ociVersion", "1.0.2"}, {"id", "pod-" + tag}, {"status", "created"}, {"pid", pod.pid},
                {"bundle", dir.path + "/bundle"}};
  fa_test::write_file(dir.path + "/state.json", state.dump());
  auto hook = [&](const std::string& stage) {
    return fa_test::run(abs_binary() + " oci-hook " + stage + " --socket " + dir.path + "/pods.sock --dev-root " + dev +
                        " <" + dir.path + "/state.json 2>&1");
  };
  auto reg = hook("create-runtime");
  INFO("hook: " << reg.out << "\nlog:\n" << agent.log());
  REQUIRE(reg.rc == 0);

  // The hook wrote what the daemon handed it into the container's root.
  const std::string root = dir.path + "/bundle/rootfs";
  CHECK(fa_test::read_file(root + "/etc/environment") == "NCCL_IB_HCA==mlx5_0:1\n");
  CHECK(fa_test::read_file(root + "/root/.ssh/authorized_keys").find(" fabric-agent:c-" + tag + "\n") != std::string::npos);
  CHECK(fa_test::read_file(root + "/etc/ssh/fabric-agent/ssh_host_ed25519_key") == keys.text("host") + "\n");
  CHECK(agent.log().find(keys.text("host").substr(40, 24)) == std::string::npos);
  CHECK(agent.log().find(keys.text("user").substr(40, 24)) == std::string::npos);

  // GET /v1/pods reads the registry: the pod is there as soon as the hook returns.
  json pods = get("/v1/pods")["pods"];
  REQUIRE(pods.size() == 1);
  CHECK(pods[0]["id"] == "pod-" + tag);
  CHECK(pods[0]["pid"] == pod.pid);

  // /v1/status follows on the refresh the registration queued (a new generation).
  bool in_status = false;
  for (int i = 0; i < 100 && !in_status; ++i) {
    json st = get("/v1/status");
    for (const auto& p : st["pods"])
      if (p["id"] == "pod-" + tag) in_status = true;
    if (!in_status) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(in_status);

  // The interface went into the pod; the daemon reads it there and did not
  // make a second one on the host.
  const std::string in_pod = "nsenter -t " + std::to_string(pod.pid) + " -n ip -4 addr show dev " + ifn;
  CHECK(fa_test::run(in_pod).out.find("10.42.0.1/24") != std::string::npos);
  CHECK(fa_test::run("ip link show dev " + ifn + " 2>/dev/null").rc != 0);
  json m = get("/v1/mesh");
  CHECK(!m["live"].is_null());
  // A PUT while the pod holds it configures it in the pod, not on the host.
  auto put2 = fa_test::run("curl -sS -f -X PUT " + auth + " -H 'Content-Type: application/json' --data-binary @" +
                           dir.path + "/mesh.json " + agent.url() + "/v1/mesh");
  CHECK(put2.rc == 0);
  CHECK(fa_test::run("ip link show dev " + ifn + " 2>/dev/null").rc != 0);
  CHECK(fa_test::run(in_pod).out.find("10.42.0.1/24") != std::string::npos);

  // 4. Poststop: unregistered, the interface back in the daemon's namespace.
  auto un = hook("poststop");
  INFO("poststop: " << un.out);
  CHECK(un.rc == 0);
  CHECK(get("/v1/pods")["pods"].empty());
  CHECK(fa_test::run("ip -4 addr show dev " + ifn).out.find("10.42.0.1/24") != std::string::npos);
}

// A daemon killed (-9) and restarted while a pod's network namespace holds
// the mesh interface: the restarted daemon finds the pod again from
// <state_dir>/pods.json (pid + start time + netns inode), adopts the
// interface where it is (no second one on the host, one wireguard-go) and
// the pod still pings its peer over it. Then killed again, the pod dies while
// no daemon holds its namespace (the kernel deletes the interface with it):
// the next start unregisters the pod and recreates the interface on the host
// from the persisted mesh, and the host pings the peer.
TEST_CASE("daemon: kill -9 and restart while a pod holds wg0 adopts it there, a pod gone meanwhile is released",
          "[netns]") {
  REQUIRE(::unshare(CLONE_NEWNET) == 0);
  REQUIRE(fa_test::run("ip link set lo up").rc == 0);
  TempDir dir;
  const std::string tag = fa_test::tag();
  const std::string ifn = "fwr" + tag, peer_if = "fwq" + tag, peer_ns = "fa-prp-" + tag;
  const int pa = 20000 + ::getpid() % 20000, pb = pa + 20000;
  const std::string dev = dir.path + "/dev";
  fs::create_directories(dev + "/infiniband");
  mknod_c(dev + "/infiniband/rdma_cm", 10, 58);  // no GPUs: any container is "whole machine"

  AgentProcess agent(dir.path, "sysfs_root: " + std::string(FA_FIXTURES_DIR) + "/a-ib-8gpu\n" +
                                   "overlay:\n  backend: userspace\n  interface: " + ifn + "\n" +
                                   "pods:\n  socket: " + dir.path + "/pods.sock\n  cdi_dir: " + dir.path +
                                   "/cdi\n  dev_root: " + dev + "\nrefresh_interval: 1h\n");
  auto auth = [&] { return "-H 'Authorization: Bearer " + agent.token() + "'"; };
  auto get = [&](const std::string& path) {
    auto r = fa_test::run("curl -sS -f " + auth() + " " + agent.url() + path);
    INFO(path << ": " << r.out << "\nlog:\n" << agent.log());
    REQUIRE(r.rc == 0);
    return json::parse(r.out);
  };
  struct Cleanup {
    std::function<void()> fn;
    ~Cleanup() { fn(); }
  } cleanup{[&] {
    fa_test::run("curl -s -X DELETE " + auth() + " " + agent.url() + "/v1/mesh >/dev/null");
    agent.stop(SIGKILL);
    (void)fa::overlay::down(ifn);
    fa::overlay::DownOptions dn;
    dn.netns = peer_ns;
    (void)fa::overlay::down(peer_if, dn);
    fa_test::run("ip netns del " + peer_ns + " 2>/dev/null");
  }};

  // The peer node: a namespace with a wireguard-go interface born here (its
  // UDP socket on this namespace's loopback, like the daemon's).
  auto pk = fa::overlay::generate_private_key();
  REQUIRE(pk.ok());
  REQUIRE(fa::write_file_atomic(dir.path + "/peer.key", fa::overlay::key_to_base64(*pk) + "\n", 0600).ok());
  const std::string peer_pub = fa::overlay::key_to_base64(*fa::overlay::public_key_of(*pk));
  const std::string daemon_pub = get("/v1/status")["mesh"]["public_key"].get<std::string>();
  REQUIRE(fa_test::run("ip netns add " + peer_ns + " && ip -n " + peer_ns + " link set lo up").rc == 0);
  json peer_mesh = {{"cluster_id", "c-" + tag}, {"interface", peer_if}, {"address", "10.42.0.2/24"},
                    {"listen_port", pb}, {"private_key_file", dir.path + "/peer.key"}, {"netns", peer_ns},
                    {"peers", {{{"public_key", daemon_pub}, {"endpoint", "127.0.0.1:" + std::to_string(pa)},
                                {"allowed_ips", {"10.42.0.1/32"}}}}}};
  {
    auto p = fa::overlay::parse_desired(peer_mesh);
    REQUIRE(p.ok());
    fa::overlay::ApplyOptions o;
    o.backend = fa::overlay::Backend::Userspace;
    auto r = fa::overlay::apply(*p.value, o);
    INFO((r.ok() ? std::string() : r.error().message));
    REQUIRE(r.ok());
  }
  json mesh = {{"cluster_id", "c-" + tag}, {"interface", ifn}, {"address", "10.42.0.1/24"}, {"listen_port", pa},
               {"peers", {{{"public_key", peer_pub}, {"endpoint", "127.0.0.1:" + std::to_string(pb)},
                           {"allowed_ips", {"10.42.0.2/32"}}}}}};
  fa_test::write_file(dir.path + "/mesh.json", mesh.dump());
  auto put = fa_test::run("curl -sS -f -X PUT " + auth() + " -H 'Content-Type: application/json' --data-binary @" +
                          dir.path + "/mesh.json " + agent.url() + "/v1/mesh");
  INFO(put.out << "\nlog:\n" << agent.log());
  REQUIRE(put.rc == 0);

  // The pod takes wg0 through the hook.
  auto pod = std::make_unique<Pod>();
  fs::create_directories(dir.path + "/bundle");
  fa_test::write_file(dir.path + "/bundle/config.json",
                      json{{"ociVersion", "1.0.2"}, {"process", {{"env", {"PATH=/bin"}}}}}.dump());
  json state = {{"ociVersion", "1.0.2"}, {"id", "pod-" + tag}, {"status", "created"}, {"pid", pod->pid},
                {"bundle", dir.path + "/bundle"}};
  fa_test::write_file(dir.path + "/state.json", state.dump());
  auto reg = fa_test::run(abs_binary() + " oci-hook create-runtime --socket " + dir.path + "/pods.sock --dev-root " +
                          dev + " <" + dir.path + "/state.json 2>&1");
  INFO("hook: " << reg.out << "\nlog:\n" << agent.log());
  REQUIRE(reg.rc == 0);
  const std::string in_pod = "nsenter -t " + std::to_string(pod->pid) + " -n ";
  const std::string host_has_if = "ip link show dev " + ifn + " >/dev/null 2>&1";
  const std::string wg_procs = "pgrep -f 'wireguard-go -f " + ifn + "$' | wc -l";
  REQUIRE(fa_test::run(in_pod + "ping -c 2 -W 5 10.42.0.2 >/dev/null 2>&1").rc == 0);
  REQUIRE(fa_test::run(host_has_if).rc != 0);
  json persisted = json::parse(fa_test::read_file(dir.path + "/state/pods.json"));
  REQUIRE(persisted["pods"].size() == 1);
  CHECK(persisted["pods"][0]["pid"] == pod->pid);
  CHECK(persisted["pods"][0]["start_time"].get<uint64_t>() > 0);
  CHECK(persisted["pods"][0]["netns_inode"].get<uint64_t>() > 0);

  // 1. kill -9 + restart with the pod alive, and the pod socket held by
  //    someone else (another agent, as far as the daemon can tell): the pod
  //    is adopted all the same and the mesh configured inside it.
  agent.stop(SIGKILL);
  const std::string sock = dir.path + "/pods.sock";
  auto other = fa::pods::PodSocketServer::start(sock, [](const json&) { return json{{"ok", false}}; });
  REQUIRE(other.ok());
  auto squatter = std::move(*other);
  agent.start();
  INFO("log:\n" << agent.log());
  CHECK(agent.log().find("containers cannot register until " + sock + " is served") != std::string::npos);
  auto socket_warning = [&] {
    return get("/v1/status")["warnings"].dump().find("pod registrations not served on " + sock) !=
           std::string::npos;
  };
  CHECK(socket_warning());
  CHECK(agent.log().find("pod pod-" + tag + " (pid " + std::to_string(pod->pid) +
                         ") still holds " + ifn) != std::string::npos);
  CHECK(fa_test::run(host_has_if).rc != 0);          // no second interface on the host
  CHECK(fa_test::run(wg_procs).out == "1\n");         // nor a second wireguard-go
  CHECK(fa_test::run(in_pod + "ip -4 addr show dev " + ifn).out.find("10.42.0.1/24") != std::string::npos);
  CHECK(fa_test::run(in_pod + "ping -c 2 -W 5 10.42.0.2 >/dev/null 2>&1").rc == 0);
  json pods = get("/v1/pods")["pods"];
  REQUIRE(pods.size() == 1);
  CHECK(pods[0]["alive"] == true);
  json m = get("/v1/mesh");
  CHECK(!m["live"].is_null());
  // A PUT now configures it inside the pod too, never on the host.
  auto put2 = fa_test::run("curl -sS -f -X PUT " + auth() + " -H 'Content-Type: application/json' --data-binary @" +
                           dir.path + "/mesh.json " + agent.url() + "/v1/mesh");
  CHECK(put2.rc == 0);
  CHECK(fa_test::run(host_has_if).rc != 0);
  // The socket is free again: the next discovery pass (a link change
  // starts one) serves it and the warning goes.
  squatter.reset();
  REQUIRE(fa_test::run("ip link add fak" + tag + " type veth peer name fal" + tag).rc == 0);
  bool served = false;
  for (int i = 0; i < 50 && !(served = !socket_warning()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(served);
  CHECK(agent.log().find("pod registrations on " + sock + " (1 registered)") != std::string::npos);
  fa_test::run("ip link del fak" + tag);

  // 2. kill -9 again; the pod dies while no daemon holds its namespace.
  agent.stop(SIGKILL);
  pod.reset();
  for (int i = 0; i < 50 && fa_test::run(wg_procs).out != "0\n"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // wireguard-go may outlive its tun briefly
  agent.start();
  CHECK(agent.log().find("pod pod-" + tag + " (pid " + std::to_string(state["pid"].get<int>()) +
                         ") is gone without a poststop hook") != std::string::npos);
  CHECK(get("/v1/pods")["pods"].empty());
  CHECK(json::parse(fa_test::read_file(dir.path + "/state/pods.json"))["pods"].empty());
  CHECK(fa_test::run("ip -4 addr show dev " + ifn).out.find("10.42.0.1/24") != std::string::npos);
  CHECK(fa_test::run(wg_procs).out == "1\n");
  CHECK(fa_test::run("ping -c 3 -W 5 10.42.0.2 >/dev/null 2>&1").rc == 0);
  CHECK(fa_test::run("ip netns exec " + peer_ns + " ping -c 2 -W 5 10.42.0.1 >/dev/null 2>&1").rc == 0);
}
