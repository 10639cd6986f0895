// SPDX-License-Identifier: Apache-2.0
// PodService request handling on data (real registry in a temp dir, real
// processes for liveness; the wg0 side effects recorded by a small WgMover),
// the unix-socket transport, and the hook's answers to bad input.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "common/fs.hpp"
#include "common/log.hpp"
#include "pods/pods.hpp"
#include "pods/runtime.hpp"

using namespace fa::pods;
using nlohmann::json;

namespace {

struct RecordingMover : WgMover {
  std::vector<std::string> calls;
  bool fail_take = false;
  std::chrono::milliseconds take_time{0};  // how long moving the interface takes
  fa::Status take(const PodRecord& p, const fa::overlay::DesiredMesh&) override {
    std::this_thread::sleep_for(take_time);
    calls.push_back("take " + p.id);
    if (fail_take) return fa::Error{"netlink said no", EPERM};
    return {};
  }
  fa::Status give_back(const PodRecord& p, const std::optional<fa::overlay::DesiredMesh>&) override {
    calls.push_back("give_back " + p.id);
    return {};
  }
  std::optional<std::string> netns_of(const std::string& id) override { return "/ns/of/" + id; }
  fa::Status adopt(const PodRecord& p) override {
    calls.push_back("adopt " + p.id);
    if (fail_adopt) return fa::Error{"other namespace", ESRCH};
    return {};
  }
  bool fail_adopt = false;
};

json active_inspect() {
  return {{"hcas", {{{"name", "mlx5_0"}, {"ports", {{{"port", 1}, {"state", "ACTIVE"}}}}}}},
          {"fabric", {{"kind", "infiniband"}, {"ports", {"mlx5_0:1"}}}}};
}

std::optional<fa::overlay::DesiredMesh> mesh() {
  return fa::overlay::parse_desired(
             {{"cluster_id", "c-1"}, {"interface", "wg0"}, {"address", "10.42.0.1/24"}, {"peers", json::array()}})
      .value;
}

struct Fixture {
  std::string dir;
  RecordingMover mover;
  json inspect = active_inspect();
  std::optional<fa::overlay::DesiredMesh> desired = mesh();
  int changes = 0;
  std::unique_ptr<PodService> svc;
  Fixture() {
    char t[] = "/tmp/fa-pods-svc-XXXXXX";
    REQUIRE(::mkdtemp(t) != nullptr);
    dir = t;
    set_port_state("4: ACTIVE");
    ServiceDeps d;
    d.inspect = [this] { return inspect; };
    d.desired_mesh = [this] { return desired; };
    d.mover = &mover;
    d.sysfs_root = dir + "/sys";
    d.changed = [this] { ++changes; };
    svc = std::make_unique<PodService>(*PodRegistry::load(dir + "/pods.json"), d);
  }
  ~Fixture() { std::filesystem::remove_all(dir); }
  json persisted() { return json::parse(fa::read_text_file(dir + "/pods.json").value_or("{\"pods\":[]}")); }
  // mlx5_0:1's state file, in the kernel's format: what the service reads
  // at each registration, whatever the inspect snapshot says.
  void set_port_state(const std::string& text) {
    std::string ports = dir + "/sys/class/infiniband/mlx5_0/ports/1";
    std::filesystem::create_directories(ports);
    std::ofstream(ports + "/state") << text << "\n";
  }
};

// A live process to stand for a container; killed and reaped on scope exit.
struct Child {
  pid_t pid;
  Child() {
    pid = ::fork();
    if (pid == 0) {
      ::pause();
      ::_exit(0);
    }
  }
  void kill() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  ~Child() { kill(); }
};

json reg(const std::string& id, pid_t pid) { return {{"op", "register"}, {"id", id}, {"pid", pid}, {"bundle", "/b/" + id}}; }

}  // namespace

