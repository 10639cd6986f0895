// SPDX-License-Identifier: Apache-2.0
// OCI input (the state on a hook's stdin, the bundle's config.json), the host
// GPU nodes under a device root and the fabric port states under a sysfs
// root (thin reads), and the pure admission decisions.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>

#include "common/fs.hpp"
#include "common/json.hpp"
#include "pods/pods.hpp"
#include "probes/logic.hpp"

namespace fa::pods {

using nlohmann::json;

namespace {

Result<json> parse_json_object(std::string_view text, const char* what) {
  json j = fa::parse_json(text);
  if (j.is_discarded()) return Error{std::string(what) + ": not valid JSON", EINVAL};
  if (!j.is_object()) return Error{std::string(what) + ": expected a JSON object, got " + j.type_name(), EINVAL};
  return j;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

Result<OciState> parse_oci_state(std::string_view text) {
  auto j = parse_json_object(text, "OCI state");
  if (!j) return j.take_error();
  OciState s;
  auto need_str = [&](const char* key, std::string& out) -> Status {
    if (!j->contains(key) || !(*j)[key].is_string() || (*j)[key].get<std::string>().empty())
      return Error{std::string("OCI state: `") + key + "' is missing or not a non-empty string", EINVAL};
    out = (*j)[key].get<std::string>();
    return {};
  };
  if (auto st = need_str("id", s.id); !st) return st.take_error();
  if (auto st = need_str("bundle", s.bundle); !st) return st.take_error();
  if (s.bundle[0] != '/') return Error{"OCI state: bundle `" + s.bundle + "': expected an absolute path", EINVAL};
  if (j->contains("status") && (*j)["status"].is_string()) s.status = (*j)["status"].get<std::string>();
  if (j->contains("pid") && !(*j)["pid"].is_null()) {
    const json& p = (*j)["pid"];
    if (!p.is_number_integer() || p.get<int64_t>() < 0 || p.get<int64_t>() > 0x3fffffff)
      return Error{"OCI state: pid `" + p.dump() + "': expected a process id (integer > 0)", EINVAL};
    s.pid = static_cast<pid_t>(p.get<int64_t>());
  }
  return s;
}

Result<OciConfig> parse_oci_config(std::string_view text) {
  auto j = parse_json_object(text, "config.json");
  if (!j) return j.take_error();
  OciConfig c;
  if (j->contains("process")) {
    const json& proc = (*j)["process"];
    if (!proc.is_object()) return Error{"config.json: process is not an object", EINVAL};
    if (proc.contains("env")) {
      if (!proc["env"].is_array()) return Error{"config.json: process.env is not a list", EINVAL};
      for (const auto& e : proc["env"]) {
        if (!e.is_string()) return Error{"config.json: process.env holds " + e.dump() + ": expected strings", EINVAL};
        c.env.push_back(e.get<std::string>());
      }
    }
  }
  if (j->contains("linux") && (*j)["linux"].is_object() && (*j)["linux"].contains("devices")) {
    const json& devs = (*j)["linux"]["devices"];
    if (!devs.is_array()) return Error{"config.json: linux.devices is not a list", EINVAL};
    for (size_t i = 0; i < devs.size(); ++i) {
      const json& d = devs[i];
      std::string where = "config.json: linux.devices[" + std::to_string(i) + "]";
      if (!d.is_object() || !d.contains("path") || !d["path"].is_string())
        return Error{where + ": expected an object with a string `path'", EINVAL};
      OciDevice od;
      od.path = d["path"].get<std::string>();
      if (d.contains("type") && d["type"].is_string()) od.type = d["type"].get<std::string>();
      for (auto [key, slot] : {std::pair{"major", &od.major}, std::pair{"minor", &od.minor}}) {
        if (!d.contains(key) || d[key].is_null()) continue;
        if (!d[key].is_number_integer()) return Error{where + "." + key + ": `" + d[key].dump() + "': expected an integer", EINVAL};
        *slot = d[key].get<int64_t>();
      }
      c.devices.push_back(std::move(od));
    }
  }
  return c;
}

Result<HostGpus> scan_host_gpus(const std::string& dev_root) {
  HostGpus g;
  auto node = [&](const std::string& rel, std::vector<HostDevice>& into) -> Status {
    std::string p = dev_root + "/" + rel;
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return Error::from_errno("stat " + p);
    if (!S_ISCHR(st.st_mode)) return {};  // not a device: ignore (a test dir with a stray file)
    into.push_back({"/dev/" + rel, 'c', major(st.st_rdev), minor(st.st_rdev)});
    return {};
  };
  auto names = list_dir(dev_root);
  if (!names) return names.take_error();
  for (const auto& n : *names)
    if (n.rfind("nvidia", 0) == 0 && all_digits(std::string_view(n).substr(6)))
      if (auto s = node(n, g.nvidia); !s) return s.take_error();
  std::sort(g.nvidia.begin(), g.nvidia.end(), [](const HostDevice& a, const HostDevice& b) {
    return std::stoul(a.path.substr(11)) < std::stoul(b.path.substr(11));  // /dev/nvidia10 after /dev/nvidia9
  });
  if (std::find(names->begin(), names->end(), "kfd") != names->end()) {
    if (auto s = node("kfd", g.amd); !s) return s.take_error();
    g.amd_kfd = !g.amd.empty();
    if (g.amd_kfd) {
      auto dri = list_dir(dev_root + "/dri");
      if (dri) {
        for (const auto& n : *dri)
          if (n.rfind("renderD", 0) == 0 && all_digits(std::string_view(n).substr(7)))
            if (auto s = node("dri/" + n, g.amd); !s) return s.take_error();
      }
    }
  }
  return g;
}

namespace {

bool holds(const OciConfig& cfg, const HostDevice& h) {
  for (const auto& d : cfg.devices) {
    if (d.major && d.minor) {
      // Same node under another name (`--device /dev/nvidia0:/dev/gpu0`) is still that GPU.
      if ((d.type.empty() || d.type == "c" || d.type == "u") && *d.major == h.major && *d.minor == h.minor) return true;
    } else if (d.path == h.path) {
      return true;
    }
  }
  return false;
}

std::string env_value(const OciConfig& cfg, std::string_view name) {
  std::string v;
  for (const auto& e : cfg.env)
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=')
      v = e.substr(name.size() + 1);  // last one wins, as in execve's environment
  return v;
}

std::string join_missing(const std::vector<std::string>& m) {
  std::string s;
  for (size_t i = 0; i < m.size() && i < 4; ++i) s += (i ? ", " : "") + m[i];
  if (m.size() > 4) s += ", ...";
  return s;
}

}  // namespace

std::optional<std::string> check_whole_machine(const HostGpus& host, const OciConfig& cfg) {
  if (!host.nvidia.empty()) {
    std::string vis = env_value(cfg, "NVIDIA_VISIBLE_DEVICES");
    // The NVIDIA legacy hook mounts every GPU itself for "all"; the devices
    // are then not in config.json yet.
    if (vis != "all") {
      std::vector<std::string> missing;
      for (const auto& h : host.nvidia)
        if (!holds(cfg, h)) missing.push_back(h.path);
      if (!missing.empty())
        return "container holds " + std::to_string(host.nvidia.size() - missing.size()) + " of " +
               std::to_string(host.nvidia.size()) + " NVIDIA GPUs (missing " + join_missing(missing) +
               "); the RDMA fabric is only given to a container that holds the whole machine "
               "(every /dev/nvidiaN, or NVIDIA_VISIBLE_DEVICES=all)";
    }
  }
  if (host.amd_kfd) {
    std::vector<std::string> missing;
    for (const auto& h : host.amd)
      if (!holds(cfg, h)) missing.push_back(h.path);
    if (!missing.empty())
      return "container does not hold every AMD GPU (missing " + join_missing(missing) +
             "); the RDMA fabric is only given to a container that holds the whole machine "
             "(/dev/kfd and every /dev/dri/renderD*)";
  }
  return std::nullopt;
}

std::vector<std::string> fabric_ports(const json& inspect) {
  std::vector<std::string> out;
  if (!inspect.is_object() || !inspect.contains("fabric") || !inspect["fabric"].is_object()) return out;
  const json& fab = inspect["fabric"];
  if (fab.contains("ports") && fab["ports"].is_array())
    for (const auto& p : fab["ports"])
      if (p.is_string()) out.push_back(p.get<std::string>());
  return out;
}

std::vector<PortState> read_port_states(const std::string& sysfs_root,
                                        const std::vector<std::string>& ports) {
  std::vector<PortState> out;
  for (const auto& id : ports) {
    PortState s{id, "", ""};
    auto colon = id.rfind(':');
    std::string dev = colon == std::string::npos ? std::string() : id.substr(0, colon);
    std::string num = colon == std::string::npos ? std::string() : id.substr(colon + 1);
    // The name becomes a path: a device name with no '/', a port number.
    if (dev.empty() || dev == "." || dev == ".." || dev.find('/') != std::string::npos || num.empty() ||
        num.size() > 3 || num.find_first_not_of("0123456789") != std::string::npos) {
      s.error = "not a port name (expected <device>:<port number>)";
      out.push_back(std::move(s));
      continue;
    }
    std::string path = sysfs_root + "/class/infiniband/" + dev + "/ports/" + num + "/state";
    auto text = read_text_file(path, 4096);
    if (!text) {
      s.error = text.error().message;
    } else if (auto v = probes::parse_numbered_state(*text)) {
      s.state = v->second;
    } else {
      s.error = path + ": expected '<n>: <NAME>' like '4: ACTIVE', got '" +
                probes::printable(text->substr(0, 32)) + "'";
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<std::string> check_active_port(const json& inspect, const std::vector<PortState>& now,
                                             const std::vector<PortState>& last) {
  if (!inspect.is_object() || !inspect.contains("fabric") || !inspect["fabric"].is_object())
    return "no discovery result yet: cannot tell which ports are the fabric";
  auto said = [](const PortState& p) {
    return p.port + (p.error.empty() ? " is " + p.state : " state unreadable: " + p.error);
  };
  std::vector<std::string> states;
  for (const auto& p : now) {
    if (p.state == "ACTIVE") return std::nullopt;
    states.push_back(said(p));
  }
  if (states.empty()) {
    // Discovery takes no port now: refused, naming the last fabric's ports.
    bool active = false;
    for (const auto& p : last) {
      active |= p.state == "ACTIVE";
      states.push_back(said(p));
    }
    if (!states.empty())
      return active ? "no fabric port is ACTIVE: discovery takes none of this host's ports now (the last fabric's " +
                          join_missing(states) + "; see `fabric-agent inspect`)"
                    : "no fabric port is ACTIVE (" + join_missing(states) + ")";
    const json& fab = inspect["fabric"];
    std::string kind =
        fab.contains("kind") && fab["kind"].is_string() ? fab["kind"].get<std::string>() : "none";
    return "no fabric port is ACTIVE (fabric kind " + kind + ", no fabric ports)";
  }
  return "no fabric port is ACTIVE (" + join_missing(states) + ")";
}

std::optional<std::string> check_exclusive(const std::vector<PodRecord>& live, const std::string& new_id) {
  for (const auto& p : live)
    if (p.id != new_id)
      return "container " + p.id + " (pid " + std::to_string(p.pid) +
             ") already holds the RDMA fabric of this host; one fabric container per machine";
  return std::nullopt;
}

}  // namespace fa::pods
