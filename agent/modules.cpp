// SPDX-License-Identifier: Apache-2.0
// Production implementations of the seams in seams.hpp, over probes/ and
// overlay/: thin adapters, no logic of their own beyond the agent's key file.
#include <sys/stat.h>

#include "agent/seams.hpp"
#include "common/fs.hpp"
#include "common/secure.hpp"
#include "probes/cli.hpp"

namespace fa::agent {

namespace {

class ProbesDiscovery final : public Discovery {
 public:
  explicit ProbesDiscovery(const Config& c) : opt_(probes::options_from_config(c)) {}
  Result<probes::Report> discover() override { return probes::discover(opt_); }

 private:
  probes::InspectOptions opt_;
};

class OverlayMesh final : public MeshOps {
 public:
  explicit OverlayMesh(const Config& c) {
    if (auto b = overlay::parse_backend(c.overlay.backend)) opt_.backend = *b;
  }

  Result<overlay::ApplyResult> apply(const overlay::DesiredMesh& m) override { return overlay::apply(m, opt_); }

  Result<overlay::ApplyResult> apply_peers(const overlay::DesiredMesh& m,
                                           const overlay::PeerChanges& changes) override {
    return overlay::apply_peers(m, changes, opt_);
  }

  Result<overlay::Shown> show(const std::string& ifname, const std::optional<std::string>& netns) override {
    overlay::ShowOptions so;
    so.netns = netns;
    so.uapi_dir = opt_.uapi_dir;
    return overlay::show(ifname, so);
  }

  Status down(const std::string& ifname, const std::optional<std::string>& netns) override {
    overlay::DownOptions d;
    d.netns = netns;
    d.uapi_dir = opt_.uapi_dir;
    d.state_dir = opt_.state_dir;
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
  overlay::ApplyOptions opt_;
};

}  // namespace

std::unique_ptr<Discovery> make_discovery(const Config& cfg) { return std::make_unique<ProbesDiscovery>(cfg); }
std::unique_ptr<MeshOps> make_mesh_ops(const Config& cfg) { return std::make_unique<OverlayMesh>(cfg); }

}  // namespace fa::agent
