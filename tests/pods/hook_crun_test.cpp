// SPDX-License-Identifier: Apache-2.0
// End to end with a real runtime: crun runs busybox containers whose
// config.json carries our CDI spec's edits (what Podman/Docker do with
// `--device fabric-agent.io/rdma=all`); crun runs `fabric-agent oci-hook` with
// the state on stdin and no PATH; the hook talks to a PodService served on a
// unix socket by this process (the code the daemon runs), which moves a
// wireguard-go wg interface into the container.
//
// Isolation: this process first enters a network namespace of its own (the
// "host" of the test), so the overlay's UDP sockets and interfaces never touch
// the machine's real namespace; the peer node is another namespace whose
// interface is born here and moved there, so both WireGuard sockets talk over
// this namespace's loopback. crun runs in a private mount namespace with the
// cgroup v2 mount removed (crun refuses this host's hybrid layout otherwise).
// GPU and uverbs nodes are mknod'ed under a test device root.
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <optional>
#include <filesystem>
#include <thread>

#include "../overlay/netns_helpers.hpp"
#include "common/fs.hpp"
#include "overlay/overlay.hpp"
#include "pods/pods.hpp"

using namespace fa::pods;
using fa_test::read_file;
using fa_test::run;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string abs_binary() {
  const char* b = std::getenv("FA_BINARY");
  REQUIRE(b != nullptr);
  return fs::absolute(b).string();
}

