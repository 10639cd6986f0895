// SPDX-License-Identifier: Apache-2.0
// Production implementations of the seams in seams.hpp, over probes/ and
// overlay/: thin adapters, no logic of their own beyond the agent's key file.
#include <sys/stat.h>

#include "agent/seams.hpp"
#include "common/fs.hpp"

#include "overlay/overlay.hpp"
#include "probes/cli.hpp"
#include "probes/inspect.hpp"

namespace fa::agent {

namespace {
class ProbesDiscovery final : public Discovery {
 public:
  explicit ProbesDiscovery(const Config& c) : opt_(probes::options_from_config(c)) {}
  Result<nlohmann::json> discover() override { return probes::to_json(probes::discover(opt_)); }

 private:
  probes::InspectOptions opt_;
};
}  // namespace

std::unique_ptr<Discovery> make_discovery(const Config& cfg) { return std::make_unique<ProbesDiscovery>(cfg); }

namespace {
class OverlayMesh final : public MeshOps {
 public:
  explicit OverlayMesh(const Config& c) : cidr_(c.overlay.cidr) {
    auto b = overlay::parse_backend(c.overlay.backend);
    if (b) apply_opt_.backend = *b;
    if (c.overlay.mtu > 0) default_mtu_ = static_cast<uint32_t>(c.overlay.mtu);
  }

  MeshValidation validate(const nlohmann::json& doc) override {
    overlay::ParseOptions po;
    po.overlay_cidr = cidr_;
    auto r = overlay::parse_desired(doc, po);
    MeshValidation v;
    if (r.ok()) {
      if (!r.mesh->mtu) r.mesh->mtu = default_mtu_;
      v.canonical = overlay::to_json(*r.mesh);
    }
    for (const auto& e : r.errors) v.errors.push_back({e.field, e.value, e.message});
    return v;
  }

  Result<nlohmann::json> apply(const nlohmann::json& canonical) override {
    auto r = overlay::parse_desired(canonical, overlay::ParseOptions{cidr_});
    if (!r.ok()) return Error{"persisted mesh no longer valid: " + (r.errors.empty() ? std::string() : r.errors[0].str())};
    return overlay::apply(*r.mesh, apply_opt_);
  }

  Result<nlohmann::json> show(const std::string& ifname, const std::optional<std::string>& netns) override {
    overlay::ShowOptions so;
    so.netns = netns;
    return overlay::show(ifname, so);
  }

  Status down(const std::string& ifname, const std::optional<std::string>& netns) override {
    overlay::DownOptions d;
    d.netns = netns;
    return overlay::down(ifname, d);
  }

  Result<std::string> ensure_key(const std::string& path) override {
    auto text = read_text_file(path, 4096);
    if (text) {
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0)
        return Error{"private key file " + path + " is readable by group or others; accepted: mode 0600"};
      std::string s = *text;
      while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
      auto k = overlay::key_from_base64(s);
      if (!k) return Error{"private key file " + path + ": " + k.error().message};
      auto pub = overlay::public_key_of(*k);
      overlay::wipe(*k);
      if (!pub) return pub.take_error();
      return overlay::key_to_base64(*pub);
    }
    if (text.error().sys_errno != ENOENT) return text.take_error();
    auto k = overlay::generate_private_key();
    if (!k) return k.take_error();
    std::string b64 = overlay::key_to_base64(*k);
    auto pub = overlay::public_key_of(*k);
    overlay::wipe(*k);
    Status w = write_file_atomic(path, b64 + "\n", 0600);
    std::fill(b64.begin(), b64.end(), '\0');
    if (!w) return w.take_error();
    if (!pub) return pub.take_error();
    return overlay::key_to_base64(*pub);
  }

 private:
  std::string cidr_;
  overlay::ApplyOptions apply_opt_;
  uint32_t default_mtu_ = 1420;
};
}  // namespace

std::unique_ptr<MeshOps> make_mesh_ops(const Config& cfg) { return std::make_unique<OverlayMesh>(cfg); }

}  // namespace fa::agent
