// SPDX-License-Identifier: Apache-2.0
// PATCH /v1/mesh's body as the daemon reads it: fa::parse_json, then
// parse_peer_changes, then with_changes on a running three-peer mesh.
// Checked: an accepted change leaves a mesh that parse_desired accepts as
// it is (with_changes promises the whole-document checks), removed peers
// are gone, changed ones hold what the change said, and the change as the
// journal writes it reads back as the same change.
#include <algorithm>

#include "common/json.hpp"
#include "fuzz/mesh_checks.hpp"

using nlohmann::json;
namespace ov = fa::overlay;

namespace {

const ov::ParseOptions kOpt;

const ov::DesiredMesh& base() {
  static const ov::DesiredMesh m = [] {
    auto r = ov::parse_desired(json::parse(R"({
      "cluster_id": "c1", "address": "10.42.0.1/24", "listen_port": 51820,
      "peers": [
        {"public_key": "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", "endpoint": "192.0.2.2:51820",
         "allowed_ips": ["10.42.0.2/32"]},
        {"public_key": "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=", "endpoint": "[2001:db8::3]:51820",
         "allowed_ips": ["10.42.0.3/32"], "persistent_keepalive": 25},
        {"public_key": "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=", "allowed_ips": ["10.42.0.4/32"]}]})"),
                              kOpt);
    if (!r.ok()) std::abort();
    return *r.value;
  }();
  return m;
}

// The journal's line for a change (agent/state.cpp writes this shape).
json journal_line(const ov::PeerChanges& c) {
  json peers = json::array(), remove = json::array();
  for (const auto& p : c.peers) peers.push_back(ov::to_json(p));
  for (const auto& k : c.remove) remove.push_back(ov::key_to_base64(k));
  return {{"cluster_id", c.cluster_id}, {"peers", std::move(peers)}, {"remove", std::move(remove)}};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  json doc = fa::parse_json(fa_fuzz::text(data, size));
  if (doc.is_discarded()) return 0;
  auto c = ov::parse_peer_changes(doc, kOpt);
  fa_fuzz::check_parsed(c);
  if (!c.ok()) return 0;

  auto again = ov::parse_peer_changes(json::parse(journal_line(*c.value).dump()), kOpt);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again.value->cluster_id == c.value->cluster_id);
  FUZZ_CHECK(again.value->peers == c.value->peers);
  FUZZ_CHECK(again.value->remove == c.value->remove);

  auto after = ov::with_changes(base(), *c.value, kOpt);
  fa_fuzz::check_parsed(after);
  if (!after.ok()) return 0;
  const ov::DesiredMesh& m = *after.value;
  fa_fuzz::check_mesh(m, kOpt);
  for (const auto& k : c.value->remove)
    FUZZ_CHECK(std::none_of(m.peers.begin(), m.peers.end(), [&](const ov::DesiredPeer& p) { return p.public_key == k; }));
  for (const auto& want : c.value->peers)
    FUZZ_CHECK(std::count(m.peers.begin(), m.peers.end(), want) == 1);
  return 0;
}
