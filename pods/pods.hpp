// SPDX-License-Identifier: Apache-2.0
// Public face of pods/: handing the fabric (RDMA device nodes, the NCCL env and
// the overlay's wg0) to containers that hold the whole machine, and to nothing
// else. See docs/pods.md.
//
//   CDI spec        build_cdi_spec (pure, on the `inspect --json` document) + write_cdi_spec
//   OCI input       parse_oci_state / parse_oci_config (pure), scan_host_gpus (dev root seam)
//   decisions       check_whole_machine / check_active_port / check_exclusive (pure)
//   registry        PodRegistry: registrations persisted as JSON, liveness by pid + start time
//   service         PodService: the daemon side of the unix-socket protocol (register, unregister, list)
//   transport       PodSocketServer / pod_request: one JSON request, one JSON reply per connection
//   hook            run_oci_hook: what `fabric-agent oci-hook <stage>` does
//   nested          the pod's spec (CdiSpec::nested) and fabric-agent-runtime's mounts;
//                   the runtime itself is pods/nested.hpp + runtime_main.cpp
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/fd.hpp"
#include "common/result.hpp"
#include "overlay/overlay.hpp"

namespace fa::pods {

// The CDI kind: vendor domain "fabric-agent.io", class "rdma"; one device, "all".
// Users ask for it with `--device fabric-agent.io/rdma=all`.
inline constexpr const char* kCdiVendor = "fabric-agent.io";
inline constexpr const char* kCdiClass = "rdma";
inline constexpr const char* kCdiKind = "fabric-agent.io/rdma";
inline constexpr const char* kCdiDevice = "all";
inline constexpr const char* kDefaultCdiDir = "/var/run/cdi";
inline constexpr const char* kDefaultSocket = "/run/fabric-agent/pods.sock";
inline constexpr const char* kDefaultDevRoot = "/dev";

// ------------------------------------------------------------------ CDI ---

struct CdiOptions {
  std::string dev_root = kDefaultDevRoot;  // where the host's device nodes are (tests: a temp dir)
  std::string hook_path;                   // absolute path of the fabric-agent binary (hooks get no PATH)
  std::string socket = kDefaultSocket;     // passed to the hook: where the daemon listens
  int hook_timeout_seconds = 30;
  // Nested containers (docs/pods.md): the host paths of fabric-agent-runtime
  // and of the pod's spec, both bind-mounted into the pod so that an engine
  // inside it can use the runtime as its default. Either empty: no mounts.
  std::string runtime_path;
  std::string nested_spec;
  // When set, the hooks run hook_path through this dynamic loader, with the
  // loader's directory as the library path (a copy of the agent for the
  // host: copy_for_host).
  std::string hook_loader;
};

// Where the pod's spec is kept on the host: beside the daemon's socket (a
// directory CDI engines do not scan, so the kind is not defined twice).
std::string nested_spec_path(const std::string& socket);
// fabric-agent-runtime beside the hook binary, if it is there; else "".
std::string runtime_beside(const std::string& hook_path);

// The agent as the host can run it, for an agent in a container
// (pods.hook_dir, docs/kubernetes.md): its binary, fabric-agent-runtime and
// every shared object this process has loaded, the dynamic loader among
// them, copied into DIR (DIR/fabric-agent, DIR/lib/<the name the loader
// looked it up by>). Files already equal
// are left alone. DIR and DIR/lib must be this user's and writable by no
// one else; they are made 0755 when missing.
struct HostCopy {
  std::string binary;        // DIR/fabric-agent
  std::string loader;        // DIR/lib/<the loader's file name>
  std::string library_path;  // DIR/lib
  size_t objects = 0;        // shared objects copied, the loader included
};
Result<HostCopy> copy_for_host(const std::string& dir);
// What copy_for_host copies of the objects the loader reports (paths as it
// opened them): each absolute path once, in order; an error for two with
// one file name.
Result<std::vector<std::string>> objects_to_copy(const std::vector<std::string>& loaded);

// uverbsN of each HCA, from <sysfs>/class/infiniband_verbs/uverbsN/ibdev.
Result<std::map<std::string, std::string>> uverbs_by_hca(const std::string& sysfs_root);

struct CdiSpec {
  nlohmann::json doc;
  // The pod's view of the same fabric, for the engine inside it: the same
  // nodes by their path in the pod, the same env, no hooks (inside the pod
  // there is no daemon and the pod already holds the machine), no mounts.
  nlohmann::json nested;
  std::vector<std::string> warnings;  // e.g. a fabric HCA without a uverbs node
};

// Pure. The spec for kind fabric-agent.io/rdma, device "all": deviceNodes
// /dev/infiniband/rdma_cm + the uverbsN of the HCAs in inspect.fabric.ports
// (never umad/issm: those reach the subnet manager), env from inspect.nccl_env,
// createRuntime + poststop hooks running `<hook_path> oci-hook <stage>`.
// cdiVersion is the lowest that carries the fields used: 0.3.0, or 0.5.0 when
// a device node needs hostPath (dev_root other than /dev).
Result<CdiSpec> build_cdi_spec(const nlohmann::json& inspect, const std::map<std::string, std::string>& uverbs,
                               const CdiOptions& opt);

// "fabric-agent.io-rdma.json": one file per kind, as CDI tooling names them.
std::string cdi_spec_filename();
// Atomic (temp + fsync + rename) into dir, created 0755 if missing. Returns the path.
Result<std::string> write_cdi_spec(const std::string& dir, const nlohmann::json& spec);
// The same for the pod's spec at `path` (nested_spec_path).
Status write_nested_spec(const std::string& path, const nlohmann::json& nested);

// ------------------------------------------------------------ OCI input ---

struct OciState {
  std::string id;
  pid_t pid = 0;  // 0 when absent (poststop of a stopped container)
  std::string bundle;
  std::string status;
};
// The state JSON a runtime writes on a hook's stdin. Errors name the field.
Result<OciState> parse_oci_state(std::string_view text);

struct OciDevice {
  std::string path;
  std::string type;  // c, b, u, p
  std::optional<int64_t> major, minor;
};

struct OciConfig {
  std::vector<std::string> env;     // process.env
  std::vector<OciDevice> devices;   // linux.devices
};
// The bundle's config.json, only what the decisions read.
Result<OciConfig> parse_oci_config(std::string_view text);

struct HostDevice {
  std::string path;  // as the container names it: /dev/nvidia0
  char type = 'c';
  uint32_t major = 0, minor = 0;
};

struct HostGpus {
  std::vector<HostDevice> nvidia;  // /dev/nvidia[0-9]+ (not nvidiactl/-uvm: those are shared, not GPUs)
  bool amd_kfd = false;            // /dev/kfd present: ROCm host
  std::vector<HostDevice> amd;     // /dev/kfd + /dev/dri/renderD* when amd_kfd
  size_t count() const { return nvidia.size() + (amd_kfd ? amd.size() - 1 : 0); }
};
// Reads device nodes under dev_root (stat; sorted by path).
Result<HostGpus> scan_host_gpus(const std::string& dev_root);

// ---------------------------------------------------------------- memlock ---

// RLIMIT_MEMLOCK of `pid` -> unlimited (soft and hard), what the hook does to
// the container's process: ibv_reg_mr pins memory and CDI cannot say rlimits.
// Raising the hard limit needs CAP_SYS_RESOURCE; without it (EPERM) the soft
// limit goes up to the hard one and the returned string is the warning to
// show (empty when the limit is unlimited). Error: the pid is gone, or even
// the soft raise failed.
Result<std::string> raise_memlock(pid_t pid);

// ------------------------------------------------------------ decisions ---
// Each returns nullopt when the container may go on, else the one sentence
// the runtime shows the user.

// Holds every GPU: each host GPU node (matched by type+major+minor, else by
// path) is in linux.devices, or NVIDIA_VISIBLE_DEVICES=all for NVIDIA hosts.
// AMD hosts: /dev/kfd and every /dev/dri/renderD*. No GPU on the host: ok.
std::optional<std::string> check_whole_machine(const HostGpus& host, const OciConfig& cfg);
// The state of a fabric port as the kernel reports it at the moment of
// reading: discovery runs every few seconds and on rtnetlink events, but an
// InfiniBand port going down raises no such event.
struct PortState {
  std::string port;   // dev:port
  std::string state;  // ACTIVE, DOWN, INIT, ARMED, ... ("" when not read)
  std::string error;  // why it was not read
};
// inspect.fabric.ports: the ports discovery chose for the fabric.
std::vector<std::string> fabric_ports(const nlohmann::json& inspect);
// Thin: <sysfs_root>/class/infiniband/<dev>/ports/<n>/state ("4: ACTIVE")
// of each "dev:n", read now.
std::vector<PortState> read_port_states(const std::string& sysfs_root, const std::vector<std::string>& ports);
// At least one fabric port is ACTIVE now (`now`: read_port_states of
// fabric_ports(inspect)); the refusal names each port and its state. When
// discovery takes no port for the fabric any more (a RoCE port whose netdev
// went down, an InfiniBand port down at the next pass), the container is
// refused whatever `last` reads, and the refusal names those ports: `last`
// is read_port_states of the ports of the last fabric discovery chose.
std::optional<std::string> check_active_port(const nlohmann::json& inspect, const std::vector<PortState>& now,
                                             const std::vector<PortState>& last = {});

// ------------------------------------------------------------- registry ---

struct PodRecord {
  std::string id;
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/PID/stat field 22: tells a reused pid apart
  std::string bundle;
  uint64_t netns_inode = 0;  // the pod's network namespace
  std::string interface;     // "" when no overlay interface was moved in
  std::string address;       // overlay address given to the pod
  int64_t registered_unix = 0;
};
nlohmann::json to_json(const PodRecord& r);
Result<PodRecord> pod_from_json(const nlohmann::json& j);

// /proc/PID/stat start time; Error when the process is gone.
Result<uint64_t> process_start_time(pid_t pid, const std::string& proc_root = "/proc");
// Alive = the pid exists and still has the start time it was registered with.
bool pod_alive(const PodRecord& r, const std::string& proc_root = "/proc");

std::optional<std::string> check_exclusive(const std::vector<PodRecord>& live, const std::string& new_id);

// Registrations, persisted to one JSON file with write_file_atomic so a crash
// leaves the old or the new list. Not thread-safe: PodService serialises.
class PodRegistry {
 public:
  // Missing file: empty. Unreadable content: Error naming the file (the
  // daemon then refuses pods rather than forget who holds the fabric).
  static Result<PodRegistry> load(std::string path);
  const std::vector<PodRecord>& pods() const { return pods_; }
  const PodRecord* find(const std::string& id) const;
  Status add(PodRecord r);  // persists; on failure the list is unchanged
  Status remove(const std::string& id);
  const std::string& path() const { return path_; }