TEST_CASE("service: register moves wg0 and persists, a second pod is refused and leaves nothing") {
  Fixture f;
  Child a, b;
  json r = f.svc->handle(reg("a", a.pid));
  REQUIRE(r["ok"] == true);
  CHECK(r["pod"]["interface"] == "wg0");
  CHECK(r["pod"]["address"] == "10.42.0.1/24");
  CHECK(f.mover.calls == std::vector<std::string>{"take a"});
  CHECK(f.persisted()["pods"].size() == 1);
  CHECK(f.changes == 1);
  CHECK(f.svc->interface_netns() == "/ns/of/a");

  // Repeat of the same request: same answer, nothing moves twice.
  CHECK(f.svc->handle(reg("a", a.pid))["ok"] == true);
  CHECK(f.mover.calls.size() == 1);

  json r2 = f.svc->handle(reg("b", b.pid));
  CHECK(r2["ok"] == false);
  CHECK(r2["error"]["code"] == "refused");
  CHECK(r2["error"]["message"].get<std::string>().find("container a (pid " + std::to_string(a.pid) + ") already holds") == 0);
  CHECK(f.mover.calls.size() == 1);
  CHECK(f.persisted()["pods"].size() == 1);

  json l = f.svc->list();
  REQUIRE(l["pods"].size() == 1);
  CHECK(l["pods"][0]["alive"] == true);

  json u = f.svc->handle({{"op", "unregister"}, {"id", "a"}});
  CHECK(u == json{{"ok", true}, {"removed", true}});
  CHECK(f.mover.calls.back() == "give_back a");
  CHECK(f.persisted()["pods"].empty());
  CHECK(f.svc->handle({{"op", "unregister"}, {"id", "a"}}) == json{{"ok", true}, {"removed", false}});

  // Now b may have it.
  CHECK(f.svc->handle(reg("b", b.pid))["ok"] == true);
}

