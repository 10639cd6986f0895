// SPDX-License-Identifier: Apache-2.0
// Production implementations of the seams in seams.hpp, over probes/ and
// overlay/: thin adapters, no logic of their own beyond the agent's key file.
#include <sys/stat.h>

#include <optional>

#include "agent/seams.hpp"
#include "common/fs.hpp"
#include "common/secure.hpp"

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
    discard();
    // The device is read while the document is validated, as `mesh apply`
    // does while it parses: a one-peer change in a 250-peer mesh spends
    // ~0.35 ms less in apply() (1.4-1.6 -> 1.0-1.2 ms here). apply() uses
    // the read only if the interface turns out to be that one, here (on
    // the kernel backend a thread reads it, see overlay::EarlyGet).
    overlay::EarlyGet early;
    if (doc.is_object() && !doc.contains("netns"))
      if (auto it = doc.find("interface"); it != doc.end() && it->is_string())
        early = overlay::EarlyGet::start(it->get_ref<const std::string&>(), apply_opt_.uapi_dir,
                                         apply_opt_.backend);
    overlay::ParseOptions po;
    po.overlay_cidr = cidr_;
    auto r = overlay::parse_desired(doc, po);
    return verdict(std::move(r), std::move(early));
  }

  std::optional<MeshValidation> validate_text(std::string_view text, const std::string& key_file) override {
    discard();
    // As validate(), the device is read meanwhile: from the moment the
    // interface's name is read (a document that turns out to name a netns
    // leaves the read unused, as `mesh apply` does).
    overlay::EarlyGet early;
    overlay::ParseOptions po;
    po.overlay_cidr = cidr_;
    po.on_interface = [&](const std::string& name) {
      early = overlay::EarlyGet::start(name, apply_opt_.uapi_dir, apply_opt_.backend);
    };
    auto r = overlay::parse_desired_json_sax(text, po);
    if (!r) return std::nullopt;
    if (r->ok() && !r->mesh->private_key_file) r->mesh->private_key_file = key_file;
    return verdict(std::move(*r), std::move(early));
  }

  void discard() override { last_.reset(); }

  Result<nlohmann::json> apply(const nlohmann::json& canonical, uint64_t validated,
                               const std::function<void()>& while_waiting) override {
    overlay::ApplyOptions o = apply_opt_;
    o.while_waiting = while_waiting;
    if (last_ && validated != 0 && last_->token == validated) {
      o.early_get = &last_->early;
      auto out = overlay::apply(last_->mesh, o);
      last_.reset();
      return out;
    }
    discard();
    overlay::ParseOptions po;
    po.overlay_cidr = cidr_;
    auto r = overlay::parse_desired(canonical, po);
    if (!r.ok()) return Error{"persisted mesh no longer valid: " + (r.errors.empty() ? std::string() : r.errors[0].str())};
    return overlay::apply(*r.mesh, o);
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
      if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
        secure_wipe(text->data(), text->size());
        return Error{"private key file " + path + " is readable by group or others; accepted: mode 0600"};
      }
      auto k = overlay::key_from_file_text(*text);
      if (!k) return Error{"private key file " + path + ": " + k.error().message};
      auto pub = overlay::public_key_of(*k);
      overlay::wipe(*k);
      if (!pub) return pub.take_error();
      return overlay::key_to_base64(*pub);
    }
    if (text.error().sys_errno != ENOENT) return text.take_error();
    auto k = overlay::generate_private_key();
    if (!k) return k.take_error();
    std::string b64 = overlay::key_to_base64(*k) + "\n";
    auto pub = overlay::public_key_of(*k);
    overlay::wipe(*k);
    Status w = write_file_atomic(path, b64, 0600);
    secure_wipe(b64.data(), b64.size());
    if (!w) return w.take_error();
    if (!pub) return pub.take_error();
    return overlay::key_to_base64(*pub);
  }

 private:
  // The answer of either validation. A valid document: its canonical form,
  // and its parsed form kept for the apply() of the same document, which
  // then does not parse it a second time; the token says which document
  // that is (no copy of it to compare).
  MeshValidation verdict(overlay::ParseResult r, overlay::EarlyGet early) {
    MeshValidation v;
    if (r.ok()) {
      overlay::DesiredMesh& m = *r.mesh;
      if (!m.mtu) m.mtu = default_mtu_;
      v.canonical = overlay::to_json(m);
      v.token = ++tokens_;
      last_ = Validated{v.token, std::move(m), std::move(early)};
    }
    for (const auto& e : r.errors) v.errors.push_back({e.field, e.value, e.message});
    return v;
  }
  struct Validated {
    uint64_t token;
    overlay::DesiredMesh mesh;
    overlay::EarlyGet early;  // may be empty
  };
  std::optional<Validated> last_;  // Core serialises validate() and apply()
  uint64_t tokens_ = 0;
  std::string cidr_;
  overlay::ApplyOptions apply_opt_;
  uint32_t default_mtu_ = 1420;
};
}  // namespace

std::unique_ptr<MeshOps> make_mesh_ops(const Config& cfg) { return std::make_unique<OverlayMesh>(cfg); }

}  // namespace fa::agent