bool wait_for_file(const std::string& p, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (fs::exists(p)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

struct Lab {
  std::string tag = fa_test::tag();
  std::string w = "/tmp/fa-pods-crun-" + tag;
  std::string dev = w + "/dev";
  std::string peer_ns = "fa-pp-" + tag;
  std::string ifa = "fpa" + tag, ifb = "fpb" + tag;
  int pa = 20000 + ::getpid() % 20000, pb = pa + 20000;
  json host_mesh, peer_mesh, inspect;
  std::unique_ptr<WgMover> mover;
  std::unique_ptr<PodService> svc;
  std::unique_ptr<PodSocketServer> srv;
  json cdi;
  std::vector<std::string> containers;
  std::vector<pid_t> bg;

  Lab() {
    // Everything below (wireguard-go, crun, the hooks) inherits this namespace.
    REQUIRE(::unshare(CLONE_NEWNET) == 0);
    REQUIRE(run("ip link set lo up").rc == 0);
    fs::remove_all(w);
    fs::create_directories(dev + "/infiniband");
    set_port_state("4: ACTIVE");
    fs::create_directories(w + "/rootfs/bin");
    for (auto d : {"proc", "dev", "sys", "tmp", "out"}) fs::create_directories(w + "/rootfs/" + d);
    fs::copy_file("/bin/busybox", w + "/rootfs/bin/busybox");
    for (auto a : {"sh", "cat", "ls", "ip", "ping", "sleep", "env", "grep", "sort", "touch", "echo"})
      fs::create_symlink("busybox", w + "/rootfs/bin/" + a);
    // Four "GPUs" (NVIDIA's major 195) and the RDMA nodes of two HCAs.
    for (int i = 0; i < 4; ++i) mknod_c(dev + "/nvidia" + std::to_string(i), 195, i);
    mknod_c(dev + "/infiniband/rdma_cm", 10, 58);
    mknod_c(dev + "/infiniband/uverbs0", 231, 192);
    mknod_c(dev + "/infiniband/uverbs1", 231, 193);
    mknod_c(dev + "/infiniband/umad0", 231, 0);  // present, never handed out

    auto key = [&](const std::string& name) {
      auto k = fa::overlay::generate_private_key();
      REQUIRE(k.ok());
      std::string path = w + "/" + name + ".key";
      REQUIRE(fa::write_file_atomic(path, fa::overlay::key_to_base64(*k) + "\n", 0600).ok());
      return fa::overlay::key_to_base64(*fa::overlay::public_key_of(*k));
    };
    std::string pub_a = key("a"), pub_b = key("b");
    host_mesh = {{"cluster_id", "c-" + tag},
                 {"interface", ifa},
                 {"address", "10.42.0.1/24"},
                 {"listen_port", pa},
                 {"private_key_file", w + "/a.key"},
                 {"peers", {{{"public_key", pub_b}, {"endpoint", "127.0.0.1:" + std::to_string(pb)},
                             {"allowed_ips", {"10.42.0.2/32"}}}}}};
    peer_mesh = {{"cluster_id", "c-" + tag},
                 {"interface", ifb},
                 {"address", "10.42.0.2/24"},
                 {"listen_port", pb},
                 {"private_key_file", w + "/b.key"},
                 {"netns", peer_ns},
                 {"peers", {{{"public_key", pub_a}, {"endpoint", "127.0.0.1:" + std::to_string(pa)},
                             {"allowed_ips", {"10.42.0.1/32"}}}}}};
    REQUIRE(run("ip netns add " + peer_ns + " && ip -n " + peer_ns + " link set lo up").rc == 0);
    apply(peer_mesh);
    apply(host_mesh);

    inspect = {{"hcas", {{{"name", "mlx5_0"}, {"ports", {{{"port", 1}, {"state", "ACTIVE"}}}}},
                         {{"name", "mlx5_1"}, {"ports", {{{"port", 1}, {"state", "ACTIVE"}, {"link_layer", "Ethernet"}}}}}}},
               {"fabric", {{"kind", "infiniband"}, {"ports", {"mlx5_0:1"}}}},
               {"nccl_env", {{"NCCL_IB_HCA", "=mlx5_0:1"}, {"NCCL_SOCKET_IFNAME", ifa}}}};
    start_daemon();

    CdiOptions co;
    co.dev_root = dev;
    co.hook_path = abs_binary();
    co.socket = w + "/pods.sock";
    co.runtime_path = runtime_beside(co.hook_path);
    co.nested_spec = nested_spec_path(co.socket);
    auto spec = build_cdi_spec(inspect, {{"mlx5_0", "uverbs0"}, {"mlx5_1", "uverbs1"}}, co);
    REQUIRE(spec.ok());
    CHECK(spec->warnings.empty());
    REQUIRE(write_nested_spec(co.nested_spec, spec->nested).ok());
    auto path = write_cdi_spec(w + "/cdi", spec->doc);
    REQUIRE(path.ok());
    cdi = json::parse(*fa::read_text_file(*path));
  }

  ~Lab() {
    for (pid_t p : bg) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    for (const auto& c : containers) run("crun delete -f " + c + " >/dev/null 2>&1");
    srv.reset();
    svc.reset();
    mover.reset();
    fa::overlay::DownOptions dn;
    dn.netns = peer_ns;
    (void)fa::overlay::down(ifb, dn);
    (void)fa::overlay::down(ifa);
    run("ip netns del " + peer_ns + " 2>/dev/null");
    fs::remove_all(w);
  }

  // mlx5_0:1's state file under the test's sysfs root, in the kernel's
  // format: the daemon reads it at each registration.
  void set_port_state(const std::string& text) {
    fs::create_directories(w + "/sys/class/infiniband/mlx5_0/ports/1");
    fa_test::write_file(w + "/sys/class/infiniband/mlx5_0/ports/1/state", text + "\n");
  }

  static void mknod_c(const std::string& p, unsigned ma, unsigned mi) {
    REQUIRE(::mknod(p.c_str(), S_IFCHR | 0666, makedev(ma, mi)) == 0);
  }

  void apply(const json& doc) {
    auto p = fa::overlay::parse_desired(doc);
    REQUIRE(p.ok());
    fa::overlay::ApplyOptions o;
    o.backend = fa::overlay::Backend::Userspace;  // this kernel has no WireGuard
    auto r = fa::overlay::apply(*p.value, o);
    INFO((r.ok() ? std::string() : r.error().message));
    REQUIRE(r.ok());
  }

  // What `fabric-agent run` does: registry from the state dir, service, socket.
  void start_daemon() {
    auto reg = PodRegistry::load(w + "/pods.json");
    REQUIRE(reg.ok());
    mover = make_overlay_mover();
    ServiceDeps d;
    d.inspect = [this] { return inspect; };
    auto desired = fa::overlay::parse_desired(host_mesh).value;
    d.desired_mesh = [desired] { return desired; };
    d.mover = mover.get();
    d.sysfs_root = w + "/sys";
    svc = std::make_unique<PodService>(std::move(*reg), d);
    svc->reconcile();  // as PodsRuntime::start: pods registered before a restart
    auto s = PodSocketServer::start(w + "/pods.sock", [this](const json& req) { return svc->handle(req); });
    REQUIRE(s.ok());
    srv = std::move(*s);
  }
  void stop_daemon() {
    srv.reset();
    svc.reset();
    mover.reset();
  }

  // A bundle whose config.json is what a CDI-aware engine would hand crun:
  // the GPUs it asked for, plus the edits of fabric-agent.io/rdma=all.
  std::string bundle(const std::string& id, std::vector<int> gpus, const std::string& script) {
    containers.push_back(id);
    std::string b = w + "/b-" + id;
    fs::create_directories(b);
    fs::create_directories(w + "/out-" + id);
    REQUIRE(run("cd " + b + " && crun spec").rc == 0);
    json c = json::parse(read_file(b + "/config.json"));
    c["process"]["terminal"] = false;
    c["process"]["args"] = {"sh", "-c", script};
    for (auto set : {"bounding", "effective", "permitted"}) c["process"]["capabilities"][set].push_back("CAP_NET_RAW");
    c["root"] = {{"path", w + "/rootfs"}, {"readonly", true}};
    c["mounts"].push_back({{"destination", "/out"}, {"type", "bind"}, {"source", w + "/out-" + id}, {"options", {"rbind", "rw"}}});
    json& devs = c["linux"]["devices"] = json::array();
    auto add_dev = [&](const std::string& path, const std::string& host) {
      struct stat st{};
      REQUIRE(::stat(host.c_str(), &st) == 0);
      devs.push_back({{"path", path}, {"type", "c"}, {"major", major(st.st_rdev)}, {"minor", minor(st.st_rdev)},
                      {"fileMode", 0666}, {"uid", 0}, {"gid", 0}});
    };
    for (int g : gpus) add_dev("/dev/nvidia" + std::to_string(g), dev + "/nvidia" + std::to_string(g));
    // The CDI edits, applied as the CDI library does: nodes (stat'ed on the
    // host), env appended, hooks by name.
    for (const auto& n : cdi["devices"][0]["containerEdits"]["deviceNodes"])
      add_dev(n["path"], n.value("hostPath", n["path"].get<std::string>()));
    for (const auto& e : cdi["containerEdits"]["env"]) c["process"]["env"].push_back(e);
    for (const auto& h : cdi["containerEdits"]["hooks"]) {
      json oh = {{"path", h["path"]}, {"args", h["args"]}, {"timeout", h["timeout"]}};
      c["hooks"][h["hookName"].get<std::string>()].push_back(oh);
    }
    for (const auto& m : cdi["containerEdits"].value("mounts", json::array()))
      c["mounts"].push_back({{"destination", m["containerPath"]}, {"type", "bind"}, {"source", m["hostPath"]},
                             {"options", m["options"]}});
    // crun runs hooks with their stdio on /dev/null unless told where to
    // put them (runc puts hook stderr in its own error message instead).
    c["annotations"]["run.oci.hooks.stderr"] = w + "/" + id + ".hook.log";
    fa_test::write_file(b + "/config.json", c.dump(1));
    return b;
  }

  std::string crun_cmd(const std::string& id) {
    return "unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec crun run --bundle " + w + "/b-" + id + " " +
           id + "' >" + w + "/" + id + ".log 2>&1 </dev/null";
  }
  int crun_fg(const std::string& id) { return run(crun_cmd(id)).rc; }
  pid_t crun_bg(const std::string& id) {
    pid_t p = ::fork();
    if (p == 0) {
      ::execl("/bin/sh", "sh", "-c", crun_cmd(id).c_str(), nullptr);
      ::_exit(127);
    }
    bg.push_back(p);
    return p;
  }
  int wait_bg(pid_t p) {
    int st = 0;
    ::waitpid(p, &st, 0);
    bg.erase(std::remove(bg.begin(), bg.end(), p), bg.end());
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  }
  std::string out(const std::string& id, const std::string& f) { return read_file(w + "/out-" + id + "/" + f); }
  std::string log(const std::string& id) { return read_file(w + "/" + id + ".log"); }
  std::string hook_log(const std::string& id) { return read_file(w + "/" + id + ".hook.log"); }
  bool on_host() { return run("ip -4 addr show dev " + ifa + " 2>/dev/null").out.find("10.42.0.1/24") != std::string::npos; }
  size_t registered() { return svc->list()["pods"].size(); }
};

std::string probe_script(const std::string& ifname, bool hold) {
  std::string s =
      "grep 'Max locked memory' /proc/self/limits > /out/limits; ls /dev/infiniband > /out/ib; ls /dev > /out/dev; "
      "env | grep ^NCCL_ | sort > /out/env; ip -4 addr show dev " + ifname + " > /out/addr 2>&1; "
      "ping -c 3 -W 5 10.42.0.2 > /out/ping 2>&1; echo $? > /out/ping.rc; touch /out/ready; ";
  if (hold) s += "while [ ! -e /out/stop ]; do sleep 0.1; done";
  return s;
}

}  // namespace

TEST_CASE("crun: whole-machine pod gets the fabric and wg0, half-GPU, second and port-DOWN pods are refused, wg0 comes back",
          "[netns]") {
  Lab lab;
  REQUIRE(lab.on_host());
  bool can_unlimit = run("prlimit --pid $$ --memlock=unlimited:unlimited 2>/dev/null").rc == 0;

  // 1. The whole machine: all four GPUs.
  lab.bundle("c1-" + lab.tag, {0, 1, 2, 3}, probe_script(lab.ifa, true));
  pid_t c1 = lab.crun_bg("c1-" + lab.tag);
  std::string id1 = "c1-" + lab.tag;
  bool ready = wait_for_file(lab.w + "/out-" + id1 + "/ready", 90);
  INFO("crun log:\n" << lab.log(id1));
  REQUIRE(ready);
  CHECK(lab.out(id1, "ib") == "rdma_cm\nuverbs0\n");  // fabric HCA only: no uverbs1, no umad
  CHECK(lab.out(id1, "env") == "NCCL_IB_HCA==mlx5_0:1\nNCCL_SOCKET_IFNAME=" + lab.ifa + "\n");
  CHECK(lab.out(id1, "addr").find("inet 10.42.0.1/24") != std::string::npos);
  INFO("ping:\n" << lab.out(id1, "ping"));
  CHECK(lab.out(id1, "ping.rc") == "0\n");
  if (can_unlimit) {
    CHECK(lab.out(id1, "limits").find("unlimited            unlimited") != std::string::npos);
  } else {
    // No CAP_SYS_RESOURCE here: the hook raised the soft limit to the hard
    // one and said so in the runtime's log.
    WARN("no CAP_SYS_RESOURCE: memlock checked at the hard limit, not unlimited: " << lab.out(id1, "limits"));
    CHECK(lab.hook_log(id1).find("raised only to its hard limit") != std::string::npos);
  }
  CHECK_FALSE(lab.on_host());  // wg0 lives in the container now
  json pods = lab.svc->list();
  REQUIRE(pods["pods"].size() == 1);
  CHECK(pods["pods"][0]["id"] == id1);
  CHECK(pods["pods"][0]["alive"] == true);

  // 2. Half the GPUs: refused with the reason, nothing registered.
  std::string id2 = "c2-" + lab.tag;
  lab.bundle(id2, {0, 1}, "touch /out/started");
  CHECK(lab.crun_fg(id2) != 0);
  INFO("crun: " << lab.log(id2) << "hook: " << lab.hook_log(id2));
  CHECK(lab.hook_log(id2).find("fabric-agent: refused: container holds 2 of 4 NVIDIA GPUs (missing /dev/nvidia2, /dev/nvidia3)") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(lab.w + "/out-" + id2 + "/started"));
  CHECK(lab.registered() == 1);

  // 3. A second whole-machine container while the first runs: refused.
  std::string id3 = "c3-" + lab.tag;
  lab.bundle(id3, {0, 1, 2, 3}, "touch /out/started");
  CHECK(lab.crun_fg(id3) != 0);
  CHECK(lab.hook_log(id3).find("fabric-agent: refused: container " + id1 + " (pid ") != std::string::npos);
  CHECK(lab.hook_log(id3).find("already holds the RDMA fabric of this host") != std::string::npos);
  CHECK_FALSE(fs::exists(lab.w + "/out-" + id3 + "/started"));
  CHECK(lab.registered() == 1);

  // 4. The first exits: poststop gives wg0 back to the host, intact.
  fa_test::write_file(lab.w + "/out-" + id1 + "/stop", "");
  CHECK(lab.wait_bg(c1) == 0);
  CHECK(lab.registered() == 0);
  CHECK(lab.on_host());
  CHECK(run("ip netns exec " + lab.peer_ns + " ping -c 2 -W 5 10.42.0.1 >/dev/null 2>&1").rc == 0);

  // 5. The fabric port goes down (no discovery pass: the daemon's inspect
  // still says ACTIVE): the next container is refused, naming the port.
  lab.set_port_state("1: DOWN");
  std::string id6 = "c6-" + lab.tag;
  lab.bundle(id6, {0, 1, 2, 3}, "touch /out/started");
  CHECK(lab.crun_fg(id6) != 0);
  INFO("crun: " << lab.log(id6) << "hook: " << lab.hook_log(id6));
  CHECK(lab.hook_log(id6).find("fabric-agent: refused: no fabric port is ACTIVE (mlx5_0:1 is DOWN)\n") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(lab.w + "/out-" + id6 + "/started"));
  CHECK(lab.registered() == 0);
  CHECK(lab.on_host());
  lab.set_port_state("4: ACTIVE");

  // 6. A new whole-machine container gets wg0 again.
  std::string id4 = "c4-" + lab.tag;
  lab.bundle(id4, {0, 1, 2, 3}, probe_script(lab.ifa, false));
  CHECK(lab.crun_fg(id4) == 0);
  INFO("crun log:\n" << lab.log(id4));
  CHECK(lab.out(id4, "addr").find("inet 10.42.0.1/24") != std::string::npos);
  CHECK(lab.out(id4, "ping.rc") == "0\n");
  CHECK(lab.registered() == 0);
  CHECK(lab.on_host());
}

TEST_CASE("crun: daemon restarted while a pod holds wg0 adopts it there and the exit gives it back intact", "[netns]") {
  Lab lab;
  std::string id = "c5-" + lab.tag;
  lab.bundle(id, {0, 1, 2, 3}, probe_script(lab.ifa, true));
  pid_t c = lab.crun_bg(id);
  bool ready = wait_for_file(lab.w + "/out-" + id + "/ready", 90);
  INFO("crun log:\n" << lab.log(id));
  REQUIRE(ready);
  CHECK(lab.out(id, "ping.rc") == "0\n");
  const std::string wg_pid = run("pgrep -f 'wireguard-go -f " + lab.ifa + "$'").out;
  REQUIRE_FALSE(wg_pid.empty());

  // The daemon goes away and comes back with only the persisted
  // registration: it finds the pod alive and holds its namespace again.
  lab.stop_daemon();
  lab.start_daemon();
  REQUIRE(lab.registered() == 1);
  CHECK(lab.svc->interface_netns().has_value());
  CHECK_FALSE(lab.on_host());

  fa_test::write_file(lab.w + "/out-" + id + "/stop", "");
  CHECK(lab.wait_bg(c) == 0);
  INFO("crun log:\n" << lab.log(id));
  // Held across the exit: poststop moved the same wg0 back (same
  // wireguard-go, its session intact), nothing was recreated.
  CHECK(lab.registered() == 0);
  CHECK(lab.on_host());
  CHECK(run("pgrep -f 'wireguard-go -f " + lab.ifa + "$'").out == wg_pid);
  CHECK(run("ping -c 3 -W 5 10.42.0.2 >/dev/null 2>&1").rc == 0);
  CHECK(run("ip netns exec " + lab.peer_ns + " ping -c 2 -W 5 10.42.0.1 >/dev/null 2>&1").rc == 0);
}

TEST_CASE("host GPU scan under a device root", "[netns]") {
  char t[] = "/tmp/fa-pods-dev-XXXXXX";
  REQUIRE(::mkdtemp(t) != nullptr);
  std::string d = t;
  fs::create_directories(d + "/dri");
  for (int i : {0, 1, 10, 2}) Lab::mknod_c(d + "/nvidia" + std::to_string(i), 195, i);
  Lab::mknod_c(d + "/nvidiactl", 195, 255);
  Lab::mknod_c(d + "/nvidia-uvm", 510, 0);
  auto g = scan_host_gpus(d);
  REQUIRE(g.ok());
  REQUIRE(g->nvidia.size() == 4);
  CHECK(g->nvidia[3].path == "/dev/nvidia10");
  CHECK(g->nvidia[3].minor == 10);
  CHECK_FALSE(g->amd_kfd);
  Lab::mknod_c(d + "/kfd", 235, 0);
  Lab::mknod_c(d + "/dri/renderD128", 226, 128);
  Lab::mknod_c(d + "/dri/card0", 226, 0);
  g = scan_host_gpus(d);
  REQUIRE(g->amd_kfd);
  REQUIRE(g->amd.size() == 2);
  CHECK(g->amd[1].path == "/dev/dri/renderD128");
  fs::remove_all(d);
}

// The same spec consumed by Podman (Debian 12: 4.3.1) through its own CDI
// library: `--device fabric-agent.io/rdma=all`, rootfs via --rootfs (a
// busybox-static tree, never an image from the network), --network none (the
// container's own empty namespace, into which the hook moves wg0).
// scripts/deps.sh installs podman: a missing podman fails this case.
// Podman reads specs only from /etc/cdi and /var/run/cdi (4.3 has no
// cdi_spec_dirs setting), so the spec goes to /var/run/cdi for the test and
// whatever was there is put back.
TEST_CASE("podman: --device fabric-agent.io/rdma=all with the same spec", "[netns]") {
  auto have = run("podman --version 2>&1");
  INFO("podman --version: " << have.out);
  REQUIRE(have.rc == 0);  // scripts/deps.sh installs it
  Lab lab;
  const std::string sys_spec = std::string(kDefaultCdiDir) + "/" + cdi_spec_filename();
  std::optional<std::string> saved;
  if (auto t = fa::read_text_file(sys_spec)) saved = *t;
  struct Restore {
    std::string path;
    std::optional<std::string> text;
    ~Restore() {
      if (text)
        (void)fa::write_file_atomic(path, *text, 0644);
      else
        fs::remove(path);
    }
  } restore{sys_spec, saved};
  REQUIRE(write_cdi_spec(kDefaultCdiDir, lab.cdi).ok());

  auto podman = [&](const std::string& id, int gpus, const std::string& script) {
    fs::create_directories(lab.w + "/out-" + id);
    fa_test::write_file(lab.w + "/out-" + id + "/script.sh", script);  // no shell quoting through two shells
    std::string devs;
    for (int i = 0; i < gpus; ++i)
      devs += " --device " + lab.dev + "/nvidia" + std::to_string(i) + ":/dev/nvidia" + std::to_string(i);
    // This sandbox has no CAP_SYS_RESOURCE: podman's default rlimits (nofile
    // 1048576, nproc at max) cannot be set by crun, lower ones can.
    std::string cmd = "unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec podman --runtime crun "
                      "--cgroup-manager cgroupfs run --rm --name " + id + " --network none "
                      "--ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --cap-add NET_RAW "
                      "--annotation run.oci.hooks.stderr=" + lab.w + "/" + id + ".hook.log "
                      "--device fabric-agent.io/rdma=all" + devs + " -v " + lab.w + "/out-" + id + ":/out "
                      "--rootfs " + lab.w + "/rootfs sh /out/script.sh' >" + lab.w + "/" + id + ".log 2>&1 </dev/null";
    return run(cmd).rc;
  };

  std::string id = "pm1-" + lab.tag;
  int rc = podman(id, 4, probe_script(lab.ifa, false));
  INFO("podman:\n" << lab.log(id) << "\nhook:\n" << lab.hook_log(id));
  CHECK(rc == 0);
  CHECK(lab.out(id, "ib") == "rdma_cm\nuverbs0\n");
  CHECK(lab.out(id, "env") == "NCCL_IB_HCA==mlx5_0:1\nNCCL_SOCKET_IFNAME=" + lab.ifa + "\n");
  CHECK(lab.out(id, "addr").find("inet 10.42.0.1/24") != std::string::npos);
  CHECK(lab.out(id, "ping.rc") == "0\n");
  if (run("prlimit --pid $$ --memlock=unlimited:unlimited 2>/dev/null").rc == 0)
    CHECK(lab.out(id, "limits").find("unlimited            unlimited") != std::string::npos);
  else
    CHECK(lab.hook_log(id).find("raised only to its hard limit") != std::string::npos);
  CHECK(lab.registered() == 0);
  CHECK(lab.on_host());

  std::string half = "pm2-" + lab.tag;
  CHECK(podman(half, 2, "touch /out/started") != 0);
  INFO("podman:\n" << lab.log(half));
  CHECK(lab.hook_log(half).find("fabric-agent: refused: container holds 2 of 4 NVIDIA GPUs") != std::string::npos);
  CHECK_FALSE(fs::exists(lab.w + "/out-" + half + "/started"));
  CHECK(lab.registered() == 0);
  CHECK(lab.on_host());
}

// ------------------------------------------------ nested containers ---
// fabric-agent-runtime as the runtime of a real engine, on this host: the
// engine is told nothing about the fabric (no --device, no CDI), the runtime
// applies the spec the daemon wrote (the test's, via FABRIC_AGENT_CDI_SPEC)
// and execs the real runtime (runc, the first in PATH; or
// FABRIC_AGENT_RUNTIME where the engine passes its environment on).

namespace {

std::string runtime_binary() {
  std::string r = runtime_beside(abs_binary());
  REQUIRE_FALSE(r.empty());  // built beside fabric-agent
  return r;
}

}  // namespace

TEST_CASE("nested container: podman --runtime fabric-agent-runtime gives the fabric with no --device and keeps -e", "[netns]") {
  REQUIRE(run("podman --version 2>&1").rc == 0);  // scripts/deps.sh installs it
  Lab lab;
  std::string id = "nr1-" + lab.tag;
  fs::create_directories(lab.w + "/out-" + id);
  fa_test::write_file(lab.w + "/out-" + id + "/script.sh",
                      probe_script(lab.ifa, false) +
                          "ls -l /usr/bin/fabric-agent-runtime > /out/shim 2>&1; cat /var/run/cdi/fabric-agent.io-rdma.json > /out/podspec 2>&1");
  std::string devs;
  for (int i = 0; i < 4; ++i) devs += " --device " + lab.dev + "/nvidia" + std::to_string(i) + ":/dev/nvidia" + std::to_string(i);
  // conmon runs the runtime's create with a clean environment plus
  // containers.conf's conmon_env_vars (where the spec's path goes); podman
  // runs start, kill and delete itself with no FABRIC_AGENT_* at all, so
  // the real runtime is the PATH default, runc, for every verb alike.
  auto conf = [&](const std::string& spec) {
    std::string path = lab.w + "/containers-" + std::to_string(std::hash<std::string>{}(spec)) + ".conf";
    fa_test::write_file(path, "[engine]\nconmon_env_vars = [\"PATH=/usr/sbin:/usr/bin:/sbin:/bin\", \"FABRIC_AGENT_CDI_SPEC=" +
                                  spec + "\"]\n");
    return "CONTAINERS_CONF=" + path;
  };
  std::string cmd = conf(lab.w + "/cdi/" + cdi_spec_filename()) +
                    " unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; "
                    "exec podman --runtime " + runtime_binary() + " --cgroup-manager cgroupfs run --rm --name " + id +
                    " --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --cap-add NET_RAW "
                    "--annotation run.oci.hooks.stderr=" + lab.w + "/" + id + ".hook.log -e NCCL_IB_HCA=mine" + devs +
                    " -v " + lab.w + "/out-" + id + ":/out --rootfs " + lab.w + "/rootfs sh /out/script.sh' >" + lab.w +
                    "/" + id + ".log 2>&1 </dev/null";
  int rc = run(cmd).rc;
  INFO("podman:\n" << lab.log(id) << "\nhook:\n" << lab.hook_log(id));
  CHECK(rc == 0);
  CHECK(lab.out(id, "ib") == "rdma_cm\nuverbs0\n");
  // -e NCCL_IB_HCA=mine is left as set; the variable not set is added.
  CHECK(lab.out(id, "env") == "NCCL_IB_HCA=mine\nNCCL_SOCKET_IFNAME=" + lab.ifa + "\n");
  // The spec's hook ran (whole machine, wg0 moved in), as with --device.
  CHECK(lab.out(id, "addr").find("inet 10.42.0.1/24") != std::string::npos);
  CHECK(lab.out(id, "ping.rc") == "0\n");
  // The pod holds what an engine inside it needs: the runtime and its spec.
  CHECK(lab.out(id, "shim").find("/usr/bin/fabric-agent-runtime") != std::string::npos);
  CHECK(json::parse(lab.out(id, "podspec"))["containerEdits"]["env"][1] == "NCCL_SOCKET_IFNAME=" + lab.ifa);
  CHECK(lab.on_host());

  // Without its spec the runtime starts nothing, and says why.
  std::string id2 = "nr2-" + lab.tag;
  fs::create_directories(lab.w + "/out-" + id2);
  std::string cmd2 = conf(lab.w + "/no-such-spec.json") +
                     " unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec podman --runtime " +
                     runtime_binary() + " --cgroup-manager cgroupfs run --rm --name " + id2 +
                     " --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 -v " + lab.w + "/out-" + id2 +
                     ":/out --rootfs " + lab.w + "/rootfs touch /out/started' >" + lab.w + "/" + id2 + ".log 2>&1 </dev/null";
  CHECK(run(cmd2).rc != 0);
  INFO("podman:\n" << lab.log(id2));
  CHECK(lab.log(id2).find("the fabric's CDI spec: open " + lab.w + "/no-such-spec.json: No such file or directory") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(lab.w + "/out-" + id2 + "/started"));
}

namespace {

// A whole-machine pod (the Lab's bundle: the spec's devices, env, hooks and
// mounts) that may run containers itself: the capabilities for it, no
// seccomp filter, no masked paths, a cgroup2 mount, and the engines'
// binaries with their libraries bind-mounted read-only from the host (the
// busybox rootfs has no C library; fabric-agent-runtime, static, needs none).
std::string nesting_pod(Lab& lab, const std::string& id, const std::string& script) {
  std::string b = lab.bundle(id, {0, 1, 2, 3}, script);
  json c = json::parse(read_file(b + "/config.json"));
  for (auto set : {"bounding", "effective", "permitted"})
    for (auto cap : {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_SETFCAP", "CAP_SYS_PTRACE",
                     "CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_MKNOD", "CAP_SYS_CHROOT", "CAP_SETPCAP", "CAP_SETUID",
                     "CAP_SETGID"})
      c["process"]["capabilities"][set].push_back(cap);
  c["process"]["env"].push_back("PATH=/usr/sbin:/usr/bin:/sbin:/bin");
  c["linux"].erase("seccomp");
  c["linux"]["maskedPaths"] = json::array();
  c["linux"]["readonlyPaths"] = json::array();
  for (auto path : {"/usr/bin/crun", "/usr/sbin/dockerd", "/usr/bin/containerd", "/usr/bin/containerd-shim-runc-v2",
                    "/usr/sbin/runc", "/usr/bin/docker", "/lib/x86_64-linux-gnu", "/lib64"})
    c["mounts"].push_back({{"destination", path}, {"type", "bind"}, {"source", path}, {"options", {"rbind", "ro"}}});
  c["mounts"].push_back({{"destination", "/sys/fs/cgroup"}, {"type", "cgroup2"}, {"source", "cgroup2"},
                         {"options", {"nosuid", "noexec", "nodev", "rw"}}});
  // The rootfs is read-only: dockerd writes its containerd's shim sockets
  // under /run and creates /etc/docker; /etc/resolv.conf and /etc/hosts are
  // what docker copies into a container.
  for (auto dir : {"/run", "/tmp", "/etc/docker"})
    c["mounts"].push_back({{"destination", dir}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"nosuid", "nodev"}}});
  for (auto f : {"resolv.conf", "hosts"}) fa_test::write_file(lab.w + "/out-" + id + "/" + f, "");
  for (auto f : {"resolv.conf", "hosts"})
    c["mounts"].push_back({{"destination", std::string("/etc/") + f}, {"type", "bind"},
                           {"source", lab.w + "/out-" + id + "/" + f}, {"options", {"rbind", "ro"}}});
  fa_test::write_file(b + "/config.json", c.dump(1));
  return b;
}