TEST_CASE("service: listing the pods never waits for a registration in progress") {
  // GET /v1/pods runs on the daemon's I/O thread: a registration that holds
  // the service while it moves the interface must not hold the reader too.
  Fixture f;
  Child a;
  f.mover.take_time = std::chrono::milliseconds(1500);
  auto registering = std::async(std::launch::async, [&] { return f.svc->handle(reg("a", a.pid)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // inside take()
  const auto t0 = std::chrono::steady_clock::now();
  json during = f.svc->list();
  const auto waited = std::chrono::steady_clock::now() - t0;
  CHECK(waited < std::chrono::milliseconds(500));
  CHECK(during["pods"].empty());  // not registered yet
  REQUIRE(registering.get()["ok"] == true);
  CHECK(f.svc->list()["pods"].size() == 1);
}

TEST_CASE("service: a dead pod without poststop is reaped and no longer blocks") {
  Fixture f;
  Child a, b;
  REQUIRE(f.svc->handle(reg("a", a.pid))["ok"] == true);
  a.kill();
  CHECK(f.svc->list()["pods"][0]["alive"] == false);
  json r = f.svc->handle(reg("b", b.pid));
  CHECK(r["ok"] == true);
  CHECK(f.mover.calls == std::vector<std::string>{"take a", "give_back a", "take b"});
  CHECK(f.persisted()["pods"].size() == 1);
  CHECK(f.persisted()["pods"][0]["id"] == "b");
}

TEST_CASE("service: refusals and failures leave no registration") {
  Fixture f;
  Child a;
  SECTION("no ACTIVE fabric port") {
    f.set_port_state("1: DOWN");
    json r = f.svc->handle(reg("a", a.pid));
    CHECK(r["error"]["code"] == "refused");
    CHECK(r["error"]["message"] == "no fabric port is ACTIVE (mlx5_0:1 is DOWN)");
  }
  SECTION("fabric port state unreadable") {
    std::filesystem::remove(f.dir + "/sys/class/infiniband/mlx5_0/ports/1/state");
    json r = f.svc->handle(reg("a", a.pid));
    CHECK(r["error"]["code"] == "refused");
    CHECK(r["error"]["message"].get<std::string>().find("no fabric port is ACTIVE (mlx5_0:1 state unreadable: ") == 0);
  }
  SECTION("no mesh") {
    f.desired.reset();
    CHECK(f.svc->handle(reg("a", a.pid))["error"]["message"].get<std::string>().find("no overlay mesh") == 0);
  }
  SECTION("the move fails") {
    f.mover.fail_take = true;
    json r = f.svc->handle(reg("a", a.pid));
    CHECK(r["error"]["code"] == "failed");
    CHECK(r["error"]["message"] == "wg0 could not be moved into the container: netlink said no");
  }
  SECTION("pid gone") {
    pid_t gone = a.pid;
    a.kill();
    json r = f.svc->handle(reg("a", gone));
    CHECK(r["error"]["code"] == "bad_request");
    CHECK(r["error"]["message"].get<std::string>().find("is gone") != std::string::npos);
  }
  SECTION("bad requests") {
    CHECK(f.svc->handle(json::array())["error"]["code"] == "bad_request");
    CHECK(f.svc->handle({{"op", "dance"}})["error"]["message"] ==
          "request: op `dance' is unknown (accepted: register, unregister, list)");
    CHECK(f.svc->handle({{"op", "register"}, {"id", "x"}, {"pid", -1}})["error"]["message"] ==
          "register: pid `-1': expected a process id (integer > 0)");
    CHECK(f.svc->handle({{"op", "register"}, {"pid", 5}})["error"]["message"] ==
          "register: `id' is missing or not a non-empty string");
  }
  CHECK(f.persisted()["pods"].empty());
  CHECK(f.changes == 0);
}

TEST_CASE("service: a fabric that discovery no longer takes refuses, naming its last ports and their state now") {
  // A RoCE port whose netdev goes down: the rtnetlink event runs a discovery
  // pass, which takes the port out of the fabric (kind none, no ports).
  Fixture f;
  Child a;
  f.svc->discovered(f.inspect);
  f.set_port_state("1: DOWN");
  f.inspect["fabric"] = {{"kind", "none"}, {"ports", json::array()}};
  f.svc->discovered(f.inspect);  // a pass without a fabric keeps the last one's ports
  json r = f.svc->handle(reg("a", a.pid));
  CHECK(r["error"]["code"] == "refused");
  CHECK(r["error"]["message"] == "no fabric port is ACTIVE (mlx5_0:1 is DOWN)");
  // The port is ACTIVE again but discovery has not taken it back yet:
  // still refused, as discovery decides what the fabric is.
  f.set_port_state("4: ACTIVE");
  r = f.svc->handle(reg("a", a.pid));
  CHECK(r["error"]["code"] == "refused");
  CHECK(r["error"]["message"] ==
        "no fabric port is ACTIVE: discovery takes none of this host's ports now (the last fabric's mlx5_0:1 is "
        "ACTIVE; see `fabric-agent inspect`)");
  CHECK(f.mover.calls.empty());
  // The next pass takes it back.
  f.inspect = active_inspect();
  f.svc->discovered(f.inspect);
  CHECK(f.svc->handle(reg("a", a.pid))["ok"] == true);
}

TEST_CASE("service: the port state is read at registration, not taken from the discovery snapshot") {
  Fixture f;
  Child a, b;
  REQUIRE(f.svc->handle(reg("a", a.pid))["ok"] == true);
  REQUIRE(f.svc->handle({{"op", "unregister"}, {"id", "a"}})["ok"] == true);
  // The port goes down; no discovery pass runs (an InfiniBand port raises no
  // rtnetlink event), so the snapshot still says ACTIVE.
  f.set_port_state("1: DOWN");
  REQUIRE(f.inspect["hcas"][0]["ports"][0]["state"] == "ACTIVE");
  json r = f.svc->handle(reg("b", b.pid));
  CHECK(r["ok"] == false);
  CHECK(r["error"]["code"] == "refused");
  CHECK(r["error"]["message"] == "no fabric port is ACTIVE (mlx5_0:1 is DOWN)");
  CHECK(f.mover.calls == std::vector<std::string>{"take a", "give_back a"});  // nothing moved for b
  CHECK(f.persisted()["pods"].empty());
  // And back up: the next registration goes through, still without a pass.
  f.set_port_state("4: ACTIVE");
  CHECK(f.svc->handle(reg("b", b.pid))["ok"] == true);
}

TEST_CASE("service: reconcile after a restart adopts live pods and releases the others") {
  Fixture f;
  Child a;
  REQUIRE(f.svc->handle(reg("a", a.pid))["ok"] == true);
  json rec = f.persisted()["pods"][0];
  CHECK(rec["netns_inode"].get<uint64_t>() != 0);
  CHECK(rec["start_time"].get<uint64_t>() != 0);

  SECTION("alive: adopted, still registered, the interface stays in its namespace") {
    RecordingMover m2;
    ServiceDeps d;
    d.desired_mesh = [] { return mesh(); };
    d.mover = &m2;
    PodService svc2(*PodRegistry::load(f.dir + "/pods.json"), d);
    CHECK(svc2.reconcile() == 1);
    CHECK(m2.calls == std::vector<std::string>{"adopt a"});
    CHECK(svc2.list()["pods"].size() == 1);
    CHECK(svc2.interface_netns() == "/ns/of/a");
  }
  SECTION("gone while the daemon was down: unregistered, the interface recreated on the host") {
    a.kill();
    RecordingMover m2;
    ServiceDeps d;
    d.desired_mesh = [] { return mesh(); };
    d.mover = &m2;
    PodService svc2(*PodRegistry::load(f.dir + "/pods.json"), d);
    CHECK(svc2.reconcile() == 0);
    CHECK(m2.calls == std::vector<std::string>{"give_back a"});
    CHECK(svc2.list()["pods"].empty());
    CHECK(f.persisted()["pods"].empty());
  }
  SECTION("alive but not adoptable (another namespace): released") {
    RecordingMover m2;
    m2.fail_adopt = true;
    ServiceDeps d;
    d.desired_mesh = [] { return mesh(); };
    d.mover = &m2;
    PodService svc2(*PodRegistry::load(f.dir + "/pods.json"), d);
    CHECK(svc2.reconcile() == 0);
    CHECK(m2.calls == std::vector<std::string>{"adopt a", "give_back a"});
    CHECK(f.persisted()["pods"].empty());
  }
}

TEST_CASE("transport: request/reply over the unix socket, errors are messages") {
  char t[] = "/tmp/fa-pods-sock-XXXXXX";
  REQUIRE(::mkdtemp(t) != nullptr);
  std::string path = std::string(t) + "/pods.sock";
  int seen = 0;
  auto srv = PodSocketServer::start(path, [&](const json& req) {
    ++seen;
    return json{{"ok", true}, {"echo", req}};
  });
  REQUIRE(srv.ok());
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::others_all) ==
        std::filesystem::perms::none);
  auto r = pod_request(path, {{"op", "list"}});
  REQUIRE(r.ok());
  CHECK((*r)["echo"]["op"] == "list");
  // A second server on the same path must not steal it.
  auto second = PodSocketServer::start(path, [](const json&) { return json{}; });
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message.find("another agent is already serving") != std::string::npos);
  srv->reset();
  CHECK(seen == 1);
  auto down = pod_request(path, {{"op", "list"}});
  REQUIRE_FALSE(down.ok());
  CHECK(down.error().message.find("the fabric-agent daemon is not reachable at " + path) == 0);
  std::filesystem::remove_all(t);
}