 private:
  Status save(const std::vector<PodRecord>& pods) const;
  std::string path_;
  std::vector<PodRecord> pods_;
};

// -------------------------------------------------------------- service ---

// The side effects on wg0, behind a seam so the request handling is tested
// on data; production: make_overlay_mover (overlay::apply + rtnetlink).
class WgMover {
 public:
  virtual ~WgMover() = default;
  // Moves the interface of `mesh` (the desired mesh) from the host namespace
  // into the pod's and configures its address there. On failure the
  // interface is back on the host (or was never moved).
  virtual Status take(const PodRecord& pod, const overlay::DesiredMesh& mesh) = 0;
  // The pod is gone or going: the interface comes back to the host, from the
  // pod's namespace if that still exists, else recreated from `mesh` (none:
  // the mesh was deleted meanwhile, nothing to restore).
  virtual Status give_back(const PodRecord& pod, const std::optional<overlay::DesiredMesh>& mesh) = 0;
  // Path of the namespace that holds the interface now, if a pod holds it
  // (for the daemon's mesh apply/show while a pod runs).
  virtual std::optional<std::string> netns_of(const std::string& pod_id) = 0;
  // After a daemon restart: the pod registered before is still alive, so its
  // namespace holds the interface. Take hold of that namespace again (netns_of
  // answers for it, the container's exit no longer destroys the interface);
  // nothing is created or moved. Error when the pid's namespace is not the
  // registered one (pid reused, process left it).
  virtual Status adopt(const PodRecord& pod) = 0;
};

struct ServiceDeps {
  std::function<nlohmann::json()> inspect;       // last `inspect --json` document
  std::function<std::optional<overlay::DesiredMesh>()> desired_mesh;  // the desired mesh, if any
  WgMover* mover = nullptr;
  std::string proc_root = "/proc";
  std::string sysfs_root = "/sys";  // fabric port states, read at each registration
  std::function<void()> changed;    // registrations changed (daemon: move the status generation)
  // The rental's SSH login material for the hook to install (pods/login.hpp),
  // if the control plane gave some; in the register reply as "login".
  std::function<std::optional<nlohmann::json>()> login;
};

// Protocol (one JSON object each way):
//   {"op":"register","id","pid","bundle"}  -> {"ok":true,"pod":{...}} | {"ok":false,"error":{code,message}}
//   {"op":"unregister","id"}               -> {"ok":true,"removed":bool}
//   {"op":"list"}                          -> {"ok":true,"pods":[...]}
// Error codes: bad_request, refused (the pod may not have the fabric), failed.
class PodService {
 public:
  PodService(PodRegistry reg, ServiceDeps deps)
      : reg_(std::move(reg)), deps_(std::move(deps)), listed_(reg_.pods()) {}
  nlohmann::json handle(const nlohmann::json& req);
  // GET /v1/pods body: {"pods":[ {..., "alive":bool} ]}
  nlohmann::json list();
  // Pods whose process is gone without a poststop: interface back, record removed.
  void reap();
  // At daemon start, before anything else touches the mesh interface: every
  // persisted registration whose pod is alive (same pid, start time and
  // network namespace) is adopted (the mover holds its namespace again);
  // the others are unregistered and the interface recreated on the host from
  // the persisted mesh. Returns how many pods were adopted.
  size_t reconcile();
  // Namespace path holding the overlay interface, when a live pod holds it.
  std::optional<std::string> interface_netns();
  // After each discovery pass: remembers the fabric's ports while it has
  // some, so that a refusal after they are gone from discovery still names them.
  void discovered(const nlohmann::json& inspect);

