// SPDX-License-Identifier: Apache-2.0
#include "pods/runtime.hpp"

#include "common/fs.hpp"
#include "common/log.hpp"

namespace fa::pods {

using nlohmann::json;

Result<std::unique_ptr<PodsRuntime>> PodsRuntime::start(PodsRuntimeOptions o) {
  if (o.state_dir.empty()) return Error{"pods: state_dir is empty", EINVAL};
  if (o.hook_path.empty()) {
    auto self = read_link("/proc/self/exe");
    if (!self) return self.take_error();
    o.hook_path = *self;
  }
  auto reg = PodRegistry::load(o.state_dir + "/pods.json");
  if (!reg) return reg.take_error();
  std::unique_ptr<PodsRuntime> rt(new PodsRuntime());
  rt->mover_ = o.mover ? std::move(o.mover) : make_overlay_mover(o.overlay_cidr);
  ServiceDeps d;
  d.inspect = o.inspect;
  d.desired_mesh = o.desired_mesh;
  d.changed = o.changed;
  d.mover = rt->mover_.get();
  rt->svc_ = std::make_unique<PodService>(std::move(*reg), std::move(d));
  rt->opt_ = std::move(o);
  PodService* svc = rt->svc_.get();
  auto serialize = rt->opt_.serialize;
  auto srv = PodSocketServer::start(rt->opt_.socket, [svc, serialize](const json& req) {
    if (serialize) return serialize([&] { return svc->handle(req); });
    return svc->handle(req);
  });
  if (!srv) return srv.take_error();
  rt->srv_ = std::move(*srv);
  fa::logger("pods")->info("pod registrations on {} ({} registered)", rt->opt_.socket, svc->list()["pods"].size());
  return rt;
}

PodsRuntime::~PodsRuntime() { srv_.reset(); }

Result<std::vector<std::string>> PodsRuntime::on_discovery(const json& inspect) {
  svc_->reap();
  if (opt_.cdi_dir.empty()) return std::vector<std::string>{};
  auto uverbs = uverbs_by_hca(opt_.sysfs_root);
  if (!uverbs) return uverbs.take_error();
  CdiOptions co;
  co.dev_root = opt_.dev_root;
  co.hook_path = opt_.hook_path;
  co.socket = opt_.socket;
  auto spec = build_cdi_spec(inspect, *uverbs, co);
  if (!spec) return spec.take_error();
  // Compared with the file on disk, not with what we wrote last: a spec
  // deleted or edited by hand is put back at the next pass.
  std::string text = spec->doc.dump(2);  // read_text_file strips the file's one trailing newline
  if (read_text_file(opt_.cdi_dir + "/" + cdi_spec_filename(), 1 << 20).value_or("") != text) {
    auto path = write_cdi_spec(opt_.cdi_dir, spec->doc);
    if (!path) return path.take_error();
    auto log = fa::logger("pods");
    log->info("CDI spec {} written ({} device nodes)", *path,
              spec->doc["devices"][0]["containerEdits"]["deviceNodes"].size());
    for (const auto& w : spec->warnings) log->warn("CDI spec: {}", w);
  }
  return spec->warnings;
}

}  // namespace fa::pods