// The busybox tree as a directory a test can `tar` into an image.
void busybox_tree(const std::string& dir, std::initializer_list<const char*> applets) {
  fs::create_directories(dir + "/bin");
  for (auto d : {"proc", "dev", "sys", "out"}) fs::create_directories(dir + "/" + d);
  fs::copy_file("/bin/busybox", dir + "/bin/busybox");
  for (auto a : applets) fs::create_symlink("busybox", dir + "/bin/" + a);
}

}  // namespace

// Inside the pod: a nested container started by a real runtime in the pod
// through the bind-mounted runtime, which reads the pod's spec at its
// default path. The pod is nesting_pod (the hook gives it wg0); nested crun
// runs with --cgroup-manager=disabled and its state under /out. The nested
// container shares the pod's network namespace, so it sees the pod's wg0.
TEST_CASE("nested container: inside the pod a crun container started through fabric-agent-runtime gets the fabric", "[netns]") {
  Lab lab;
  std::string id = "np1-" + lab.tag;
  const std::string out = lab.w + "/out-" + id;
  // The nested bundle, as an engine in the pod would write it: a busybox
  // rootfs under /out and the user's own NCCL_IB_HCA.
  busybox_tree(out + "/nb/rootfs", {"sh", "ls", "env", "grep", "sort", "ip"});
  REQUIRE(run("cd " + out + "/nb && crun spec").rc == 0);
  json n = json::parse(read_file(out + "/nb/config.json"));
  n["process"]["terminal"] = false;
  n["process"]["args"] = {"sh", "-c",
                          "ls /dev/infiniband > /out/ib; env | grep ^NCCL_ | sort > /out/env; "
                          "ip -4 addr show dev " + lab.ifa + " > /out/addr 2>&1"};
  n["process"]["env"].push_back("NCCL_IB_HCA=mine");
  n["root"] = {{"path", "rootfs"}, {"readonly", true}};
  json ns = json::array();
  for (const auto& x : n["linux"]["namespaces"])
    if (x["type"] != "network") ns.push_back(x);
  n["linux"]["namespaces"] = ns;
  n["mounts"].push_back({{"destination", "/out"}, {"type", "bind"}, {"source", "/out"}, {"options", {"rbind", "rw"}}});
  fa_test::write_file(out + "/nb/config.json", n.dump(1));

  std::string b = nesting_pod(lab, id,
                              "FABRIC_AGENT_RUNTIME=/usr/bin/crun /usr/bin/fabric-agent-runtime --root /out/crun "
                              "--cgroup-manager=disabled run --bundle /out/nb n1 > /out/shim.log 2>&1; echo $? > /out/shim.rc");
  int rc = lab.crun_fg(id);
  INFO("crun:\n" << lab.log(id) << "\nhook:\n" << lab.hook_log(id) << "\nshim and nested crun:\n" << lab.out(id, "shim.log"));
  CHECK(rc == 0);
  REQUIRE(lab.out(id, "shim.rc") == "0\n");
  CHECK(lab.out(id, "ib") == "rdma_cm\nuverbs0\n");
  CHECK(lab.out(id, "env") == "NCCL_IB_HCA=mine\nNCCL_SOCKET_IFNAME=" + lab.ifa + "\n");
  CHECK(lab.out(id, "addr").find("inet 10.42.0.1/24") != std::string::npos);  // the pod's wg0
  json edited = json::parse(lab.out(id, "nb/config.json"));
  CHECK_FALSE(edited.contains("hooks"));  // no daemon in the pod: the pod's spec has none
  CHECK(edited["process"]["rlimits"].back()["type"] == "RLIMIT_MEMLOCK");
  CHECK(lab.on_host());
}

