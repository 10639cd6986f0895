// SPDX-License-Identifier: Apache-2.0
// The daemon's request handling without sockets, for the api and http
// harnesses: a Core on small in-process seams (a fixed discovery report, a
// mesh kept in memory) that starts from a persisted three-peer mesh in a
// directory of its own, and Api::handle run as the server runs it
// (Deferred work on the spot, a long-poll answered at once as if its wait
// had passed). Each input starts from that state: a new Core whenever the
// previous input changed anything a Core keeps (its status generation, the
// mesh it applied, a file in its directory), the same Core otherwise (only
// its request counters in /metrics go on counting). Starting a Core is most
// of what an input costs, and most inputs change nothing.
//
// Not run: the RDMA probe's POST/DELETE work (it opens a listener or runs
// verbs); its body is still read as the handler reads it.
//
// Checked on every answer: a status the server can send; a JSON body that
// parses, an error body with a code; 401 with WWW-Authenticate; the answer
// serialises; nothing but /healthz answers without the token, and the token
// is never in an answer unless the client put it somewhere besides
// Authorization (sent_elsewhere).
#pragma once

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/beast/http/write.hpp>
#include <nlohmann/json.hpp>

#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include "agent/api.hpp"
#include "agent/core.hpp"
#include "agent/state.hpp"
#include "common/fs.hpp"
#include "fuzz/fuzz.hpp"

namespace fa_fuzz {

namespace http = boost::beast::http;
namespace ag = fa::agent;
namespace ov = fa::overlay;
using nlohmann::json;

inline constexpr std::string_view kToken = "9f2c4e1a7b3d5f60";

struct FixedDiscovery : ag::Discovery {
  fa::Result<fa::probes::Report> discover() override {
    fa::probes::Report r;
    r.fabric.kind = "roce";
    r.fabric.id = "roce:p1:10.20.0.0/16";
    r.fabric.address = "10.20.0.11";
    r.fabric.ports = {"mlx5_0:1"};
    r.gpus.vendor = "nvidia";
    r.gpus.model = "H100 SXM5 80GB";
    return r;
  }
};

// The interface as the last apply left it.
struct MemoryMesh : ag::MeshOps {
  std::optional<ov::DesiredMesh> live;
  int changes = 0;  // applies and downs

