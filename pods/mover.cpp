// SPDX-License-Identifier: Apache-2.0
// Moving the overlay interface between the host and a pod's network namespace.
//
// overlay::apply already knows how to create the interface in the host
// namespace (its birthplace: the UDP socket stays there), move it into a
// target namespace and configure the address there, so take() is one apply
// with netns = the pod's. Coming back is overlay::move_interface, then apply
// in the host namespace.
//
// While a pod holds the interface we keep an fd on the pod's namespace. A
// namespace lives while anything references it, so the container's exit does
// not destroy wg0: poststop moves it back intact (same key, same peers, no
// wireguard-go restart). A restarted daemon takes that fd again (adopt) for
// every registered pod still alive. A pod that died while no daemon held its
// namespace took the virtual link with it: give_back recreates it from the
// persisted mesh.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>

#include "common/fs.hpp"
#include "common/log.hpp"
#include "overlay/overlay.hpp"
#include "pods/login.hpp"
#include "pods/pods.hpp"
#include "pods/uapi_proxy.hpp"

namespace fa::pods {

using nlohmann::json;

namespace {

class OverlayMover final : public WgMover {
 public:
  Status take(const PodRecord& pod, const overlay::DesiredMesh& mesh) override {
    auto m = std::optional<overlay::DesiredMesh>(mesh);
    std::string ns_path = "/proc/" + std::to_string(pod.pid) + "/ns/net";
    Fd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return Error::from_errno("open " + ns_path);
    // The pid could have been reused between the check and the open.
    auto st = process_start_time(pod.pid);
    if (!st || *st != pod.start_time) return Error{"container pid " + std::to_string(pod.pid) + " exited", ESRCH};
    struct stat a{}, b{};
    if (::fstat(ns.get(), &a) != 0 || ::stat("/proc/self/ns/net", &b) != 0) return Error::from_errno("stat netns");
    if (a.st_ino == b.st_ino && a.st_dev == b.st_dev)
      return Error{"the container shares the host network namespace; " + m->interface +
                       " can only be handed to a container with its own",
                   EINVAL};
    m->netns = "/proc/self/fd/" + std::to_string(ns.get());
    auto r = overlay::apply(*m);
    if (!r) {
      // apply may have failed after the move: bring the link back, so that a
      // failed registration leaves wg0 on the host.
      if (auto s = move_back(ns.get(), m->interface); !s)
        fa::logger("pods")->error("{}: left in the namespace of pod {}: {}", m->interface, pod.id, s.error().message);
      return r.take_error();
    }
    held_[pod.id] = std::move(ns);
    serve_uapi(pod);
    return {};
  }

  Status give_back(const PodRecord& pod, const std::optional<overlay::DesiredMesh>& mesh) override {
    auto log = fa::logger("pods");
    if (pod.interface.empty()) return {};
    uapi_.erase(pod.id);
    if (auto it = held_.find(pod.id); it != held_.end()) {
      Fd ns = std::move(it->second);
      held_.erase(it);
      if (auto s = move_back(ns.get(), pod.interface); !s) return s;
    }
    if (!mesh) return {};  // the mesh was deleted meanwhile: nothing to restore
    auto m = mesh;
    m->netns.reset();
    Fd host(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!host.valid()) return Error::from_errno("open /proc/self/ns/net");
    auto here = overlay::interface_exists(m->interface, host.get());
    if (!here) return here.take_error();
    if (!*here) {
      // Destroyed with the pod's namespace. A wireguard-go whose tun vanished
      // may linger on the UAPI socket; down() stops the one we started.
      log->info("{}: gone with pod {}'s namespace, recreating it from the persisted mesh", m->interface, pod.id);
      if (auto s = overlay::down(m->interface); !s) return s;
    }
    auto r = overlay::apply(*m);
    if (!r) return r.take_error();
    return {};
  }

  Status adopt(const PodRecord& pod) override {
    if (pod.interface.empty()) return {};
    std::string ns_path = "/proc/" + std::to_string(pod.pid) + "/ns/net";
    Fd ns(::open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid()) return Error::from_errno("open " + ns_path);
    // Opened first, checked second: the fd then surely names the pod's
    // namespace, not one of a process that reused the pid in between.
    auto st = process_start_time(pod.pid);
    if (!st || *st != pod.start_time) return Error{"container pid " + std::to_string(pod.pid) + " exited", ESRCH};
    struct stat a{};
    if (::fstat(ns.get(), &a) != 0) return Error::from_errno("stat " + ns_path);
    if (pod.netns_inode != 0 && a.st_ino != pod.netns_inode)
      return Error{"pid " + std::to_string(pod.pid) + " is in network namespace " + std::to_string(a.st_ino) +
                       ", not the registered " + std::to_string(pod.netns_inode),
                   ESRCH};
    held_[pod.id] = std::move(ns);
    serve_uapi(pod);
    return {};
  }

  std::optional<std::string> netns_of(const std::string& pod_id) override {
    auto it = held_.find(pod_id);
    if (it == held_.end()) return std::nullopt;
    return "/proc/self/fd/" + std::to_string(it->second.get());
  }

 private:
  // From the pod's namespace back to ours, if the link is still there.
  static Status move_back(int pod_ns, const std::string& ifname) {
    Fd host(::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!host.valid()) return Error::from_errno("open /proc/self/ns/net");
    auto moved = overlay::move_interface(ifname, pod_ns, host.get());
    if (!moved) return moved.take_error();
    return {};
  }

  // With wireguard-go, `wg show` in the pod needs a UAPI socket there
  // (uapi_proxy.cpp). A convenience, not the fabric: a failure is logged and
  // the pod keeps wg0. The kernel backend needs nothing: wg reads the
  // interface over netlink in the pod's namespace.
  void serve_uapi(const PodRecord& pod) {
    const std::string upstream = "/var/run/wireguard/" + pod.interface + ".sock";
    if (::access(upstream.c_str(), F_OK) != 0) return;
    auto log = fa::logger("pods");
    auto text = read_text_file(pod.bundle + "/config.json", 16 * 1024 * 1024);
    auto rootfs = text ? rootfs_of(pod.bundle, *text) : Result<std::string>(text.error());
    auto px = rootfs ? UapiProxy::start(*rootfs, pod.interface, upstream) : Result<std::unique_ptr<UapiProxy>>(rootfs.error());
    if (!px) {
      log->warn("pod {}: `wg show` will not work inside it: {}", pod.id, px.error().message);
      return;
    }
    uapi_[pod.id] = std::move(*px);
  }

  std::map<std::string, Fd> held_;
  std::map<std::string, std::unique_ptr<UapiProxy>> uapi_;
};

}  // namespace

std::unique_ptr<WgMover> make_overlay_mover() { return std::make_unique<OverlayMover>(); }

}  // namespace fa::pods
