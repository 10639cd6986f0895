// SPDX-License-Identifier: Apache-2.0
// The daemon side of pod registration: validate, decide, move the overlay
// interface, persist, in that order, so that a refusal or a failure leaves
// neither a registration nor a moved interface behind.
#include <sys/stat.h>

#include <ctime>

#include "common/log.hpp"
#include "pods/pods.hpp"

namespace fa::pods {

using nlohmann::json;

namespace {

json fail(const std::string& code, const std::string& message) {
  return {{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

}  // namespace

json PodService::handle(const json& req) {
  if (!req.is_object() || !req.contains("op") || !req["op"].is_string())
    return fail("bad_request", "request: `op' is missing (accepted: register, unregister, list)");
  std::string op = req["op"].get<std::string>();
  if (op == "register") return do_register(req);
  if (op == "unregister") return do_unregister(req);
  if (op == "list") {
    json l = list();
    l["ok"] = true;
    return l;
  }
  return fail("bad_request", "request: op `" + op + "' is unknown (accepted: register, unregister, list)");
}

json PodService::do_register(const json& req) {
  auto log = fa::logger("pods");
  if (!req.contains("id") || !req["id"].is_string() || req["id"].get<std::string>().empty())
    return fail("bad_request", "register: `id' is missing or not a non-empty string");
  if (!req.contains("pid") || !req["pid"].is_number_integer() || req["pid"].get<int64_t>() <= 0 ||
      req["pid"].get<int64_t>() > 0x3fffffff)
    return fail("bad_request", "register: pid `" + (req.contains("pid") ? req["pid"].dump() : std::string()) +
                                   "': expected a process id (integer > 0)");
  PodRecord rec;
  rec.id = req["id"].get<std::string>();
  rec.pid = static_cast<pid_t>(req["pid"].get<int64_t>());
  rec.bundle = req.value("bundle", "");

  std::lock_guard lk(mu_);
  reap_locked();
  if (const PodRecord* have = reg_.find(rec.id); have && have->pid == rec.pid) {
    json reply = {{"ok", true}, {"pod", to_json(*have)}};  // a repeated request: same answer, nothing moves twice
    add_login(reply);
    return reply;
  }

  if (auto why = check_exclusive(reg_.pods(), rec.id)) return fail("refused", *why);
  // Which ports are the fabric comes from discovery; whether one is ACTIVE
  // is read now: an InfiniBand port going down starts no discovery pass.
  json inspect = deps_.inspect ? deps_.inspect() : json();
  std::vector<std::string> ports = fabric_ports(inspect), last;
  if (ports.empty()) {
    std::lock_guard fk(fabric_mu_);
    last = last_fabric_ports_;
  }
  if (auto why = check_active_port(inspect, read_port_states(deps_.sysfs_root, ports),
                                   read_port_states(deps_.sysfs_root, last)))
    return fail("refused", *why);
  auto mesh = deps_.desired_mesh ? deps_.desired_mesh() : std::nullopt;
  if (!mesh)
    return fail("refused", "no overlay mesh is configured on this host (the control plane sets it with PUT /v1/mesh); "
                           "a fabric container needs its wg0");

  auto st = process_start_time(rec.pid, deps_.proc_root);
  if (!st) return fail("bad_request", "register: container pid " + std::to_string(rec.pid) + " is gone: " + st.error().message);
  rec.start_time = *st;
  struct stat ns{};
  std::string ns_path = deps_.proc_root + "/" + std::to_string(rec.pid) + "/ns/net";
  if (::stat(ns_path.c_str(), &ns) != 0)
    return fail("bad_request", "register: " + Error::from_errno("stat " + ns_path).message);
  rec.netns_inode = ns.st_ino;
  rec.interface = mesh->interface;
  rec.address = mesh->address.str();
  rec.registered_unix = static_cast<int64_t>(std::time(nullptr));

  if (!deps_.mover) return fail("failed", "register: this agent cannot move the overlay interface (no mover)");
  if (auto s = deps_.mover->take(rec, *mesh); !s) {
    log->warn("pod {}: {} not handed over: {}", rec.id, rec.interface, s.error().message);
    return fail("failed", rec.interface + " could not be moved into the container: " + s.error().message);
  }
  if (auto s = reg_.add(rec); !s) {
    // Nothing half-done: the interface goes back before we answer.
    if (auto b = deps_.mover->give_back(rec, mesh); !b)
      log->error("pod {}: {} not given back after a failed registration: {}", rec.id, rec.interface, b.error().message);
    return fail("failed", "register: persist " + reg_.path() + ": " + s.error().message);
  }
  log->info("pod {} (pid {}) registered; {} {} moved into its network namespace", rec.id, rec.pid, rec.interface,
            rec.address);
  changed_locked();
  json reply = {{"ok", true}, {"pod", to_json(rec)}};
  add_login(reply);
  return reply;
}

// The hook writes the rental's SSH material into the container it just
// registered: a repeated request gets it again (the hook may have been
// killed before it wrote).
void PodService::add_login(json& reply) const {
  if (!deps_.login) return;
  if (auto l = deps_.login()) reply["login"] = std::move(*l);
}

json PodService::do_unregister(const json& req) {
  auto log = fa::logger("pods");
  if (!req.contains("id") || !req["id"].is_string() || req["id"].get<std::string>().empty())
    return fail("bad_request", "unregister: `id' is missing or not a non-empty string");
  std::string id = req["id"].get<std::string>();
  std::lock_guard lk(mu_);
  const PodRecord* rec = reg_.find(id);
  if (!rec) return {{"ok", true}, {"removed", false}};  // a refused container's poststop, or a repeat
  PodRecord copy = *rec;
  auto mesh = deps_.desired_mesh ? deps_.desired_mesh() : std::nullopt;
  std::string problem;
  if (deps_.mover)
    if (auto s = deps_.mover->give_back(copy, mesh); !s) problem = s.error().message;
  // The record goes even when the interface could not be restored: the pod
  // is gone, and the next registration recreates a missing interface.
  if (auto s = reg_.remove(id); !s) return fail("failed", "unregister: persist " + reg_.path() + ": " + s.error().message);
  changed_locked();
  if (!problem.empty()) {
    log->error("pod {} unregistered, but {} was not restored on the host: {}", id, copy.interface, problem);
    return fail("failed", "pod unregistered, but " + copy.interface + " was not restored on the host: " + problem);
  }
  log->info("pod {} unregistered; {} is back on the host", id, copy.interface);
  return {{"ok", true}, {"removed", true}};
}

void PodService::reap_locked() {
  auto log = fa::logger("pods");
  std::vector<PodRecord> dead;
  for (const auto& p : reg_.pods())
    if (!pod_alive(p, deps_.proc_root)) dead.push_back(p);
  if (dead.empty()) return;
  auto mesh = deps_.desired_mesh ? deps_.desired_mesh() : std::nullopt;
  for (const auto& p : dead) {
    log->warn("pod {} (pid {}) is gone without a poststop hook: releasing {}", p.id, p.pid, p.interface);
    if (deps_.mover)
      if (auto s = deps_.mover->give_back(p, mesh); !s)
        log->error("pod {}: {} not restored on the host: {}", p.id, p.interface, s.error().message);
    if (auto s = reg_.remove(p.id); !s) log->error("pod {}: {}", p.id, s.error().message);
  }
  changed_locked();
}

size_t PodService::reconcile() {
  auto log = fa::logger("pods");
  std::lock_guard lk(mu_);
  std::vector<PodRecord> lost;
  size_t adopted = 0;
  for (const auto& p : reg_.pods()) {
    if (!pod_alive(p, deps_.proc_root)) continue;  // reap_locked below
    Status s = deps_.mover ? deps_.mover->adopt(p) : Status{};
    if (s) {
      ++adopted;
      log->info("pod {} (pid {}) still holds {} {}: adopted its network namespace", p.id, p.pid, p.interface,
                p.address);
    } else {
      log->warn("pod {} (pid {}) cannot be adopted ({}): unregistering it", p.id, p.pid, s.error().message);
      lost.push_back(p);
    }
  }
  auto mesh = lost.empty() || !deps_.desired_mesh ? std::nullopt : deps_.desired_mesh();
  for (const auto& p : lost) {
    if (deps_.mover)
      if (auto s = deps_.mover->give_back(p, mesh); !s)
        log->error("pod {}: {} not restored on the host: {}", p.id, p.interface, s.error().message);
    if (auto s = reg_.remove(p.id); !s) log->error("pod {}: {}", p.id, s.error().message);
  }
  reap_locked();
  if (!lost.empty()) changed_locked();
  return adopted;
}

void PodService::reap() {
  std::lock_guard lk(mu_);
  reap_locked();
}

void PodService::changed_locked() {
  {
    std::lock_guard lk(listed_mu_);
    listed_ = reg_.pods();
  }
  if (deps_.changed) deps_.changed();
}

json PodService::list() {
  // The registrations as of the last change, never behind a registration
  // in progress (which holds mu_ while it moves the interface).
  std::vector<PodRecord> pods;
  {
    std::lock_guard lk(listed_mu_);
    pods = listed_;
  }
  json arr = json::array();
  for (const auto& p : pods) {
    json j = to_json(p);
    j["alive"] = pod_alive(p, deps_.proc_root);
    arr.push_back(std::move(j));
  }
  return {{"pods", arr}};
}

std::optional<std::string> PodService::interface_netns() {
  std::lock_guard lk(mu_);
  for (const auto& p : reg_.pods())
    if (pod_alive(p, deps_.proc_root) && !p.interface.empty() && deps_.mover) return deps_.mover->netns_of(p.id);
  return std::nullopt;
}

void PodService::discovered(const json& inspect) {
  std::vector<std::string> ports = fabric_ports(inspect);
  if (ports.empty()) return;
  std::lock_guard lk(fabric_mu_);
  last_fabric_ports_ = std::move(ports);
}

}  // namespace fa::pods