TEST_CASE("hook: bad input gives one clear line and touches nothing") {
  char t[] = "/tmp/fa-pods-hook-XXXXXX";
  REQUIRE(::mkdtemp(t) != nullptr);
  std::string dir = t;
  HookOptions o;
  o.socket = dir + "/absent.sock";
  o.dev_root = dir;
  CHECK(run_oci_hook("prestart", "{}", o).exit_code == 2);
  auto bad = run_oci_hook("create-runtime", "{\"id\":", o);
  CHECK(bad.exit_code == 1);
  CHECK(bad.message == "fabric-agent oci-hook create-runtime: OCI state: not valid JSON");
  auto nobundle = run_oci_hook("create-runtime", json{{"id", "c"}, {"pid", ::getpid()}, {"bundle", dir + "/nope"}}.dump(), o);
  CHECK(nobundle.exit_code == 1);
  CHECK(nobundle.message.find("bundle: ") != std::string::npos);
  CHECK(nobundle.message.find(dir + "/nope/config.json") != std::string::npos);

  std::ofstream(dir + "/config.json") << "{\"process\": 3}";
  auto badcfg = run_oci_hook("create-runtime", json{{"id", "c"}, {"pid", ::getpid()}, {"bundle", dir}}.dump(), o);
  CHECK(badcfg.message == "fabric-agent oci-hook create-runtime: " + dir + "/config.json: process is not an object");

  Child gone;
  pid_t g = gone.pid;
  gone.kill();
  std::ofstream(dir + "/config.json") << "{}";
  auto nopid = run_oci_hook("create-runtime", json{{"id", "c"}, {"pid", g}, {"bundle", dir}}.dump(), o);
  CHECK(nopid.message == "fabric-agent oci-hook create-runtime: container pid " + std::to_string(g) + " is gone");

  Child live;
  auto nodaemon = run_oci_hook("create-runtime", json{{"id", "c"}, {"pid", live.pid}, {"bundle", dir}}.dump(), o);
  CHECK(nodaemon.exit_code == 1);
  INFO(nodaemon.message);
  CHECK(nodaemon.message.find("the fabric-agent daemon is not reachable at " + o.socket) != std::string::npos);
  auto stop = run_oci_hook("poststop", json{{"id", "c"}, {"bundle", dir}, {"status", "stopped"}}.dump(), o);
  CHECK(stop.exit_code == 1);
  CHECK(stop.message.find("poststop: the fabric-agent daemon is not reachable") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("runtime: what the daemon wires, hooks register over its socket, CDI spec follows discovery") {
  char t[] = "/tmp/fa-pods-rt-XXXXXX";
  REQUIRE(::mkdtemp(t) != nullptr);
  std::string dir = t;
  std::filesystem::create_directories(dir + "/sys/class/infiniband_verbs/uverbs0");
  std::ofstream(dir + "/sys/class/infiniband_verbs/uverbs0/ibdev") << "mlx5_0\n";
  // The fabric port's state, which a registration reads under sysfs_root.
  std::filesystem::create_directories(dir + "/sys/class/infiniband/mlx5_0/ports/1");
  std::ofstream(dir + "/sys/class/infiniband/mlx5_0/ports/1/state") << "4: ACTIVE\n";
  json inspect = active_inspect();
  int changes = 0;
  auto mover = std::make_unique<RecordingMover>();
  RecordingMover* rec = mover.get();
  int serialized = 0;
  PodsRuntimeOptions o;
  o.state_dir = dir;
  o.socket = dir + "/pods.sock";
  o.cdi_dir = dir + "/cdi";
  o.sysfs_root = dir + "/sys";
  o.hook_path = "/usr/bin/fabric-agent";
  o.inspect = [&] { return inspect; };
  o.desired_mesh = [] { return mesh(); };
  o.changed = [&] { ++changes; };
  o.serialize = [&](const std::function<json()>& fn) {
    ++serialized;
    return fn();
  };
  o.mover = std::move(mover);
  auto rt = PodsRuntime::start(std::move(o));
  REQUIRE(rt.ok());

  std::string spec_path = dir + "/cdi/fabric-agent.io-rdma.json";
  // This test's dev root is /dev without RDMA nodes: the spec warns about
  // them; those warnings are the baseline of every pass below.
  const std::vector<std::string> base = (*rt)->on_discovery(inspect);
  json spec = json::parse(*fa::read_text_file(spec_path));
  CHECK(spec["devices"][0]["containerEdits"]["deviceNodes"].size() == 2);
  // Same discovery: the file is left alone; removed: it comes back.
  auto mtime = std::filesystem::last_write_time(spec_path);
  CHECK((*rt)->on_discovery(inspect) == base);
  CHECK(std::filesystem::last_write_time(spec_path) == mtime);
  std::filesystem::remove(spec_path);
  CHECK((*rt)->on_discovery(inspect) == base);
  CHECK(std::filesystem::exists(spec_path));
  // The port goes down: the spec no longer hands out its uverbs node.
  json down = inspect;
  down["fabric"]["ports"] = json::array();
  // The pods log, captured: warnings are logged when they appear and when
  // they clear, not on every pass.
  std::ostringstream logged;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(logged);
  sink->set_pattern("%l %v");
  auto pods_log = fa::logger("pods");
  pods_log->sinks().push_back(sink);
  struct Unsink {
    std::shared_ptr<spdlog::logger> l;
    ~Unsink() { l->sinks().pop_back(); }
  } unsink{pods_log};
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    std::string text = logged.str();
    for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  };
  std::vector<std::string> w;
  for (int pass = 0; pass < 3; ++pass) w = (*rt)->on_discovery(down);
  CHECK(json::parse(*fa::read_text_file(spec_path))["devices"][0]["containerEdits"]["deviceNodes"].size() == 1);
  REQUIRE(!w.empty());
  CHECK(w[0].find("no fabric port is ACTIVE") == 0);
  CHECK(count("warning CDI spec: no fabric port is ACTIVE") == 1);
  // No fabric at all: the spec cannot be built; the reason is the warning.
  std::vector<std::string> nofab;
  for (int pass = 0; pass < 3; ++pass) nofab = (*rt)->on_discovery(json{{"hcas", json::array()}});
  REQUIRE(nofab.size() == 1);
  CHECK(nofab[0].find("CDI spec not written: inspect document: `fabric'") == 0);
  CHECK(count("warning CDI spec not written: inspect document") == 1);
  CHECK(count("info CDI spec: no fabric port is ACTIVE") == 1);  // cleared, once
  CHECK((*rt)->on_discovery(inspect) == base);
  CHECK((*rt)->on_discovery(inspect) == base);
  CHECK(count("info CDI spec not written: inspect document") == 1);
  // Appeared once each: the no-port warning, the not-written one, and the
  // baseline's warnings when they came back after "not written".
  CHECK(count("warning") == 2 + base.size());

  Child c;
  auto r = pod_request(dir + "/pods.sock", reg("c", c.pid));
  REQUIRE(r.ok());
  CHECK((*r)["ok"] == true);
  CHECK(serialized == 1);
  CHECK(changes == 1);
  CHECK(rec->calls == std::vector<std::string>{"take c"});
  CHECK((*rt)->list()["pods"][0]["id"] == "c");
  CHECK((*rt)->interface_netns() == "/ns/of/c");
  c.kill();
  CHECK((*rt)->on_discovery(inspect) == base);  // reaps the dead pod
  CHECK((*rt)->list()["pods"].empty());
  CHECK(rec->calls.back() == "give_back c");
  rt->reset();
  std::filesystem::remove_all(dir);
}

TEST_CASE(
    "runtime: a socket that cannot be served keeps the adopted pod, says so, and is served once it can be") {
  Fixture f;
  Child a;
  REQUIRE(f.svc->handle(reg("a", a.pid))["ok"] == true);  // registered before the "restart"
  // The socket's directory is a regular file: bind fails with ENOTDIR.
  const std::string blocker = f.dir + "/run";
  std::ofstream(blocker) << "not a directory\n";
  const std::string sock = blocker + "/pods.sock";
  auto mover = std::make_unique<RecordingMover>();
  RecordingMover* rec = mover.get();
  PodsRuntimeOptions o;
  o.state_dir = f.dir;
  o.socket = sock;
  o.cdi_dir = "";  // no spec: the socket's warning is the only one
  o.hook_path = "/usr/bin/fabric-agent";
  o.inspect = [] { return active_inspect(); };
  o.desired_mesh = [] { return mesh(); };
  o.mover = std::move(mover);
  auto rt = PodsRuntime::start(std::move(o));
  REQUIRE(rt.ok());
  // What reconcile adopted is held: the daemon's mesh goes into the pod.
  CHECK(rec->calls == std::vector<std::string>{"adopt a"});
  CHECK((*rt)->interface_netns() == "/ns/of/a");
  CHECK((*rt)->list()["pods"].size() == 1);
  auto w = (*rt)->on_discovery(active_inspect());
  REQUIRE(w.size() == 1);
  INFO(w[0]);
  CHECK(w[0].rfind("pod registrations not served on " + sock + ": bind " + sock + ": ", 0) == 0);
  CHECK(w[0].find("containers cannot register") != std::string::npos);
  CHECK_FALSE(pod_request(sock, {{"op", "list"}}).ok());
  CHECK((*rt)->on_discovery(active_inspect()) == w);  // still failing: the same warning
  // The path becomes usable: the next pass serves it and the warning goes.
  std::filesystem::remove(blocker);
  CHECK((*rt)->on_discovery(active_inspect()).empty());
  auto r = pod_request(sock, {{"op", "list"}});
  REQUIRE(r.ok());
  CHECK((*r)["pods"][0]["id"] == "a");
  CHECK((*rt)->on_discovery(active_inspect()).empty());
  rt->reset();
  CHECK_FALSE(std::filesystem::exists(sock));
}
