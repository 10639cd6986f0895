// SPDX-License-Identifier: Apache-2.0
#include "pods/nested.hpp"

#include <algorithm>
#include <ctime>

namespace fa::pods::nested {

using nlohmann::json;

namespace {

const char* const kStages[] = {"prestart", "createRuntime", "createContainer", "startContainer", "poststart",
                               "poststop"};

bool is_abs(const json& v) { return v.is_string() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '/'; }

std::string env_name(const std::string& kv) { return kv.substr(0, kv.find('=')); }

// containerEdits of the spec or of its device: appended to `out`.
std::optional<std::string> read_edits(const json& ce, const std::string& where, Edits& out) {
  if (!ce.is_object()) return where + " is not an object";
  if (ce.contains("deviceNodes")) {
    const json& nodes = ce["deviceNodes"];
    if (!nodes.is_array()) return where + ".deviceNodes is not a list";
    for (size_t i = 0; i < nodes.size(); ++i) {
      const json& n = nodes[i];
      std::string at = where + ".deviceNodes[" + std::to_string(i) + "]";
      if (!n.is_object() || !is_abs(n.value("path", json()))) return at + ".path: must be an absolute path";
      Node node;
      node.path = n["path"];
      node.host_path = node.path;
      if (n.contains("hostPath")) {
        if (!is_abs(n["hostPath"])) return at + ".hostPath: must be an absolute path";
        node.host_path = n["hostPath"];
      }
      out.nodes.push_back(std::move(node));
    }
  }
  if (ce.contains("env")) {
    if (!ce["env"].is_array()) return where + ".env is not a list";
    for (const auto& v : ce["env"]) {
      if (!v.is_string() || v.get<std::string>().find('=') == std::string::npos || v.get<std::string>()[0] == '=')
        return where + ".env: `" + v.dump() + "' is not NAME=VALUE";
      out.env.push_back(v);
    }
  }
  if (ce.contains("hooks")) {
    if (!ce["hooks"].is_array()) return where + ".hooks is not a list";
    for (const auto& h : ce["hooks"]) {
      std::string name = h.is_object() ? h.value("hookName", "") : "";
      if (std::find(std::begin(kStages), std::end(kStages), name) == std::end(kStages))
        return where + ".hooks: hookName `" + name + "' is not an OCI hook stage (prestart, createRuntime, "
               "createContainer, startContainer, poststart, poststop)";
      if (!is_abs(h.value("path", json()))) return where + ".hooks: path of " + name + " must be absolute";
      json oh = {{"path", h["path"]}};
      for (const char* k : {"args", "env", "timeout"})
        if (h.contains(k)) oh[k] = h[k];
      out.hooks[name].push_back(std::move(oh));
    }
  }
  if (ce.contains("mounts")) {
    if (!ce["mounts"].is_array()) return where + ".mounts is not a list";
    for (const auto& m : ce["mounts"]) {
      if (!m.is_object() || !is_abs(m.value("hostPath", json())) || !is_abs(m.value("containerPath", json())))
        return where + ".mounts: each needs an absolute hostPath and containerPath";
      out.mounts.push_back({{"destination", m["containerPath"]},
                            {"source", m["hostPath"]},
                            {"type", m.value("type", "bind")},
                            {"options", m.value("options", json::array({"bind"}))}});
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> edits_from_cdi(const json& spec, Edits& out) {
  if (!spec.is_object()) return std::string("CDI spec is not a JSON object");
  if (spec.value("kind", "") != "fabric-agent.io/rdma")
    return "CDI spec: kind `" + spec.value("kind", json()).dump() + "' is not fabric-agent.io/rdma";
  Edits e;
  const json& devices = spec.value("devices", json());
  if (!devices.is_array()) return std::string("CDI spec: devices is not a list");
  auto all = std::find_if(devices.begin(), devices.end(),
                          [](const json& d) { return d.is_object() && d.value("name", "") == "all"; });
  if (all == devices.end()) return std::string("CDI spec: no device named `all'");
  if (auto err = read_edits(all->value("containerEdits", json::object()), "devices[all].containerEdits", e)) return err;
  if (spec.contains("containerEdits"))
    if (auto err = read_edits(spec["containerEdits"], "containerEdits", e)) return err;
  out = std::move(e);
  return std::nullopt;
}

std::optional<std::string> apply_edits(json& config, const Edits& e, uint64_t memlock) {
  if (!config.is_object()) return std::string("config.json is not a JSON object");
  json c = config;  // edited as a copy: an error leaves `config` as it was
  if (!c.contains("process") || !c["process"].is_object()) return std::string("config.json: process is missing");
  json& proc = c["process"];
  auto list_at = [](json& parent, const char* key) -> json* {
    if (!parent.contains(key)) parent[key] = json::array();
    return parent[key].is_array() ? &parent[key] : nullptr;
  };
  auto object_at = [](json& parent, const char* key) -> json* {
    if (!parent.contains(key) || parent[key].is_null()) parent[key] = json::object();
    return parent[key].is_object() ? &parent[key] : nullptr;
  };

  json* env = list_at(proc, "env");
  if (!env) return std::string("config.json: process.env is not a list");
  for (const auto& kv : e.env) {
    std::string name = env_name(kv);
    bool set = std::any_of(env->begin(), env->end(),
                           [&](const json& v) { return v.is_string() && env_name(v.get<std::string>()) == name; });
    if (!set) env->push_back(kv);
  }

  json* rl = list_at(proc, "rlimits");
  if (!rl) return std::string("config.json: process.rlimits is not a list");
  rl->erase(std::remove_if(rl->begin(), rl->end(),
                           [](const json& r) { return r.is_object() && r.value("type", "") == "RLIMIT_MEMLOCK"; }),
            rl->end());
  rl->push_back({{"type", "RLIMIT_MEMLOCK"}, {"hard", memlock}, {"soft", memlock}});

  json* linux = object_at(c, "linux");
  if (!linux) return std::string("config.json: linux is not an object");
  json* devs = list_at(*linux, "devices");
  if (!devs) return std::string("config.json: linux.devices is not a list");
  json* res = object_at(*linux, "resources");
  if (!res) return std::string("config.json: linux.resources is not an object");
  json* rules = list_at(*res, "devices");
  if (!rules) return std::string("config.json: linux.resources.devices is not a list");
  for (const auto& n : e.nodes) {
    if (n.major < 0 || n.minor < 0) return n.host_path + ": device number unknown";
    std::string type(1, n.type);
    bool have = std::any_of(devs->begin(), devs->end(),
                            [&](const json& d) { return d.is_object() && d.value("path", "") == n.path; });
    if (!have)
      devs->push_back({{"path", n.path}, {"type", type}, {"major", n.major}, {"minor", n.minor},
                       {"fileMode", 0666}, {"uid", 0}, {"gid", 0}});
    json rule = {{"allow", true}, {"type", type}, {"major", n.major}, {"minor", n.minor}, {"access", "rwm"}};
    if (std::find(rules->begin(), rules->end(), rule) == rules->end()) rules->push_back(rule);
  }

  if (!e.mounts.empty()) {
    json* mounts = list_at(c, "mounts");
    if (!mounts) return std::string("config.json: mounts is not a list");
    for (const auto& m : e.mounts) {
      bool have = std::any_of(mounts->begin(), mounts->end(), [&](const json& x) {
        return x.is_object() && x.value("destination", "") == m["destination"].get<std::string>();
      });
      if (!have) mounts->push_back(m);
    }
  }
  if (!e.hooks.empty()) {
    json* hooks = object_at(c, "hooks");
    if (!hooks) return std::string("config.json: hooks is not an object");
    for (const auto& [stage, list] : e.hooks.items()) {
      json* have = list_at(*hooks, stage.c_str());
      if (!have) return "config.json: hooks." + stage + " is not a list";
      for (const auto& h : list) {
        bool dup = std::any_of(have->begin(), have->end(), [&](const json& x) {
          return x.is_object() && x.value("path", json()) == h["path"] && x.value("args", json()) == h.value("args", json());
        });
        if (!dup) have->push_back(h);
      }
    }
  }
  config = std::move(c);
  return std::nullopt;
}

Call parse_call(const std::vector<std::string>& args) {
  // Global options that take a value, runc's and crun's: the verb is the
  // first argument that is neither one of them, nor its value, nor a flag.
  static const char* const kValued[] = {"--root", "--log", "--log-format", "--criu", "--rootless", "--cgroup-manager"};
  Call c;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.empty() || a[0] != '-') break;
    std::string name = a.substr(0, a.find('='));
    std::string val;
    bool valued = std::find(std::begin(kValued), std::end(kValued), name) != std::end(kValued);
    if (valued && a.find('=') == std::string::npos && i + 1 < args.size()) val = args[++i];
    else if (valued) val = a.substr(a.find('=') + 1);
    if (name == "--log") c.log = val;
    if (name == "--log-format") c.log_format = val;
  }
  if (i == args.size()) return c;
  c.verb = args[i];
  for (size_t j = i + 1; j < args.size(); ++j) {
    const std::string& a = args[j];
    if ((a == "--bundle" || a == "-b") && j + 1 < args.size()) c.bundle = args[++j];
    else if (a.rfind("--bundle=", 0) == 0) c.bundle = a.substr(9);
  }
  return c;
}

std::string log_line(const std::string& format, const std::string& message) {
  if (format != "json") return "fabric-agent-runtime: " + message + "\n";
  char ts[32];
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return json{{"level", "error"}, {"msg", "fabric-agent-runtime: " + message}, {"time", ts}}.dump() + "\n";
}

}  // namespace fa::pods::nested
