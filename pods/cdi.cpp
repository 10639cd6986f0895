// SPDX-License-Identifier: Apache-2.0
// The CDI spec for kind fabric-agent.io/rdma. Built from the `inspect --json`
// document (the contract probes/ publishes) so that the daemon, the CLI and
// the tests feed it the same data.
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "common/fs.hpp"
#include "pods/nested.hpp"
#include "pods/pods.hpp"

namespace fa::pods {

using nlohmann::json;

Result<std::map<std::string, std::string>> uverbs_by_hca(const std::string& sysfs_root) {
  std::map<std::string, std::string> out;
  const std::string dir = sysfs_root + "/class/infiniband_verbs";
  struct stat st{};
  // No verbs driver loaded: no uverbs nodes at all, which is not an error.
  if (::stat(dir.c_str(), &st) != 0) return out;
  auto names = list_dir(dir);
  if (!names) return names.take_error();
  for (const auto& n : *names) {
    if (n.rfind("uverbs", 0) != 0) continue;  // skips abi_version
    auto ibdev = read_text_file(dir + "/" + n + "/ibdev");
    if (!ibdev) return Error{"uverbs map: " + ibdev.error().message, ibdev.error().sys_errno};
    out[*ibdev] = n;
  }
  return out;
}

namespace {

std::string str_at(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

}  // namespace

Result<CdiSpec> build_cdi_spec(const json& inspect, const std::map<std::string, std::string>& uverbs,
                               const CdiOptions& opt) {
  if (opt.hook_path.empty() || opt.hook_path[0] != '/')
    return Error{"hook path: `" + opt.hook_path + "': must be absolute (OCI hooks run without PATH)", EINVAL};
  if (opt.dev_root.empty() || opt.dev_root[0] != '/')
    return Error{"dev root: `" + opt.dev_root + "': must be an absolute directory", EINVAL};
  if (!inspect.is_object() || !inspect.contains("fabric") || !inspect["fabric"].is_object())
    return Error{"inspect document: `fabric' is missing or not an object", EINVAL};

  CdiSpec out;
  // HCAs in fabric.ports order, each once: the internet-facing card is not
  // in that list, so its uverbs node is never handed out.
  std::vector<std::string> hcas;
  const json& ports = inspect["fabric"].value("ports", json::array());
  if (!ports.is_array()) return Error{"inspect document: fabric.ports is not a list", EINVAL};
  std::set<std::string> seen;
  for (const auto& p : ports) {
    if (!p.is_string()) return Error{"inspect document: fabric.ports holds a non-string", EINVAL};
    std::string s = p.get<std::string>();
    std::string hca = s.substr(0, s.find(':'));
    if (seen.insert(hca).second) hcas.push_back(hca);
  }
  if (hcas.empty()) out.warnings.push_back("no fabric port is ACTIVE: the spec hands out rdma_cm only, and the hook refuses pods until a port is ACTIVE");

  // Host and container paths differ only when a test points dev_root
  // elsewhere; hostPath is then needed, and it arrived in CDI 0.5.0.
  const bool need_host_path = opt.dev_root != "/dev";
  json nodes = json::array();
  auto add_node = [&](const std::string& rel) {
    json n = {{"path", "/dev/" + rel}};
    if (need_host_path) n["hostPath"] = opt.dev_root + "/" + rel;
    nodes.push_back(std::move(n));
    struct stat st{};
    std::string host = opt.dev_root + "/" + rel;
    if (::stat(host.c_str(), &st) != 0 || !S_ISCHR(st.st_mode))
      out.warnings.push_back(host + " is not a character device here: runtimes will fail to add it");
  };
  add_node("infiniband/rdma_cm");
  for (const auto& h : hcas) {
    auto it = uverbs.find(h);
    if (it == uverbs.end()) {
      out.warnings.push_back(h + " has no uverbs device (class/infiniband_verbs/*/ibdev): not handed out");
      continue;
    }
    add_node("infiniband/" + it->second);
  }

  json env = json::array();
  const json& nccl = inspect.value("nccl_env", json::object());
  if (auto v = str_at(nccl, "NCCL_IB_HCA"); !v.empty()) env.push_back("NCCL_IB_HCA=" + v);
  if (auto v = str_at(nccl, "NCCL_IB_GID_INDEX"); !v.empty()) env.push_back("NCCL_IB_GID_INDEX=" + v);
  std::string ifname = str_at(nccl, "NCCL_SOCKET_IFNAME");
  env.push_back("NCCL_SOCKET_IFNAME=" + (ifname.empty() ? std::string("wg0") : ifname));

  // The pod's spec: what it holds is at `path` inside it.
  json pod_nodes = json::array();
  for (const auto& n : nodes) pod_nodes.push_back({{"path", n["path"]}});
  out.nested = {{"cdiVersion", "0.3.0"},
                {"kind", kCdiKind},
                {"devices", json::array({json{{"name", kCdiDevice}, {"containerEdits", {{"deviceNodes", pod_nodes}}}}})},
                {"containerEdits", {{"env", env}}}};

  auto hook = [&](const char* name, const char* stage) {
    json args = json::array({"fabric-agent"});
    if (!opt.hook_loader.empty())
      args.insert(args.end(), {"--library-path", opt.hook_loader.substr(0, opt.hook_loader.rfind('/')), opt.hook_path});
    args.insert(args.end(), {"oci-hook", stage, "--socket", opt.socket});
    if (opt.dev_root != "/dev") {
      args.push_back("--dev-root");
      args.push_back(opt.dev_root);
    }
    const std::string& path = opt.hook_loader.empty() ? opt.hook_path : opt.hook_loader;
    return json{{"hookName", name}, {"path", path}, {"args", args}, {"timeout", opt.hook_timeout_seconds}};
  };

  out.doc = {{"cdiVersion", need_host_path ? "0.5.0" : "0.3.0"},
             {"kind", kCdiKind},
             {"devices", json::array({json{{"name", kCdiDevice},
                                           {"containerEdits", {{"deviceNodes", nodes}}}}})},
             {"containerEdits",
              {{"env", env}, {"hooks", json::array({hook("createRuntime", "create-runtime"),
                                                    hook("poststop", "poststop")})}}}};
  if (!opt.runtime_path.empty() && !opt.nested_spec.empty()) {
    // A Docker daemon in the pod with fabric-agent-runtime as its default
    // runtime gives every nested container the fabric; read-only, since the
    // renter must not change what the host hands out.
    json ro = {"ro", "nosuid", "nodev", "bind"};
    out.doc["containerEdits"]["mounts"] = json::array(
        {json{{"hostPath", opt.runtime_path}, {"containerPath", nested::kShimPath}, {"options", ro}},
         json{{"hostPath", opt.nested_spec}, {"containerPath", nested::kDefaultSpec}, {"options", ro}}});
  } else {
    out.warnings.push_back("no fabric-agent-runtime beside " + opt.hook_path +
                           ": the pod gets no runtime for nested containers");
  }
  return out;
}

std::string cdi_spec_filename() { return std::string(kCdiVendor) + "-" + kCdiClass + ".json"; }

std::string nested_spec_path(const std::string& socket) {
  auto slash = socket.rfind('/');
  return (slash == std::string::npos ? std::string(".") : socket.substr(0, slash)) + "/nested-cdi.json";
}

std::string runtime_beside(const std::string& hook_path) {
  std::string p = hook_path.substr(0, hook_path.rfind('/') + 1) + "fabric-agent-runtime";
  return ::access(p.c_str(), X_OK) == 0 ? p : std::string();
}

Status write_nested_spec(const std::string& path, const json& nested) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (!dir.empty() && ::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Error::from_errno("create " + dir);
  return write_file_atomic(path, nested.dump(2) + "\n", 0644);
}

Result<std::string> write_cdi_spec(const std::string& dir, const json& spec) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Error::from_errno("create " + dir);
  std::string path = dir + "/" + cdi_spec_filename();
  if (auto s = write_file_atomic(path, spec.dump(2) + "\n", 0644); !s) return s.take_error();
  return path;
}

}  // namespace fa::pods