// The promise as the renter meets it: a Docker daemon started inside the pod
// (Debian's dockerd 20.10 with its containerd and runc, mounted from the
// host into nesting_pod) with "default-runtime": fabric-agent-runtime in its
// daemon.json; a plain `docker run -e NCCL_IB_HCA=mine --network host -v ...`
// gets the fabric. dockerd runs with its data and exec roots under /out, vfs
// storage, no bridge or iptables; the image is a busybox tree imported with
// `docker import`.
TEST_CASE("nested container: a Docker daemon inside the pod with default-runtime fabric-agent-runtime gives docker run the fabric", "[netns]") {
  Lab lab;
  std::string id = "npd-" + lab.tag;
  const std::string out = lab.w + "/out-" + id;
  busybox_tree(out + "/img", {"sh", "ls", "env", "grep", "sort", "ip"});
  fs::create_directories(out + "/dk");
  fa_test::write_file(out + "/dk/daemon.json",
                      json{{"runtimes", {{"fabric", {{"path", "/usr/bin/fabric-agent-runtime"}}}}},
                           {"default-runtime", "fabric"}}.dump());
  for (auto a : {"tar", "kill"}) fs::create_symlink("busybox", lab.w + "/rootfs/bin/" + a);
  const std::string d = "docker -H unix:///out/dk/d.sock";
  fa_test::write_file(out + "/pod.sh",
                      "dockerd --data-root /out/dk/data --exec-root /out/dk/x -H unix:///out/dk/d.sock --pidfile /out/dk/d.pid "
                      "--config-file /out/dk/daemon.json --bridge none --iptables=false --ip6tables=false --ip-masq=false "
                      "--storage-driver vfs --exec-opt native.cgroupdriver=cgroupfs > /out/dk/dockerd.log 2>&1 &\n"
                      "i=0; while [ $i -lt 150 ] && ! " + d + " info >/dev/null 2>&1; do sleep 0.2; i=$((i+1)); done\n"
                      "tar -C /out/img -c . | " + d + " import - fa-bb:1 > /out/import.log 2>&1\n" + d +
                      " run --rm --network host -v /out:/out -e NCCL_IB_HCA=mine fa-bb:1 sh -c 'ls /dev/infiniband > /out/ib; "
                      "env | grep ^NCCL_ | sort > /out/env; ip -4 addr show dev " + lab.ifa + " > /out/addr 2>&1' "
                      "> /out/run.log 2>&1; echo $? > /out/run.rc\n"
                      "kill $(cat /out/dk/d.pid); i=0; while [ $i -lt 100 ] && [ -e /out/dk/d.pid ]; do sleep 0.1; i=$((i+1)); done\n");
  nesting_pod(lab, id, "sh /out/pod.sh");
  int rc = lab.crun_fg(id);
  INFO("crun:\n" << lab.log(id) << "\nhook:\n" << lab.hook_log(id) << "\ndocker run:\n" << lab.out(id, "run.log")
                  << "\ndockerd:\n" << lab.out(id, "dk/dockerd.log"));
  CHECK(rc == 0);
  REQUIRE(lab.out(id, "run.rc") == "0\n");
  CHECK(lab.out(id, "ib") == "rdma_cm\nuverbs0\n");
  CHECK(lab.out(id, "env") == "NCCL_IB_HCA=mine\nNCCL_SOCKET_IFNAME=" + lab.ifa + "\n");
  CHECK(lab.out(id, "addr").find("inet 10.42.0.1/24") != std::string::npos);  // the pod's wg0
  CHECK(lab.on_host());
}