  fa::Result<ov::ApplyResult> apply(const ov::DesiredMesh& m) override {
    ov::ApplyResult r;
    r.interface = m.interface;
    r.created = !live;
    r.device_changed = !live || live->peers != m.peers;
    live = m;
    ++changes;
    return r;
  }
  fa::Result<ov::ApplyResult> apply_peers(const ov::DesiredMesh& m, const ov::PeerChanges& c) override {
    auto after = ov::with_changes(m, c);
    if (!after.ok()) return fa::Error{after.errors.front().str()};
    ov::ApplyResult r;
    r.interface = m.interface;
    r.peers_updated = static_cast<int>(c.peers.size());
    r.peers_removed = static_cast<int>(c.remove.size());
    live = *after.value;
    ++changes;
    return r;
  }
  fa::Result<ov::Shown> show(const std::string& ifname, const std::optional<std::string>&) override {
    if (!live) return fa::Error{"no interface " + ifname};
    ov::Shown s;
    s.interface = ifname;
    s.address = live->address;
    s.mtu = live->mtu.value_or(1420);
    s.up = true;
    s.device.listen_port = live->listen_port;
    for (const auto& p : live->peers) {
      ov::Peer peer;
      peer.public_key = p.public_key;
      peer.endpoint = p.endpoint;
      peer.allowed_ips = p.allowed_ips;
      peer.persistent_keepalive = p.persistent_keepalive;
      s.device.peers.push_back(peer);
    }
    return s;
  }
  fa::Status down(const std::string&, const std::optional<std::string>&) override {
    live.reset();
    ++changes;
    return {};
  }
  fa::Result<std::string> ensure_key(const std::string&) override {
    return std::string("mGzvCOgvTzVbvEZr2YvtkX8hhHd5kdRAsOCEbydXmHs=");
  }
};

class ApiFixture {
 public:
  ApiFixture() {
    std::string t = (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/fa-fuzz-api-XXXXXX");
    if (!::mkdtemp(t.data())) std::abort();
    dir_ = t;
    auto m = ov::parse_desired(json::parse(R"({
      "cluster_id": "c1", "address": "10.42.0.1/24",
      "peers": [
        {"public_key": "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", "endpoint": "192.0.2.2:51820",
         "allowed_ips": ["10.42.0.2/32"]},
        {"public_key": "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=", "endpoint": "[2001:db8::3]:51820",
         "allowed_ips": ["10.42.0.3/32"], "persistent_keepalive": 25}]})"));
    if (!m.ok()) std::abort();
    state_ = ag::dump_state(ag::PersistedState{*m.value, std::nullopt}, 1);
  }

  // The next input's Core: started from the persisted mesh, new unless the
  // last one is as it started.
  void begin() {
    if (!core_ || fingerprint() != started_) return reset();
    // A change the fingerprint missed would show here first.
    FUZZ_CHECK(mesh_text() == started_mesh_);
  }

  // A Core started from the persisted mesh, in a directory emptied first.
  void reset() {
    api_.reset();
    core_.reset();
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d))
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          ::unlink((dir_ + "/" + e->d_name).c_str());
      ::closedir(d);
    }
    if (!fa::write_file_atomic(dir_ + "/state.json", state_, 0600).ok()) std::abort();
    fa::Config cfg;
    cfg.state_dir = dir_;
    auto mesh = std::make_unique<MemoryMesh>();
    mesh_ = mesh.get();
    core_ = std::make_unique<ag::Core>(cfg, std::make_unique<FixedDiscovery>(), std::move(mesh));
    core_->set_token(ag::Token::from_secret(kToken));
    if (!core_->start().ok()) std::abort();
    api_ = std::make_unique<ag::Api>(*core_);
    started_ = fingerprint();
    started_mesh_ = mesh_text();
  }

  // One request, answered as the server answers it.
  ag::Response serve(const ag::Request& req) {
    ag::RequestContext ctx;
    ag::Outcome o = api_->handle(req, ctx);
    if (std::holds_alternative<ag::LongPoll>(o)) {
      ctx.allow_long_poll = false;
      o = api_->handle(req, ctx);
      FUZZ_CHECK(!std::holds_alternative<ag::LongPoll>(o));
    }
    if (auto* d = std::get_if<ag::Deferred>(&o)) {
      if (d->long_running) return ag::Api::error(503, "not_run", "", "", req.version(), req.keep_alive());
      o = d->work();
    }
    ag::Response res = std::move(std::get<ag::Response>(o));
    check(req, res);
    return res;
  }

 private:
  // What a request can change of a Core: the status generation, the applies
  // and downs of its mesh, and each file of its directory (written whole
  // into a new inode, or removed).
  std::string fingerprint() const {
    std::string f = std::to_string(core_->snapshot()->generation) + ' ' + std::to_string(mesh_->changes);
    if (DIR* d = ::opendir(dir_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
        struct stat st {};
        if (::stat((dir_ + "/" + e->d_name).c_str(), &st) != 0) continue;
        f += ' ' + std::string(e->d_name) + ':' + std::to_string(st.st_ino) + ':' + std::to_string(st.st_size) + ':' +
             std::to_string(st.st_mtim.tv_sec) + '.' + std::to_string(st.st_mtim.tv_nsec);
      }
      ::closedir(d);
    }
    return f;
  }

  std::string mesh_text() const {
    ag::ApiResult r = core_->get_mesh();
    const json* doc = std::get_if<json>(&r);
    return doc ? doc->dump() : "failure: " + std::get<ag::ApiFailure>(r).code;
  }

  static std::string_view sv(boost::beast::string_view v) { return {v.data(), v.size()}; }

  // Whether the client wrote the token's text anywhere but in Authorization:
  // in the method, the target, a header's name, another header's value or
  // the body; as sent, or as an answer's JSON writes it (a control byte
  // before it becomes \u00XX, whose last digit can start the token).
  static bool sent_elsewhere(const ag::Request& req) {
    auto holds = [](std::string_view s) {
      return s.find(kToken) != std::string_view::npos ||
             json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace).find(kToken) != std::string::npos;
    };
    if (holds(sv(req.method_string())) || holds(sv(req.target())) || holds(req.body())) return true;
    for (const auto& f : req)
      if (holds(sv(f.name_string())) || (f.name() != http::field::authorization && holds(sv(f.value())))) return true;
    return false;
  }

  static void check(const ag::Request& req, ag::Response& res) {
    const int status = res.result_int();
    FUZZ_CHECK(status >= 200 && status <= 599);
    const std::string_view path = sv(req.target()).substr(0, sv(req.target()).find('?'));
    if (path != "/healthz") {
      // Authentication comes first: without the token nothing else answers.
      if (status != 401) FUZZ_CHECK(sv(req[http::field::authorization]).find(kToken) != std::string_view::npos);
    }
    if (status == 401) FUZZ_CHECK(!res[http::field::www_authenticate].empty());
    const std::string& body = res.body();
    if (sv(res[http::field::content_type]) == "application/json" && !body.empty()) {
      json doc = json::parse(body, nullptr, false);
      FUZZ_CHECK(!doc.is_discarded());
      if (status >= 400) FUZZ_CHECK(doc["error"]["code"].is_string());
    }
    if (body.find(kToken) != std::string::npos) FUZZ_CHECK(sent_elsewhere(req));
    std::ostringstream wire;
    wire << res;
    FUZZ_CHECK(wire.str().size() >= body.size());
  }

  std::string dir_;
  std::string state_;
  std::string started_;       // fingerprint() of the Core as it started
  std::string started_mesh_;  // and its GET /v1/mesh
  MemoryMesh* mesh_ = nullptr;
  std::unique_ptr<ag::Core> core_;
  std::unique_ptr<ag::Api> api_;
};

}  // namespace fa_fuzz