 private:
  nlohmann::json do_register(const nlohmann::json& req);
  nlohmann::json do_unregister(const nlohmann::json& req);
  void add_login(nlohmann::json& reply) const;
  void reap_locked();
  void changed_locked();  // after each change of reg_: publish it for list(), tell the daemon
  std::mutex mu_;
  PodRegistry reg_;
  ServiceDeps deps_;
  std::mutex listed_mu_;
  std::vector<PodRecord> listed_;  // what list() reads, under listed_mu_
  std::mutex fabric_mu_;           // not mu_: a discovery pass never waits for a registration
  std::vector<std::string> last_fabric_ports_;  // under fabric_mu_
};

// The real mover: overlay::apply with netns = the pod's, rtnetlink to move
// back. Holds the pod's namespace open while it holds the interface, so the
// container's exit does not destroy wg0 (its socket stays on the host); after
// a daemon restart (no handle) a destroyed wg0 is recreated from the mesh.
std::unique_ptr<WgMover> make_overlay_mover();

// ------------------------------------------------------------ transport ---

// Unix stream socket, mode 0600, peers must be root (SO_PEERCRED). One
// request per connection: a JSON object (at most 64 KiB) then EOF or '\n';
// one JSON reply line. Connections are served one at a time on one thread:
// registrations are rare and must be serialised anyway.
class PodSocketServer {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json&)>;
  static Result<std::unique_ptr<PodSocketServer>> start(const std::string& path, Handler h);
  ~PodSocketServer();
  PodSocketServer(const PodSocketServer&) = delete;
  PodSocketServer& operator=(const PodSocketServer&) = delete;

 private:
  PodSocketServer(std::string path, Fd listen, Fd stop_r, Fd stop_w, Handler h);
  void loop();
  std::string path_;
  Fd listen_, stop_r_, stop_w_;
  Handler handler_;
  std::thread thread_;
};

// The default timeout stays under the CDI hook timeout (30 s), so the hook
// reports "no reply" itself instead of being killed by the runtime.
Result<nlohmann::json> pod_request(const std::string& socket_path, const nlohmann::json& req,
                                   std::chrono::seconds timeout = std::chrono::seconds(25));

// ----------------------------------------------------------------- hook ---

struct HookOptions {
  std::string socket = kDefaultSocket;
  std::string dev_root = kDefaultDevRoot;
  std::string proc_root = "/proc";
};

struct HookOutcome {
  int exit_code = 0;
  std::string message;  // one line for stderr: why it failed, or a warning ("" when all is well)
};

// stage: "create-runtime" | "poststop". state_json: what the runtime wrote on stdin.
HookOutcome run_oci_hook(const std::string& stage, std::string_view state_json, const HookOptions& opt);

}  // namespace fa::pods
