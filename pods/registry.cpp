// SPDX-License-Identifier: Apache-2.0
// Pod registrations and their persistence. A registration names a process
// (pid + start time, so a reused pid is not mistaken for the pod) and the
// network namespace that received the overlay interface.
#include <cstdlib>

#include "common/fs.hpp"
#include "common/json.hpp"
#include "pods/pods.hpp"

namespace fa::pods {

using nlohmann::json;

json to_json(const PodRecord& r) {
  return {{"id", r.id},
          {"pid", r.pid},
          {"start_time", r.start_time},
          {"bundle", r.bundle},
          {"netns_inode", r.netns_inode},
          {"interface", r.interface},
          {"address", r.address},
          {"registered_unix", r.registered_unix}};
}

Result<PodRecord> pod_from_json(const json& j) {
  if (!j.is_object()) return Error{"pod record: expected an object", EINVAL};
  PodRecord r;
  try {
    r.id = j.at("id").get<std::string>();
    r.pid = j.at("pid").get<pid_t>();
    r.start_time = j.at("start_time").get<uint64_t>();
    r.bundle = j.value("bundle", "");
    r.netns_inode = j.value("netns_inode", uint64_t{0});
    r.interface = j.value("interface", "");
    r.address = j.value("address", "");
    r.registered_unix = j.value("registered_unix", int64_t{0});
  } catch (const json::exception& e) {
    return Error{std::string("pod record: ") + e.what(), EINVAL};
  }
  if (r.id.empty()) return Error{"pod record: empty id", EINVAL};
  return r;
}

Result<uint64_t> process_start_time(pid_t pid, const std::string& proc_root) {
  if (pid <= 0) return Error{"no pid", ESRCH};
  auto stat = read_text_file(proc_root + "/" + std::to_string(pid) + "/stat");
  if (!stat) return stat.take_error();
  // comm (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  auto close = stat->rfind(')');
  if (close == std::string::npos) return Error{"malformed /proc/" + std::to_string(pid) + "/stat", EINVAL};
  const char* p = stat->c_str() + close + 1;
  // Field 3 starts after ") "; start time is field 22.
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
  }
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(p, &end, 10);
  if (end == p || errno != 0) return Error{"malformed /proc/" + std::to_string(pid) + "/stat", EINVAL};
  return static_cast<uint64_t>(v);
}

bool pod_alive(const PodRecord& r, const std::string& proc_root) {
  auto st = process_start_time(r.pid, proc_root);
  return st && *st == r.start_time;
}

Result<PodRegistry> PodRegistry::load(std::string path) {
  PodRegistry reg;
  reg.path_ = std::move(path);
  auto text = read_text_file(reg.path_, 16 * 1024 * 1024);
  if (!text) {
    if (text.error().sys_errno == ENOENT) return reg;
    return text.take_error();
  }
  json doc = fa::parse_json(*text);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("pods") || !doc["pods"].is_array())
    return Error{reg.path_ + ": not a pod registry (expected {\"pods\": [...]})", EINVAL};
  for (size_t i = 0; i < doc["pods"].size(); ++i) {
    auto r = pod_from_json(doc["pods"][i]);
    if (!r) return Error{reg.path_ + ": pods[" + std::to_string(i) + "]: " + r.error().message, EINVAL};
    reg.pods_.push_back(std::move(*r));
  }
  return reg;
}

const PodRecord* PodRegistry::find(const std::string& id) const {
  for (const auto& p : pods_)
    if (p.id == id) return &p;
  return nullptr;
}

Status PodRegistry::save(const std::vector<PodRecord>& pods) const {
  json arr = json::array();
  for (const auto& p : pods) arr.push_back(to_json(p));
  return write_file_atomic(path_, json{{"version", 1}, {"pods", arr}}.dump(2) + "\n", 0600);
}

Status PodRegistry::add(PodRecord r) {
  std::vector<PodRecord> next;
  for (const auto& p : pods_)
    if (p.id != r.id) next.push_back(p);
  next.push_back(std::move(r));
  if (auto s = save(next); !s) return s;
  pods_ = std::move(next);
  return {};
}

Status PodRegistry::remove(const std::string& id) {
  std::vector<PodRecord> next;
  for (const auto& p : pods_)
    if (p.id != id) next.push_back(p);
  if (next.size() == pods_.size()) return {};
  if (auto s = save(next); !s) return s;
  pods_ = std::move(next);
  return {};
}

}  // namespace fa::pods
