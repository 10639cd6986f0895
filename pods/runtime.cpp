// SPDX-License-Identifier: Apache-2.0
#include "pods/runtime.hpp"

#include <algorithm>

#include "common/fs.hpp"
#include "common/log.hpp"

namespace fa::pods {

using nlohmann::json;

Result<std::unique_ptr<PodsRuntime>> PodsRuntime::start(PodsRuntimeOptions o) {
  if (o.state_dir.empty()) return Error{"pods: state_dir is empty", EINVAL};
  if (!o.hook_dir.empty()) {
    auto copy = copy_for_host(o.hook_dir);
    if (!copy) return Error{"pods.hook_dir: " + copy.error().message, copy.error().sys_errno};
    fa::logger("pods")->info("the hooks run the copy of this agent in {} ({} shared objects)", o.hook_dir,
                             copy->objects);
    o.hook_path = copy->binary;
    o.hook_loader = copy->loader;
  }
  if (o.hook_path.empty()) {
    auto self = read_link("/proc/self/exe");
    if (!self) return self.take_error();
    o.hook_path = *self;
  }
  auto reg = PodRegistry::load(o.state_dir + "/pods.json");
  if (!reg) return reg.take_error();
  std::unique_ptr<PodsRuntime> rt(new PodsRuntime());
  rt->mover_ = o.mover ? std::move(o.mover) : make_overlay_mover();
  ServiceDeps d;
  d.inspect = o.inspect;
  d.desired_mesh = o.desired_mesh;
  d.changed = o.changed;
  d.login = o.login;
  d.sysfs_root = o.sysfs_root;
  d.mover = rt->mover_.get();
  rt->svc_ = std::make_unique<PodService>(std::move(*reg), std::move(d));
  rt->opt_ = std::move(o);
  PodService* svc = rt->svc_.get();
  // Before the socket serves and before the daemon applies its mesh: a pod
  // that kept wg0 across our restart is adopted where it is, so nothing
  // creates a second wg0 on the host; pods gone meanwhile give it back.
  svc->reconcile();
  // From here on the runtime is kept whatever the socket does: it holds
  // what reconcile adopted.
  if (!rt->serve())
    fa::logger("pods")->error("containers cannot register until {} is served ({}); {} registered",
                              rt->opt_.socket, rt->socket_error_, svc->list()["pods"].size());
  return rt;
}

bool PodsRuntime::serve() {
  PodService* svc = svc_.get();
  auto serialize = opt_.serialize;
  auto srv = PodSocketServer::start(opt_.socket, [svc, serialize](const json& req) {
    if (serialize) return serialize([&] { return svc->handle(req); });
    return svc->handle(req);
  });
  if (!srv) {
    socket_error_ = srv.error().message;
    return false;
  }
  srv_ = std::move(*srv);
  socket_error_.clear();
  fa::logger("pods")->info("pod registrations on {} ({} registered)", opt_.socket,
                           svc->list()["pods"].size());
  return true;
}

PodsRuntime::~PodsRuntime() { srv_.reset(); }

std::vector<std::string> PodsRuntime::on_discovery(const json& inspect) {
  svc_->reap();
  svc_->discovered(inspect);
  auto w = write_spec(inspect);
  std::vector<std::string> now = w ? *w : std::vector<std::string>{"CDI spec not written: " + w.error().message};
  // A host without a fabric has the same warning on every pass (each few
  // seconds): the log gets its changes, the status has it always.
  auto log = fa::logger("pods");
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const auto& x : now)
    if (!has(logged_, x)) log->warn("{}{}", w ? "CDI spec: " : "", x);
  for (const auto& x : logged_)
    if (!has(now, x)) log->info("{}{} (cleared)", x.rfind("CDI spec", 0) == 0 ? "" : "CDI spec: ", x);
  logged_ = now;
  if (!srv_) serve();  // a failure was logged when it first failed
  if (!socket_error_.empty())
    now.push_back("pod registrations not served on " + opt_.socket + ": " + socket_error_ +
                  "; containers cannot register");
  return now;
}

Result<std::vector<std::string>> PodsRuntime::write_spec(const json& inspect) {
  if (opt_.cdi_dir.empty()) return std::vector<std::string>{};
  auto uverbs = uverbs_by_hca(opt_.sysfs_root);
  if (!uverbs) return uverbs.take_error();
  CdiOptions co;
  co.dev_root = opt_.dev_root;
  co.hook_path = opt_.hook_path;
  co.hook_loader = opt_.hook_loader;
  co.socket = opt_.socket;
  co.runtime_path = runtime_beside(opt_.hook_path);
  co.nested_spec = nested_spec_path(opt_.socket);
  auto spec = build_cdi_spec(inspect, *uverbs, co);
  if (!spec) return spec.take_error();
  // The pod's spec first (the host spec mounts it), and each when it differs
  // from its file.
  std::string nested = spec->nested.dump(2);
  if (read_text_file(co.nested_spec, 1 << 20).value_or("") != nested)
    if (auto s = write_nested_spec(co.nested_spec, spec->nested); !s) return s.take_error();
  // Compared with the file on disk, not with what we wrote last: a spec
  // deleted or edited by hand is put back at the next pass.
  std::string text = spec->doc.dump(2);  // read_text_file strips the file's one trailing newline
  if (read_text_file(opt_.cdi_dir + "/" + cdi_spec_filename(), 1 << 20).value_or("") != text) {
    auto path = write_cdi_spec(opt_.cdi_dir, spec->doc);
    if (!path) return path.take_error();
    auto log = fa::logger("pods");
    log->info("CDI spec {} written ({} device nodes)", *path,
              spec->doc["devices"][0]["containerEdits"]["deviceNodes"].size());
  }
  return spec->warnings;
}

}  // namespace fa::pods
