// SPDX-License-Identifier: Apache-2.0
// The group's SSH with real sshd and ssh (Debian's openssh-server and
// -client, with their stock configuration and PAM): two "hosts", each with
// its own daemon side (PodService on its own socket, its own mesh and login
// material), each running one whole-machine container under crun through our
// OCI hook. The containers' root is a Debian-like tree: the host's /usr bound
// read-only, a copy of the host's /etc (sshd_config with its Include of
// sshd_config.d, pam.d, passwd), as an image with openssh-server has.
//
// Isolation as in hook_crun_test.cpp: the test process enters a network
// namespace of its own first; both wireguard-go interfaces are born there and
// talk over its loopback; crun runs in a private mount namespace.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include "../overlay/netns_helpers.hpp"
#include "common/fs.hpp"
#include "overlay/overlay.hpp"
#include "pods/login.hpp"
#include "pods/pods.hpp"

using namespace fa::pods;
using fa_test::read_file;
using fa_test::run;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool wait_for_file(const std::string& p, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (fs::exists(p)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// sshd's log exists as soon as the shell redirects to it; it listens later.
bool sshd_listening(const std::string& log, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (read_file(log).find("Server listening on") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// One provider machine: its mesh interface, its daemon side, its container.
struct Node {
  int index = 0;
  std::string w, ifname, address;
  int port = 0;
  json mesh, inspect, cdi;
  std::optional<json> login;
  std::unique_ptr<WgMover> mover;
  std::unique_ptr<PodService> svc;
  std::unique_ptr<PodSocketServer> srv;
  std::string id, pub;
  pid_t crun = -1;

  std::string root() const { return w + "/rootfs"; }
  std::string out(const std::string& f) const { return read_file(w + "/out/" + f); }
};

struct SshLab {
  std::string tag = fa_test::tag();
  std::string w = "/tmp/fa-pods-ssh-" + tag;
  std::string keys = w + "/keys";
  Node n[2];

  SshLab() {
    REQUIRE(::unshare(CLONE_NEWNET) == 0);
    REQUIRE(run("ip link set lo up").rc == 0);
    fs::remove_all(w);
    fs::create_directories(keys);
    // The control plane's part: one CA and one user key pair per rental, a
    // host key and certificate per node; a second CA stands for another rental.
    for (auto k : {"ca", "ca2", "user", "host0", "host1"})
      REQUIRE(run("ssh-keygen -q -t ed25519 -N '' -C " + std::string(k) + " -f " + keys + "/" + k).rc == 0);
    for (int i = 0; i < 2; ++i) {
      std::string ip = "10.42.0." + std::to_string(i + 1);
      REQUIRE(run("ssh-keygen -q -s " + keys + "/ca -I node" + std::to_string(i) + " -h -n " + ip + " " + keys + "/host" +
                  std::to_string(i) + ".pub").rc == 0);
    }
    // Each host key certified by the other rental's CA too (otherN-cert.pub).
    for (int i = 0; i < 2; ++i) {
      std::string k = std::to_string(i);
      REQUIRE(run("cp " + keys + "/host" + k + ".pub " + keys + "/other" + k + ".pub && ssh-keygen -q -s " + keys +
                  "/ca2 -I other -h -n 10.42.0." + std::to_string(i + 1) + " " + keys + "/other" + k + ".pub").rc == 0);
    }

    std::string pub[2];
    for (int i = 0; i < 2; ++i) {
      Node& x = n[i];
      x.index = i;
      x.w = w + "/node" + std::to_string(i);
      x.ifname = "fs" + std::to_string(i) + tag;
      x.address = "10.42.0." + std::to_string(i + 1);
      x.port = 20000 + (::getpid() + 7 * i) % 20000 + 20000 * i;
      fs::create_directories(x.w + "/out");
      auto k = fa::overlay::generate_private_key();
      REQUIRE(k.ok());
      REQUIRE(fa::write_file_atomic(x.w + "/wg.key", fa::overlay::key_to_base64(*k) + "\n", 0600).ok());
      pub[i] = x.pub = fa::overlay::key_to_base64(*fa::overlay::public_key_of(*k));
    }
    for (int i = 0; i < 2; ++i) {
      Node& x = n[i];
      const Node& o = n[1 - i];
      x.mesh = {{"cluster_id", "c-" + tag},
                {"interface", x.ifname},
                {"address", x.address + "/24"},
                {"listen_port", x.port},
                {"private_key_file", x.w + "/wg.key"},
                {"peers", {{{"public_key", pub[1 - i]}, {"endpoint", "127.0.0.1:" + std::to_string(o.port)},
                            {"allowed_ips", {o.address + "/32"}}, {"persistent_keepalive", 1}}}}};
      auto p = fa::overlay::parse_desired(x.mesh);
      REQUIRE(p.ok());
      fa::overlay::ApplyOptions ao;
      ao.backend = fa::overlay::Backend::Userspace;
      auto r = fa::overlay::apply(*p.value, ao);
      INFO((r.ok() ? std::string() : r.error().message));
      REQUIRE(r.ok());
      // One ACTIVE fabric port (a state file under the node's sysfs root):
      // the daemon gives the fabric only to a host whose port is up.
      fs::create_directories(x.w + "/sys/class/infiniband/mlx5_0/ports/1");
      fa_test::write_file(x.w + "/sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
      x.inspect = {{"hcas", {{{"name", "mlx5_0"}, {"ports", {{{"port", 1}, {"state", "ACTIVE"}}}}}}},
                   {"fabric", {{"kind", "infiniband"}, {"ports", {"mlx5_0:1"}}}},
                   {"nccl_env", {{"NCCL_IB_HCA", "=mlx5_0:" + std::to_string(i + 1)}, {"NCCL_IB_GID_INDEX", "3"},
                                 {"NCCL_SOCKET_IFNAME", x.ifname}}}};
      set_login(i, "ca", "host" + std::to_string(i));
      start_daemon(x);
      make_rootfs(x);
    }
  }

  ~SshLab() {
    for (auto& x : n) stop(x);
    for (auto& x : n) {
      x.srv.reset();
      x.svc.reset();
      x.mover.reset();
      (void)fa::overlay::down(x.ifname);
    }
    fs::remove_all(w);
  }

  // What PUT /v1/login keeps, as the daemon hands it to the hook.
  void set_login(int i, const std::string& ca, const std::string& cert, std::string cluster = "") {
    auto text = [&](const std::string& f) { return *fa::read_text_file(keys + "/" + f); };
    json doc = {{"cluster_id", cluster.empty() ? "c-" + tag : cluster},         {"ca_public_key", text(ca + ".pub")},
                {"host_key", text("host" + std::to_string(i))}, {"host_certificate", text(cert + "-cert.pub")},
                {"user_public_key", text("user.pub")}, {"user_key", text("user")}};
    auto a = fa::overlay::IpPrefix::parse(n[i].address + "/24");
    REQUIRE(a.ok());
    auto l = parse_login(doc, *a, std::time(nullptr));
    INFO((l.ok() ? std::string() : l.errors.front().str()));
    REQUIRE(l.ok());
    json j = to_json(*l.value);
    j["hosts"] = host_pattern(*a);
    n[i].login = j;
  }

  void start_daemon(Node& x) {
    auto reg = PodRegistry::load(x.w + "/pods.json");
    REQUIRE(reg.ok());
    x.mover = make_overlay_mover();
    ServiceDeps d;
    d.inspect = [&x] { return x.inspect; };
    auto desired = fa::overlay::parse_desired(x.mesh).value;
    d.desired_mesh = [desired] { return desired; };
    d.mover = x.mover.get();
    d.sysfs_root = x.w + "/sys";
    d.login = [&x] { return x.login; };
    x.svc = std::make_unique<PodService>(std::move(*reg), d);
    auto s = PodSocketServer::start(x.w + "/pods.sock", [&x](const json& req) { return x.svc->handle(req); });
    REQUIRE(s.ok());
    x.srv = std::move(*s);
    CdiOptions co;
    co.hook_path = fs::absolute(std::getenv("FA_BINARY")).string();
    co.socket = x.w + "/pods.sock";
    auto spec = build_cdi_spec(x.inspect, {}, co);
    REQUIRE(spec.ok());
    x.cdi = spec->doc;
  }

  // A Debian-like image with openssh-server: the host's /usr (bound
  // read-only at run), a copy of its /etc, and files of the image's own that
  // the hook must keep.
  void make_rootfs(Node& x) {
    const std::string r = x.root();
    for (auto d : {"usr", "proc", "dev", "sys", "tmp", "run/sshd", "var", "out"}) fs::create_directories(r + "/" + d);
    for (auto [l, t] : {std::pair{"bin", "usr/bin"}, {"sbin", "usr/sbin"}, {"lib", "usr/lib"}, {"lib64", "usr/lib64"}})
      fs::create_symlink(t, r + "/" + l);
    fs::create_symlink("../run", r + "/var/run");
    REQUIRE(run("cp -a /etc " + r + "/etc").rc == 0);
    fs::remove_all(r + "/etc/ssh/sshd_config.d");
    fs::remove_all(r + "/etc/ssh/ssh_config.d");
    fs::create_directories(r + "/etc/ssh/sshd_config.d");
    fs::create_directories(r + "/etc/ssh/ssh_config.d");
    fs::remove(r + "/etc/ssh/ssh_known_hosts");
    fa_test::write_file(r + "/etc/environment", "LANG=C.UTF-8\nNCCL_IB_HCA=stale-from-the-image\n");
    fs::create_directories(r + "/root/.ssh");
    fs::permissions(r + "/root", fs::perms::owner_all);
    fs::permissions(r + "/root/.ssh", fs::perms::owner_all);
    fa_test::write_file(r + "/root/.ssh/authorized_keys", *fa::read_text_file(keys + "/ca2.pub") + " image-key\n");
    fs::permissions(r + "/root/.ssh/authorized_keys", fs::perms::owner_read | fs::perms::owner_write);
    fa_test::write_file(r + "/etc/hostname", "node" + std::to_string(x.index) + "\n");
  }

  // A long-running container whose process is sshd (node 1) or a sleeper
  // (node 0, from which we run ssh with crun exec).
  void start(Node& x, bool sshd) {
    x.id = "ssh" + std::to_string(x.index) + "-" + tag + "-" + std::to_string(::time(nullptr) % 100000);
    std::string b = x.w + "/bundle";
    fs::remove_all(b);
    fs::create_directories(b);
    fs::remove(x.w + "/out/ready");
    fs::remove(x.w + "/out/stop");
    REQUIRE(run("cd " + b + " && crun spec").rc == 0);
    json c = json::parse(read_file(b + "/config.json"));
    c["process"]["terminal"] = false;
    std::string hold = "touch /out/ready; while [ ! -e /out/stop ]; do sleep 0.2; done";
    c["process"]["args"] = {"sh", "-c", sshd ? "/usr/sbin/sshd -D -e 2>/out/sshd.log & " + hold : hold};
    // Podman's default capabilities (containers.conf): what a stock `podman run` gives.
    json caps = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_NET_BIND_SERVICE",
                 "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT"};
    for (auto set : {"bounding", "effective", "permitted"}) c["process"]["capabilities"][set] = caps;
    c["root"] = {{"path", x.root()}, {"readonly", false}};
    c["hostname"] = "node" + std::to_string(x.index);
    c["mounts"].push_back({{"destination", "/usr"}, {"type", "bind"}, {"source", "/usr"}, {"options", {"rbind", "ro"}}});
    c["mounts"].push_back({{"destination", "/out"}, {"type", "bind"}, {"source", x.w + "/out"}, {"options", {"rbind", "rw"}}});
    c["linux"]["devices"] = json::array();
    for (const auto& e : x.cdi["containerEdits"]["env"]) c["process"]["env"].push_back(e);
    for (const auto& h : x.cdi["containerEdits"]["hooks"])
      c["hooks"][h["hookName"].get<std::string>()].push_back({{"path", h["path"]}, {"args", h["args"]}, {"timeout", h["timeout"]}});
    c["annotations"]["run.oci.hooks.stderr"] = x.w + "/hook.log";
    fa_test::write_file(b + "/config.json", c.dump(1));
    x.crun = ::fork();
    if (x.crun == 0) {
      std::string cmd = "unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec crun run --bundle " + b + " " +
                        x.id + "' >" + x.w + "/crun.log 2>&1 </dev/null";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      ::_exit(127);
    }
    bool ready = wait_for_file(x.w + "/out/ready", 60);
    INFO("crun: " << read_file(x.w + "/crun.log") << "\nhook: " << read_file(x.w + "/hook.log"));
    REQUIRE(ready);
  }

  void stop(Node& x) {
    if (x.crun <= 0) return;
    fa_test::write_file(x.w + "/out/stop", "");
    int st = 0;
    for (int i = 0; i < 100 && ::waitpid(x.crun, &st, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (::waitpid(x.crun, &st, WNOHANG) == 0) {
      ::kill(x.crun, SIGKILL);
      ::waitpid(x.crun, &st, 0);
    }
    run("crun delete -f " + x.id + " >/dev/null 2>&1");
    x.crun = -1;
  }

  // A command inside node `i`'s container (crun exec: its namespaces, its root).
  fa_test::Out exec(Node& x, const std::string& cmd) {
    fa_test::write_file(x.w + "/out/cmd.sh", cmd + "\n");
    return run("unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec crun exec " + x.id +
               " sh /out/cmd.sh' 2>&1");
  }

  fa_test::Out ssh_from_0(const std::string& what) {
    return exec(n[0], "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=20 10.42.0.2 " + what);
  }
};

}  // namespace

TEST_CASE("ssh: from node 0's container, ssh 10.42.0.2 lands in node 1's container as root with no prompt and gets the NCCL variables",
          "[netns]") {
  SshLab lab;
  lab.start(lab.n[1], true);
  lab.start(lab.n[0], false);
  REQUIRE(sshd_listening(lab.n[1].w + "/out/sshd.log", 20));

  auto host = lab.ssh_from_0("hostname");
  INFO("ssh: " << host.out << "\nsshd:\n" << lab.n[1].out("sshd.log"));
  CHECK(host.rc == 0);
  CHECK(trim(host.out) == "node1");
  auto who = lab.ssh_from_0("id -u");
  CHECK(trim(who.out) == "0");
  // The session's environment: pam_env read /etc/environment.
  auto env = lab.ssh_from_0("env");
  INFO("env: " << env.out);
  CHECK(env.out.find("NCCL_IB_HCA==mlx5_0:2\n") != std::string::npos);
  CHECK(env.out.find("NCCL_IB_GID_INDEX=3\n") != std::string::npos);
  CHECK(env.out.find("NCCL_SOCKET_IFNAME=" + lab.n[1].ifname + "\n") != std::string::npos);
  CHECK(env.out.find("stale-from-the-image") == std::string::npos);
  // A login shell without PAM reads /etc/profile.d.
  auto profile = lab.exec(lab.n[0], "env -i sh -lc 'echo $NCCL_IB_HCA'");
  CHECK(trim(profile.out) == "=mlx5_0:1");  // node 0's own

  // What the image had is kept beside ours.
  const std::string r1 = lab.n[1].root();
  std::string ak = read_file(r1 + "/root/.ssh/authorized_keys");
  CHECK(ak.find(" image-key\n") != std::string::npos);
  CHECK(ak.find(" fabric-agent:c-" + lab.tag + "\n") != std::string::npos);
  CHECK(read_file(r1 + "/etc/environment").rfind("LANG=C.UTF-8\n", 0) == 0);
  CHECK(read_file(r1 + "/etc/ssh/ssh_known_hosts").rfind("@cert-authority 10.42.0.* ssh-ed25519 ", 0) == 0);
  CHECK((fs::status(r1 + "/etc/ssh/fabric-agent/ssh_host_ed25519_key").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  CHECK((fs::status(r1 + "/etc/ssh/fabric-agent/id_ed25519").permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));

  // Node 1 started again: our lines are replaced, not repeated.
  lab.stop(lab.n[1]);
  fs::remove(lab.n[1].w + "/out/sshd.log");
  lab.start(lab.n[1], true);
  REQUIRE(sshd_listening(lab.n[1].w + "/out/sshd.log", 20));
  ak = read_file(r1 + "/root/.ssh/authorized_keys");
  CHECK(std::count(ak.begin(), ak.end(), '\n') == 2);
  CHECK(lab.ssh_from_0("hostname").rc == 0);
}

TEST_CASE("wg show inside the pod with wireguard-go: peers and handshakes, no private key, no changes", "[netns]") {
  SshLab lab;
  lab.start(lab.n[1], false);
  lab.start(lab.n[0], false);
  Node& a = lab.n[0];
  // A handshake to show: the peers keep the session alive every second.
  for (int i = 0; i < 50 && lab.exec(a, "wg show " + a.ifname + " latest-handshakes").out.find("\t0\n") != std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto show = lab.exec(a, "wg show " + a.ifname);
  INFO("wg show: " << show.out);
  CHECK(show.rc == 0);
  CHECK(show.out.find("interface: " + a.ifname) != std::string::npos);
  CHECK(show.out.find("listening port: " + std::to_string(a.port)) != std::string::npos);
  CHECK(show.out.find("peer: " + lab.n[1].pub) != std::string::npos);
  CHECK(show.out.find("allowed ips: 10.42.0.2/32") != std::string::npos);
  CHECK(show.out.find("latest handshake: ") != std::string::npos);
  auto conf = lab.exec(a, "wg showconf " + a.ifname);
  INFO("wg showconf: " << conf.out);
  CHECK(conf.out.find("[Peer]") != std::string::npos);
  CHECK(conf.out.find("PrivateKey") == std::string::npos);
  const std::string key_file = *fa::read_text_file(a.w + "/wg.key");
  CHECK(conf.out.find(key_file) == std::string::npos);
  // Changes are refused: the daemon's mesh is the control plane's.
  auto set = lab.exec(a, "wg set " + a.ifname + " listen-port 1");
  INFO("wg set: " << set.out);
  CHECK(set.rc != 0);
  CHECK(set.out.find("Operation not permitted") != std::string::npos);
  // Gone with the pod.
  lab.stop(a);
  CHECK_FALSE(fs::exists(a.root() + "/run/wireguard/" + a.ifname + ".sock"));
}

TEST_CASE("ssh: a host certificate from another rental's CA is refused by ssh", "[netns]") {
  SshLab lab;
  // Node 0's root served another rental before (its CA, ca2): starting it in
  // this rental replaces that trust, it does not add to it.
  lab.set_login(0, "ca2", "other0", "c-other");
  lab.start(lab.n[0], false);
  lab.stop(lab.n[0]);
  CHECK(read_file(lab.n[0].root() + "/etc/ssh/ssh_known_hosts").find("fabric-agent:c-other") != std::string::npos);
  lab.set_login(0, "ca", "host0");
  // Node 1 carries another rental's material: its host certificate (for
  // 10.42.0.2) is signed by that rental's CA, which node 0 does not trust.
  lab.set_login(1, "ca2", "other1");
  lab.start(lab.n[1], true);
  lab.start(lab.n[0], false);
  REQUIRE(sshd_listening(lab.n[1].w + "/out/sshd.log", 20));
  CHECK(read_file(lab.n[0].root() + "/etc/ssh/ssh_known_hosts").find("fabric-agent:c-other") == std::string::npos);
  auto r = lab.ssh_from_0("hostname");
  INFO("ssh: " << r.out << "\nsshd:\n" << lab.n[1].out("sshd.log"));
  CHECK(r.rc != 0);
  CHECK(r.out.find("node1") == std::string::npos);
  CHECK(r.out.find("Host key verification failed") != std::string::npos);

  // The same node with its rental's material: accepted (the refusal above
  // was the CA, nothing else).
  lab.stop(lab.n[1]);
  lab.set_login(1, "ca", "host1");
  fs::remove(lab.n[1].w + "/out/sshd.log");
  lab.start(lab.n[1], true);
  REQUIRE(sshd_listening(lab.n[1].w + "/out/sshd.log", 20));
  auto ok = lab.ssh_from_0("hostname");
  INFO("ssh: " << ok.out);
  CHECK(trim(ok.out) == "node1");
}