// Docker 20.10 (Debian 12's docker.io, which reads no CDI) with
// fabric-agent-runtime as "default-runtime" in daemon.json: a plain
// `docker run` gets the fabric. dockerd runs on this host, in the test's
// network namespace and a private mount namespace (the cgroup v2 mount
// removed, as for crun), with its own data root, exec root and socket, vfs
// storage and no iptables/bridge; the image is the busybox tree imported
// with `docker import` (nothing is pulled). Its runtime underneath is runc.
TEST_CASE("nested container: docker with default-runtime fabric-agent-runtime gives the fabric to a plain docker run", "[netns]") {
  REQUIRE(run("dockerd --version 2>&1").rc == 0);  // scripts/deps.sh installs docker.io
  Lab lab;
  const std::string dk = lab.w + "/dk";
  fs::create_directories(dk);
  fa_test::write_file(dk + "/daemon.json",
                      json{{"runtimes", {{"fabric", {{"path", runtime_binary()}}}}}, {"default-runtime", "fabric"}}.dump());
  const std::string docker = "docker -H unix://" + dk + "/d.sock";
  std::string cmd = "FABRIC_AGENT_CDI_SPEC=" + lab.w + "/cdi/" + cdi_spec_filename() +
                    " FABRIC_AGENT_RUNTIME=runc exec unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; "
                    "exec dockerd --data-root " + dk + "/data --exec-root " + dk + "/x -H unix://" + dk + "/d.sock "
                    "--pidfile " + dk + "/d.pid --config-file " + dk + "/daemon.json --bridge none --iptables=false "
                    "--ip6tables=false --ip-masq=false --storage-driver vfs --exec-opt native.cgroupdriver=cgroupfs' >" +
                    dk + "/dockerd.log 2>&1 </dev/null";
  pid_t d = ::fork();
  if (d == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    ::_exit(127);
  }
  struct Stop {
    pid_t pid;
    ~Stop() {
      ::kill(pid, SIGTERM);  // dockerd stops the containerd it started
      ::waitpid(pid, nullptr, 0);
    }
  } stop{d};
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = run(docker + " info >/dev/null 2>&1").rc == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO("dockerd:\n" << read_file(dk + "/dockerd.log"));
  REQUIRE(up);
  REQUIRE(run("tar -C " + lab.w + "/rootfs -c . | " + docker + " import - fa-busybox:" + lab.tag + " >/dev/null").rc == 0);

  std::string id = "nd1-" + lab.tag;
  fs::create_directories(lab.w + "/out-" + id);
  fa_test::write_file(lab.w + "/out-" + id + "/script.sh", probe_script(lab.ifa, false));
  std::string devs;
  for (int i = 0; i < 4; ++i) devs += " --device " + lab.dev + "/nvidia" + std::to_string(i) + ":/dev/nvidia" + std::to_string(i);
  int rc = run(docker + " run --rm --network none -e NCCL_IB_HCA=mine" + devs + " -v " + lab.w + "/out-" + id +
               ":/out fa-busybox:" + lab.tag + " sh /out/script.sh >" + lab.w + "/" + id + ".log 2>&1").rc;
  INFO("docker run:\n" << lab.log(id));
  CHECK(rc == 0);
  CHECK(lab.out(id, "ib") == "rdma_cm\nuverbs0\n");
  CHECK(lab.out(id, "env") == "NCCL_IB_HCA=mine\nNCCL_SOCKET_IFNAME=" + lab.ifa + "\n");
  CHECK(lab.out(id, "addr").find("inet 10.42.0.1/24") != std::string::npos);
  CHECK(lab.out(id, "ping.rc") == "0\n");
  CHECK(lab.on_host());  // poststop gave wg0 back

  // Half the GPUs: the spec's hook refuses, through runc, in docker's error.
  std::string half = "nd2-" + lab.tag;
  fs::create_directories(lab.w + "/out-" + half);
  CHECK(run(docker + " run --rm --network none --device " + lab.dev + "/nvidia0:/dev/nvidia0 -v " + lab.w + "/out-" +
            half + ":/out fa-busybox:" + lab.tag + " touch /out/started >" + lab.w + "/" + half + ".log 2>&1").rc != 0);
  INFO("docker run (half):\n" << lab.log(half));
  CHECK(lab.log(half).find("fabric-agent: refused: container holds 1 of 4 NVIDIA GPUs") != std::string::npos);
  CHECK_FALSE(fs::exists(lab.w + "/out-" + half + "/started"));
  CHECK(lab.registered() == 0);
}
