// SPDX-License-Identifier: Apache-2.0
// The request handler as a pure function, and the core under it: routes,
// error shape, auth, ETag/304/long-poll decisions, generation rules, mesh
// serialisation, persisted state. The seams are small in-test classes that
// record what they were asked to do.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>
#include <vector>

#include "agent/api.hpp"
#include "agent/auth.hpp"
#include "agent/core.hpp"
#include "agent/state.hpp"
#include "../pods/ssh_keys.hpp"
#include "common/fs.hpp"
#include "overlay/overlay.hpp"
#include "probes/inspect.hpp"

using namespace fa::agent;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/fa-api-test-XXXXXX";
    path = mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
};

const std::string K1 = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=";
const std::string K2 = "HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=";
const std::string K3 = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=";
const std::string K4 = "3p7bfXt9wbTTW2HC7OQ1Nz+DQ8hbeGdNrfx+FG+IK08=";

std::string peer_json(const std::string& key, const std::string& ip, const std::string& endpoint = "") {
  return R"({"public_key":")" + key + R"(",)" + (endpoint.empty() ? "" : R"("endpoint":")" + endpoint + R"(",)") +
         R"("allowed_ips":[")" + ip + R"("]})";
}
std::string mesh_json(const std::string& cluster, const std::vector<std::string>& peers) {
  std::string out = R"({"cluster_id":")" + cluster + R"(","address":"10.42.0.1/24","peers":[)";
  for (size_t i = 0; i < peers.size(); ++i) out += (i ? "," : "") + peers[i];
  return out + "]}";
}

struct TestDiscovery : Discovery {
  std::shared_ptr<fa::probes::Report> report = [] {
    auto r = std::make_shared<fa::probes::Report>();
    r->fabric.kind = "roce";
    r->fabric.id = "p1/10.20.0.0/16";
    r->fabric.address = "10.20.0.11";
    r->gpus.model = "H100";
    r->gpudirect = {true, "dma-buf", "the open NVIDIA kernel module on kernel 6.1.0 (>= 5.12)"};
    return r;
  }();
  fa::Result<fa::probes::Report> discover() override { return *report; }
};

// Keeps what it was asked to bring up as the "interface"; apply sleeps so
// that overlapping calls would be seen.
struct TestMesh : MeshOps {
  std::shared_ptr<std::atomic<int>> in_flight = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> overlaps = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> applies = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::atomic<int>> peer_applies = std::make_shared<std::atomic<int>>(0);
  std::shared_ptr<std::optional<fa::overlay::DesiredMesh>> live =
      std::make_shared<std::optional<fa::overlay::DesiredMesh>>();
  std::shared_ptr<std::atomic<bool>> fail_apply = std::make_shared<std::atomic<bool>>(false);

  fa::Result<fa::overlay::ApplyResult> apply(const fa::overlay::DesiredMesh& m) override {
    if (*fail_apply) return fa::Error{"wireguard-go went away"};
    if (++*in_flight > 1) ++*overlaps;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ++*applies;
    fa::overlay::ApplyResult r;
    r.interface = m.interface;
    r.created = !live->has_value();
    r.device_changed = !live->has_value() || (*live)->peers != m.peers;
    *live = m;
    --*in_flight;
    return r;
  }
  fa::Result<fa::overlay::ApplyResult> apply_peers(const fa::overlay::DesiredMesh& m,
                                                   const fa::overlay::PeerChanges& c) override {
    if (*fail_apply) return fa::Error{"wireguard-go went away"};
    ++*peer_applies;
    auto after = fa::overlay::with_changes(m, c);
    if (!after.ok()) return fa::Error{after.errors.front().str()};
    fa::overlay::ApplyResult r;
    r.interface = m.interface;
    r.peers_updated = static_cast<int>(c.peers.size());
    r.peers_removed = static_cast<int>(c.remove.size());
    *live = *after.value;
    return r;
  }
  fa::Result<fa::overlay::Shown> show(const std::string& ifname, const std::optional<std::string>&) override {
    if (!live->has_value()) return fa::Error{"no such interface"};
    fa::overlay::Shown s;
    s.interface = ifname;
    for (const auto& p : (*live)->peers) {
      fa::overlay::Peer peer;
      peer.public_key = p.public_key;
      peer.allowed_ips = p.allowed_ips;
      s.device.peers.push_back(peer);
    }
    return s;
  }
  fa::Status down(const std::string&, const std::optional<std::string>&) override {
    if (++*in_flight > 1) ++*overlaps;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    live->reset();
    --*in_flight;
    return {};
  }
  fa::Result<std::string> ensure_key(const std::string&) override { return std::string("PUBKEY="); }
};

struct Fixture {
  TempDir dir;
  TestDiscovery* disc = nullptr;
  TestMesh* mesh = nullptr;
  std::unique_ptr<Core> core;
  std::unique_ptr<Api> api;

  explicit Fixture(bool with_mesh = true, std::function<void(fa::Config&)> tune = {}) {
    fa::Config cfg;
    cfg.state_dir = dir.path;
    if (tune) tune(cfg);
    auto d = std::make_unique<TestDiscovery>();
    disc = d.get();
    std::unique_ptr<TestMesh> m;
    if (with_mesh) {
      m = std::make_unique<TestMesh>();
      mesh = m.get();
    }
    core = std::make_unique<Core>(cfg, std::move(d), std::move(m));
    core->set_token(Token::from_secret("s3cret"));
    REQUIRE(core->start().ok());
    api = std::make_unique<Api>(*core);
  }

  Request req(http::verb v, const std::string& target, const std::string& body = "", bool auth = true) {
    Request r{v, target, 11};
    if (auth) r.set(http::field::authorization, "Bearer s3cret");
    if (!body.empty()) {
      r.set(http::field::content_type, "application/json");
      r.body() = body;
      r.prepare_payload();
    }
    return r;
  }

  // Runs the outcome to a response (Deferred work inline); LongPoll is returned as is.
  Outcome run(const Request& r, RequestContext ctx = {}) {
    Outcome o = api->handle(r, ctx);
    if (auto* d = std::get_if<Deferred>(&o)) return d->work();
    return o;
  }
  Response respond(const Request& r, RequestContext ctx = {}) {
    Outcome o = run(r, ctx);
    REQUIRE(std::holds_alternative<Response>(o));
    return std::get<Response>(o);
  }
};

fa::overlay::ParseOptions opts() { return {}; }

json error_of(const Response& r) {
  json d = json::parse(r.body());
  REQUIRE(d.contains("error"));
  return d["error"];
}

}  // namespace

TEST_CASE("healthz needs no token, everything else does", "[api]") {
  Fixture f;
  CHECK(f.respond(f.req(http::verb::get, "/healthz", "", false)).result_int() == 200);
  Response head = f.respond(f.req(http::verb::head, "/healthz", "", false));
  CHECK(head.result_int() == 200);
  CHECK(head.body().empty());
  CHECK(head[http::field::content_length] == "16");  // that of the GET
  for (const char* path : {"/v1/status", "/metrics", "/v1/mesh", "/v1/login", "/v1/pods", "/nope"}) {
    Response r = f.respond(f.req(http::verb::get, path, "", false));
    CHECK(r.result_int() == 401);
    CHECK(r[http::field::www_authenticate] == "Bearer realm=\"fabric-agent\"");
    CHECK(error_of(r)["code"] == "unauthorized");
    CHECK(error_of(r)["field"] == "Authorization");
  }
}

TEST_CASE("auth: wrong token 401 invalid_token, wrong scheme or header 401, client cert accepted", "[api]") {
  Fixture f;
  auto r = f.req(http::verb::get, "/v1/status", "", false);
  r.set(http::field::authorization, "Bearer s3cre");
  Response wrong = f.respond(r);
  CHECK(wrong.result_int() == 401);
  CHECK(error_of(wrong)["code"] == "invalid_token");
  CHECK(wrong[http::field::www_authenticate] == "Bearer realm=\"fabric-agent\", error=\"invalid_token\"");
  r.set(http::field::authorization, "Bearer s3cret ");  // trailing space tolerated, same token
  CHECK(f.respond(r).result_int() == 200);
  r.set(http::field::authorization, "bearer s3cret");  // scheme is case-insensitive
  CHECK(f.respond(r).result_int() == 200);
  r.set(http::field::authorization, "Basic s3cret");
  CHECK(f.respond(r).result_int() == 401);
  r.set(http::field::authorization, "s3cret");
  CHECK(f.respond(r).result_int() == 401);
  auto other = f.req(http::verb::get, "/v1/status", "", false);
  other.set("X-Auth-Token", "s3cret");
  CHECK(f.respond(other).result_int() == 401);
  auto q = f.req(http::verb::get, "/v1/status?token=s3cret", "", false);
  CHECK(f.respond(q).result_int() == 401);
  RequestContext cert;
  cert.client_cert_verified = true;
  CHECK(f.respond(f.req(http::verb::get, "/v1/status", "", false), cert).result_int() == 200);
}

TEST_CASE("status: ETag, 304, long-poll decision, bad wait", "[api]") {
  Fixture f;
  Response first = f.respond(f.req(http::verb::get, "/v1/status"));
  REQUIRE(first.result_int() == 200);
  std::string etag(first[http::field::etag]);
  CHECK(etag.rfind("W/\"", 0) == 0);
  json body = json::parse(first.body());
  CHECK(body["agent"]["generation"] == 1);
  CHECK(body["agent"]["version"] == FA_VERSION);
  struct utsname u {};
  REQUIRE(uname(&u) == 0);
  CHECK(body["agent"]["hostname"] == std::string(u.nodename));  // what `fabric-agent slurm` names the node by
  CHECK(body["inspect"]["fabric"]["id"] == "p1/10.20.0.0/16");
  CHECK(body["inspect"]["gpudirect"]["rdma"] == true);  // GPUDirect readiness reaches the control plane
  CHECK(body["inspect"]["gpudirect"]["via"] == "dma-buf");
  CHECK(body["mesh"]["public_key"] == "PUBKEY=");
  CHECK(body["mesh"]["endpoint"] == "10.20.0.11:51820");  // RoCE: the fabric address
  CHECK(body["mesh"]["state"] == "none");

  auto cond = f.req(http::verb::get, "/v1/status");
  cond.set(http::field::if_none_match, etag);
  Response nm = f.respond(cond);
  CHECK(nm.result_int() == 304);
  CHECK(nm.body().empty());
  CHECK(nm[http::field::etag] == etag);
  cond.set(http::field::if_none_match, etag.substr(2));  // strong form of the same tag matches too
  CHECK(f.respond(cond).result_int() == 304);
  cond.set(http::field::if_none_match, "\"other\", " + etag);
  CHECK(f.respond(cond).result_int() == 304);
  cond.set(http::field::if_none_match, "W/\"other\"");
  CHECK(f.respond(cond).result_int() == 200);

  auto wait = f.req(http::verb::get, "/v1/status?wait=1000");
  wait.set(http::field::if_none_match, etag);
  Outcome o = f.run(wait);
  REQUIRE(std::holds_alternative<LongPoll>(o));
  CHECK(std::get<LongPoll>(o).generation == 1);
  CHECK(std::get<LongPoll>(o).wait == std::chrono::seconds(300));  // capped at api.max_wait
  RequestContext second;
  second.allow_long_poll = false;
  CHECK(f.respond(wait, second).result_int() == 304);

  // Without If-None-Match there is nothing to wait for: answer now.
  CHECK(f.respond(f.req(http::verb::get, "/v1/status?wait=5")).result_int() == 200);

  for (const char* bad : {"/v1/status?wait=x", "/v1/status?wait=-1", "/v1/status?wait=", "/v1/status?foo=1"}) {
    Response r = f.respond(f.req(http::verb::get, bad));
    CHECK(r.result_int() == 400);
    CHECK(error_of(r)["code"] == "bad_request");
  }
}

TEST_CASE("generation moves only when the status changes", "[api]") {
  Fixture f;
  CHECK(f.core->snapshot()->generation == 1);
  f.core->refresh();
  f.core->refresh();
  CHECK(f.core->snapshot()->generation == 1);
  // Counters change constantly; they must not move the generation.
  fa::probes::Hca hca;
  hca.name = "mlx5_0";
  hca.ports.emplace_back();
  hca.ports[0].port = 1;
  hca.ports[0].state = "ACTIVE";
  hca.ports[0].phys_state = "LinkUp";
  hca.ports[0].link_layer = "Ethernet";
  hca.ports[0].counters["port_xmit_data"] = 5;
  f.disc->report->hcas = {hca};
  f.core->refresh();
  CHECK(f.core->snapshot()->generation == 2);
  f.disc->report->hcas[0].ports[0].counters["port_xmit_data"] = 99;
  f.core->refresh();
  CHECK(f.core->snapshot()->generation == 2);
  // What /metrics reads has them.
  CHECK(f.core->inspect_document()->dump().find("\"port_xmit_data\":99") != std::string::npos);
  f.disc->report->fabric.id = "p1/10.30.0.0/16";
  int woken = 0;
  uint64_t id = f.core->subscribe([&] { ++woken; });
  f.core->refresh();
  f.core->unsubscribe(id);
  CHECK(f.core->snapshot()->generation == 3);
  CHECK(woken == 1);
}

TEST_CASE("a body nested deeper than 64 levels is refused before anything reads it", "[api]") {
  // 150000 levels under "peers" (~0.3 MB, under the 1 MiB body limit): the
  // validator echoes a misplaced value with dump(), which recursed once per
  // level and overflowed the stack (the daemon died) before bodies were
  // bounded in depth.
  Fixture f;
  std::string deep = R"({"cluster_id":"c-1","peers":{"a":)";
  for (int i = 0; i < 150000; ++i) deep += "[";
  for (int i = 0; i < 150000; ++i) deep += "]";
  deep += "}}";
  Response r = f.respond(f.req(http::verb::put, "/v1/mesh", deep));
  CHECK(r.result_int() == 400);
  CHECK(error_of(r)["code"] == "malformed_json");
  CHECK(error_of(r)["message"] == "the request body nests arrays and objects deeper than 64 levels");
  CHECK(*f.mesh->applies == 0);
  // Shallow enough, the same misplaced value is an ordinary 422.
  Response shallow = f.respond(
      f.req(http::verb::put, "/v1/mesh", R"({"cluster_id":"c-1","address":"10.42.0.1/24","peers":{"a":[[[]]]}})"));
  CHECK(shallow.result_int() == 422);
  CHECK(error_of(shallow)["field"] == "peers");
}

TEST_CASE("mesh: 415, 400, 422 with field, 200, idempotent, 409, delete", "[api]") {
  Fixture f;
  auto put = [&](const std::string& body) { return f.req(http::verb::put, "/v1/mesh", body); };

  auto wrong_type = put("{}");
  wrong_type.set(http::field::content_type, "text/plain");
  Response r415 = f.respond(wrong_type);
  CHECK(r415.result_int() == 415);
  CHECK(error_of(r415)["field"] == "Content-Type");

  Response r400 = f.respond(put("{\"cluster_id\": "));
  CHECK(r400.result_int() == 400);
  CHECK(error_of(r400)["code"] == "malformed_json");
  CHECK(error_of(r400)["message"] ==
        "the request body is not valid JSON (it ends after 15 bytes, in the middle of a value)");
  auto nothing = put("");
  nothing.set(http::field::content_type, "application/json");
  Response empty = f.respond(nothing);
  CHECK(empty.result_int() == 400);
  CHECK(error_of(empty)["message"] == "the request body is empty; expected a JSON document");
  CHECK(error_of(f.respond(put(" \r\n")))["message"] ==
        "the request body is empty; expected a JSON document");
  Response junk = f.respond(put(R"({"cluster_id": x})"));
  CHECK(error_of(junk)["message"] == "the request body is not valid JSON (at byte 16 of 17)");
  Response huge = f.respond(put(R"({"cluster_id":"c-1","listen_port":5e820})"));
  CHECK(huge.result_int() == 400);
  CHECK(error_of(huge)["message"] == "the request body holds a number no double can hold");

  Response r422 = f.respond(put("{\"peers\": 3}"));
  CHECK(r422.result_int() == 422);
  CHECK(error_of(r422)["code"] == "validation_failed");
  CHECK(error_of(r422)["field"] == "cluster_id");
  CHECK(error_of(r422)["details"].size() == 3);  // cluster_id, address, peers
  CHECK(f.respond(put("[1,2]")).result_int() == 422);
  CHECK(*f.mesh->applies == 0);  // nothing applied for an invalid document

  const std::string good = R"({"cluster_id":"c-1","address":"10.42.0.1/24","peers":[]})";
  uint64_t g0 = f.core->snapshot()->generation;
  Response ok = f.respond(put(good));
  CHECK(ok.result_int() == 200);
  CHECK(json::parse(ok.body())["cluster_id"] == "c-1");
  uint64_t g1 = f.core->snapshot()->generation;
  CHECK(g1 == g0 + 1);
  CHECK(f.respond(put(good)).result_int() == 200);
  CHECK(f.core->snapshot()->generation == g1);  // same document: same status

  // Persisted, with the agent's key file filled in.
  auto st = load_state(f.dir.path, opts());
  REQUIRE(st.ok());
  REQUIRE(st->state.mesh);
  CHECK(st->state.mesh->cluster_id == "c-1");
  CHECK(st->state.mesh->private_key_file == f.dir.path + "/wg.key");
  struct stat sb {};
  REQUIRE(::stat((f.dir.path + "/state.json").c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);

  // A failed apply leaves the persisted state as it was (the new one is
  // written before the apply, and written back when it fails).
  *f.mesh->fail_apply = true;
  Response failed = f.respond(put(mesh_json("c-1", {peer_json(K1, "10.42.0.2/32")})));
  CHECK(failed.result_int() == 500);
  CHECK(error_of(failed)["code"] == "apply_failed");
  *f.mesh->fail_apply = false;
  auto kept = load_state(f.dir.path, opts());
  REQUIRE(kept.ok());
  CHECK(kept->state.mesh == st->state.mesh);
  // Nor is the status made for it while it ran published.
  CHECK(f.core->snapshot()->generation == g1);
  CHECK(json::parse(f.respond(f.req(http::verb::get, "/v1/status")).body())["mesh"]["peers"].empty());

  Response conflict = f.respond(put(mesh_json("c-2", {})));
  CHECK(conflict.result_int() == 409);
  CHECK(error_of(conflict)["field"] == "cluster_id");

  json status = json::parse(f.respond(f.req(http::verb::get, "/v1/status")).body());
  CHECK(status["mesh"]["state"] == "up");
  CHECK(status["mesh"]["cluster_id"] == "c-1");

  // The status published after an apply shows the mesh just applied.
  const std::string two =
      mesh_json("c-1", {peer_json(K1, "10.42.0.2/32", "192.0.2.1:51820"), peer_json(K2, "10.42.0.3/32")});
  REQUIRE(f.respond(put(two)).result_int() == 200);
  status = json::parse(f.respond(f.req(http::verb::get, "/v1/status")).body());
  REQUIRE(status["mesh"]["peers"].size() == 2);
  CHECK(status["mesh"]["peers"][0]["public_key"] == K1);
  CHECK(status["mesh"]["peers"][0]["endpoint"] == "192.0.2.1:51820");
  CHECK(status["mesh"]["peers"][1]["endpoint"].is_null());
  CHECK(f.core->snapshot()->generation > g1);

  Response del = f.respond(f.req(http::verb::delete_, "/v1/mesh"));
  CHECK(del.result_int() == 200);
  CHECK(json::parse(del.body())["removed"] == true);
  Response del2 = f.respond(f.req(http::verb::delete_, "/v1/mesh"));
  CHECK(del2.result_int() == 200);
  CHECK(json::parse(del2.body())["removed"] == false);
  CHECK(f.respond(put(mesh_json("c-2", {}))).result_int() == 200);
}

TEST_CASE("mesh: a null private_key_file is the agent's key, as an absent one", "[api]") {
  Fixture f;
  Response ok =
      f.respond(f.req(http::verb::put, "/v1/mesh",
                      R"({"cluster_id":"c-1","address":"10.42.0.1/24","private_key_file":null,"peers":[]})"));
  CHECK(ok.result_int() == 200);
  auto st = load_state(f.dir.path, opts());
  REQUIRE(st.ok());
  REQUIRE(st->state.mesh);
  CHECK(st->state.mesh->private_key_file == f.dir.path + "/wg.key");
}

TEST_CASE("mesh: PATCH changes some peers of the running mesh and persists the result", "[api]") {
  Fixture f;
  auto patch = [&](const std::string& body) { return f.respond(f.req(http::verb::patch, "/v1/mesh", body)); };
  Response none = patch(R"({"cluster_id":"c-1","peers":[]})");
  CHECK(none.result_int() == 409);
  CHECK(error_of(none)["message"] == "this node has no mesh: PUT /v1/mesh first");

  REQUIRE(f.respond(f.req(http::verb::put, "/v1/mesh",
                          mesh_json("c-1", {peer_json(K1, "10.42.0.2/32"), peer_json(K2, "10.42.0.3/32")})))
              .result_int() == 200);
  const uint64_t g = f.core->snapshot()->generation;
  CHECK(error_of(patch(R"({"cluster_id":"c-2","peers":[]})"))["field"] == "cluster_id");

  // One peer moves, one joins, one goes.
  Response ok = patch(R"({"cluster_id":"c-1","peers":[)" + peer_json(K1, "10.42.0.2/32", "192.0.2.9:51820") + "," +
                      peer_json(K3, "10.42.0.4/32") + R"(],"remove":[")" + K2 + R"("]})");
  INFO(ok.body());
  REQUIRE(ok.result_int() == 200);
  CHECK(*f.mesh->peer_applies == 1);
  CHECK(json::parse(ok.body())["cluster_id"] == "c-1");
  CHECK(f.core->snapshot()->generation == g + 1);
  auto st = load_state(f.dir.path, opts());
  REQUIRE(st.ok());
  REQUIRE(st->state.mesh);
  REQUIRE(st->state.mesh->peers.size() == 2);
  CHECK(fa::overlay::key_to_base64(st->state.mesh->peers[0].public_key) == K1);  // in its place
  CHECK(st->state.mesh->peers[0].endpoint->str() == "192.0.2.9:51820");
  CHECK(fa::overlay::key_to_base64(st->state.mesh->peers[1].public_key) == K3);
  json status = json::parse(f.respond(f.req(http::verb::get, "/v1/status")).body());
  CHECK(status["mesh"]["peers"].size() == 2);

  // An allowed IP another peer holds: 422 naming both, nothing sent or persisted.
  Response dup = patch(R"({"cluster_id":"c-1","peers":[)" + peer_json(K4, "10.42.0.4/32") + "]}");
  CHECK(dup.result_int() == 422);
  CHECK(error_of(dup)["field"] == "peers[0].allowed_ips[0]");
  CHECK(error_of(dup)["message"] == "peers[0].allowed_ips[0]: `10.42.0.4/32': duplicate: already routed to the "
                                    "mesh's peer " + K3 + "; one node per address");
  Response both = patch(R"({"cluster_id":"c-1","peers":[)" + peer_json(K4, "10.42.0.5/32") + R"(],"remove":[")" +
                        K4 + R"("]})");
  CHECK(error_of(both)["field"] == "remove[0]");
  CHECK(*f.mesh->peer_applies == 1);
  CHECK(load_state(f.dir.path, opts())->state == st->state);

  // A failed send leaves the persisted state and the status as they were.
  *f.mesh->fail_apply = true;
  Response failed = patch(R"({"cluster_id":"c-1","remove":[")" + K1 + R"("]})");
  CHECK(failed.result_int() == 500);
  *f.mesh->fail_apply = false;
  CHECK(load_state(f.dir.path, opts())->state == st->state);
  CHECK(f.core->snapshot()->generation == g + 1);
}

TEST_CASE("mesh: the API opens no path but a namespace and a key file where they belong", "[api]") {
  Fixture f;
  auto put = [&](const std::string& extra) {
    return f.respond(f.req(http::verb::put, "/v1/mesh",
                           R"({"cluster_id":"c-1","address":"10.42.0.1/24",)" + extra + R"(,"peers":[]})"));
  };
  const struct {
    std::string extra, field;
  } refused[] = {
      {R"("netns":"/dev/watchdog")", "netns"},
      {R"("netns":"/tmp/fifo")", "netns"},
      {R"("netns":"/run/netns/../../dev/watchdog")", "netns"},
      {R"("netns":"/proc/1/ns/mnt")", "netns"},
      {R"("private_key_file":"/etc/shadow")", "private_key_file"},
      {R"("private_key_file":"/dev/watchdog")", "private_key_file"},
      {R"("private_key_file":")" + f.dir.path + R"(/../x")", "private_key_file"},
  };
  for (const auto& r : refused) {
    INFO(r.extra);
    Response res = put(r.extra);
    CHECK(res.result_int() == 422);
    CHECK(error_of(res)["field"] == r.field);
  }
  CHECK(*f.mesh->applies == 0);
  CHECK_FALSE(fs::exists(f.dir.path + "/state.json"));
  CHECK(put(R"("netns":"/proc/12/ns/net")").result_int() == 200);
  CHECK(f.mesh->live->value().netns == "/proc/12/ns/net");
}

TEST_CASE("mesh: a document without interface or port takes the configured ones", "[api]") {
  Fixture f(true, [](fa::Config& c) {
    c.overlay.interface = "fab0";
    c.overlay.listen_port = 51999;
  });
  REQUIRE(f.respond(f.req(http::verb::put, "/v1/mesh", mesh_json("c-1", {}))).result_int() == 200);
  REQUIRE(f.mesh->live->has_value());
  CHECK(f.mesh->live->value().interface == "fab0");
  CHECK(f.mesh->live->value().listen_port == 51999);
}

// The status text is assembled from parts; it must be exactly what one
// document of it would serialise to, whatever state the mesh is in.
TEST_CASE("status: the text is the serialisation of its own document", "[api]") {
  Fixture f;
  auto status_text = [&] {
    Response r = f.respond(f.req(http::verb::get, "/v1/status"));
    REQUIRE(r.result_int() == 200);
    return r.body();
  };
  // The agent block is render_status's own (made per request); the rest is
  // the generation's cached text.
  auto same = [](const std::string& text) {
    json doc = json::parse(text);
    json rest = doc;
    rest.erase("agent");
    const size_t at = text.find(",\"health\":");
    REQUIRE(at != std::string::npos);
    CHECK(text.substr(at + 1) == rest.dump().substr(1));
    return doc;
  };
  json none = same(status_text());
  CHECK(none["mesh"]["state"] == "none");
  CHECK_FALSE(none["mesh"].contains("peers"));

  const std::string three =
      R"({"cluster_id":"c-1","address":"10.42.0.1/24","peers":[)"
      R"({"public_key":")" + K1 + R"(","endpoint":"192.0.2.1:51820","allowed_ips":["10.42.0.2/32","10.42.0.64/26"]},)"
      R"({"public_key":")" + K2 + R"(","allowed_ips":["10.42.0.3/32"],"persistent_keepalive":25},)"
      R"({"public_key":")" + K3 + R"(","endpoint":"[2001:db8::1]:51820","allowed_ips":[]}]})";
  REQUIRE(f.respond(f.req(http::verb::put, "/v1/mesh", three)).result_int() == 200);
  json up = same(status_text());
  CHECK(up["mesh"]["state"] == "up");
  REQUIRE(up["mesh"]["peers"].size() == 3);
  CHECK(up["mesh"]["peers"][0] == json{{"public_key", K1},
                                       {"endpoint", "192.0.2.1:51820"},
                                       {"allowed_ips", {"10.42.0.2/32", "10.42.0.64/26"}}});
  CHECK(up["mesh"]["peers"][1] ==
        json{{"public_key", K2}, {"endpoint", nullptr}, {"allowed_ips", {"10.42.0.3/32"}}});
  CHECK(up["mesh"]["peers"][2]["endpoint"] == "[2001:db8::1]:51820");
  CHECK(up["mesh"]["cluster_id"] == "c-1");

  // The interface gone: a refresh brings it back; when it cannot, the mesh
  // block says so, with the error.
  f.mesh->live->reset();
  f.core->refresh();
  json absent = same(status_text());
  CHECK(absent["mesh"]["state"] == "up");
  CHECK(f.mesh->live->has_value());
  *f.mesh->fail_apply = true;
  f.mesh->live->reset();
  f.core->refresh();
  absent = same(status_text());
  CHECK(absent["mesh"]["state"] == "absent");
  CHECK(absent["mesh"]["error"] == "wireguard-go went away");
  CHECK(absent["mesh"]["peers"].size() == 3);
  *f.mesh->fail_apply = false;

  REQUIRE(f.respond(f.req(http::verb::put, "/v1/mesh",
                          R"({"cluster_id":"c-1","address":"10.42.0.1/24","peers":[]})"))
              .result_int() == 200);
  json empty = same(status_text());
  CHECK(empty["mesh"]["peers"] == json::array());
}

TEST_CASE("mesh operations never interleave", "[api]") {
  Fixture f;
  std::vector<std::thread> ts;
  std::atomic<int> ok{0};
  // No CHECK or REQUIRE on these threads: Catch2's assertions are not
  // thread-safe. Each counts its 200s; the main thread checks the sum.
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      for (int k = 0; k < 5; ++k) {
        Outcome o = (i % 2 == 0)
                        ? f.run(f.req(http::verb::put, "/v1/mesh", mesh_json("c-1", {})))
                        : f.run(f.req(http::verb::delete_, "/v1/mesh"));
        if (auto* r = std::get_if<Response>(&o); r && r->result_int() == 200) ++ok;
      }
    });
  for (auto& t : ts) t.join();
  CHECK(ok == 40);
  CHECK(*f.mesh->overlaps == 0);
}

TEST_CASE("bytes that are not UTF-8 in a path, a query or a Content-Type are echoed replaced, not fatal", "[api]") {
  // Each of these threw from dump() on the I/O thread and ended the daemon.
  Fixture f;
  Response path = f.respond(f.req(http::verb::get, "/v1/st\xffus"));
  CHECK(path.result_int() == 404);
  CHECK(json::parse(path.body())["error"]["message"] == "no such endpoint: /v1/st\xef\xbf\xbdus");
  CHECK(f.respond(f.req(http::verb::get, "/v1/status?\xfe=1")).result_int() == 400);
  CHECK(f.respond(f.req(http::verb::get, "/v1/status?wait=\xfe")).result_int() == 400);
  auto ct = f.req(http::verb::put, "/v1/mesh", "{}");
  ct.set(http::field::content_type, "application/\xc3");
  CHECK(f.respond(ct).result_int() == 415);
  // A field's value in a 422 too.
  Response value = f.respond(f.req(http::verb::put, "/v1/mesh", "{\"cluster_id\":[\"\\udcff\"],\"x\":1}"));
  CHECK(value.result_int() >= 400);
}

TEST_CASE("media types are case-insensitive and take parameters", "[api]") {
  Fixture f;
  for (const char* type : {"APPLICATION/JSON", "Application/Json; charset=utf-8", " application/json ;charset=UTF-8"}) {
    INFO(type);
    auto r = f.req(http::verb::put, "/v1/mesh", mesh_json("c-1", {}));
    r.set(http::field::content_type, type);
    CHECK(f.respond(r).result_int() == 200);
  }
  auto r = f.req(http::verb::put, "/v1/mesh", mesh_json("c-1", {}));
  r.set(http::field::content_type, "application/jsonx");
  CHECK(f.respond(r).result_int() == 415);
}

TEST_CASE("other errors: 404, 405 with Allow, 503 without a module", "[api]") {
  Fixture f;
  Response r404 = f.respond(f.req(http::verb::get, "/v2/status"));
  CHECK(r404.result_int() == 404);
  CHECK(error_of(r404)["code"] == "not_found");
  Response r405 = f.respond(f.req(http::verb::post, "/v1/status"));
  CHECK(r405.result_int() == 405);
  CHECK(r405[http::field::allow] == "GET");
  CHECK(f.respond(f.req(http::verb::delete_, "/healthz")).result_int() == 405);
  Response mesh405 = f.respond(f.req(http::verb::post, "/v1/mesh"));
  CHECK(mesh405.result_int() == 405);
  CHECK(mesh405[http::field::allow] == "GET, PUT, PATCH, DELETE");
  CHECK(f.respond(f.req(http::verb::get, "/v1/probes/rdma/run")).result_int() == 405);

  Fixture bare(false);
  Response r503 = bare.respond(bare.req(http::verb::get, "/v1/mesh"));
  CHECK(r503.result_int() == 503);
  CHECK(error_of(r503)["code"] == "unavailable");
}

TEST_CASE("pods and metrics answer", "[api]") {
  Fixture f;
  Response pods = f.respond(f.req(http::verb::get, "/v1/pods"));
  CHECK(pods.result_int() == 200);
  CHECK(json::parse(pods.body())["pods"] == json::array());
  Response m = f.respond(f.req(http::verb::get, "/metrics"));
  CHECK(m.result_int() == 200);
  CHECK(std::string(m[http::field::content_type]).rfind("text/plain; version=0.0.4", 0) == 0);
  CHECK(m.body().find("fabric_agent_build_info{version=\"" FA_VERSION "\"} 1\n") != std::string::npos);
}

TEST_CASE("state: round trip, a corrupt or mistyped file is moved aside", "[state]") {
  TempDir d;
  PersistedState s;
  auto m = fa::overlay::parse_desired(json::parse(mesh_json("c-9", {peer_json(K1, "10.42.0.2/32")})));
  REQUIRE(m.ok());
  s.mesh = *m.value;
  REQUIRE(save_state(d.path, s).ok());
  auto back = load_state(d.path, opts());
  REQUIRE(back.ok());
  CHECK(back->state == s);
  CHECK(back->moved_aside.empty());

  std::ofstream(d.path + "/state.json") << "{\"version\": 1, \"mesh\": [tru";
  auto bad = load_state(d.path, opts());
  REQUIRE(bad.ok());
  CHECK_FALSE(bad->state.mesh);
  CHECK(bad->problem == "not valid JSON");
  CHECK(bad->moved_aside.rfind(d.path + "/state.json.corrupt-", 0) == 0);
  CHECK(fs::exists(bad->moved_aside));
  CHECK_FALSE(fs::exists(d.path + "/state.json"));

  // Valid JSON of the wrong types is as unusable as broken JSON.
  std::ofstream(d.path + "/state.json") << R"({"version": 1, "mesh": {"cluster_id": 5, "address": "10.42.0.1/24"}})";
  auto typed = load_state(d.path, opts());
  REQUIRE(typed.ok());
  CHECK_FALSE(typed->state.mesh);
  CHECK(typed->problem == "mesh: cluster_id: `5': expected a string");
  CHECK_FALSE(typed->moved_aside.empty());

  // A write cut short by a crash left its temporary: removed at load.
  std::ofstream(d.path + "/state.json.tmp.a1B2c3") << "{";
  REQUIRE(load_state(d.path, opts()).ok());
  CHECK_FALSE(fs::exists(d.path + "/state.json.tmp.a1B2c3"));

  CHECK(parse_state("{\"version\":2}", opts()).error().message == "version is not 1");
  CHECK(parse_state("{\"version\":1,\"mesh\":[]}", opts()).error().message ==
        "mesh: the mesh document must be a mapping/object");
}

TEST_CASE("state: peer changes are journalled, replayed, folded into the snapshot, never replayed twice",
          "[state]") {
  TempDir d;
  auto mesh = fa::overlay::parse_desired(json::parse(mesh_json("c-9", {peer_json(K1, "10.42.0.2/32")})));
  REQUIRE(mesh.ok());
  auto change = [](const std::string& body) {
    auto c = fa::overlay::parse_peer_changes(json::parse(body));
    REQUIRE(c.ok());
    return *c.value;
  };
  StateStore st(d.path, opts());
  REQUIRE(st.load().ok());
  REQUIRE(st.save(PersistedState{*mesh.value, std::nullopt}).ok());
  fa::overlay::DesiredMesh m = *mesh.value;
  auto step = [&](const std::string& body) {
    auto c = change(body);
    auto after = fa::overlay::with_changes(m, c);
    REQUIRE(after.ok());
    REQUIRE(st.append(c, *after.value).ok());
    m = *after.value;
  };
  const std::string snapshot = fa::read_text_file(d.path + "/state.json").value();
  step(R"({"cluster_id":"c-9","peers":[)" + peer_json(K2, "10.42.0.3/32") + "]}");
  step(R"({"cluster_id":"c-9","peers":[)" + peer_json(K1, "10.42.0.2/32", "192.0.2.7:51820") + "]}");
  step(R"({"cluster_id":"c-9","remove":[")" + K2 + R"("]})");
  CHECK(fa::read_text_file(d.path + "/state.json").value() == snapshot);  // appended, not rewritten
  auto back = load_state(d.path, opts());
  REQUIRE(back.ok());
  REQUIRE(back->state.mesh);
  CHECK(*back->state.mesh == m);

  // A last line cut by a crash is dropped, and the next change goes after
  // the last whole one.
  std::ofstream(d.path + "/state.journal", std::ios::app) << R"({"cluster_id":"c-9","peers":[{"public_k)";
  StateStore again(d.path, opts());
  auto cut = again.load();
  REQUIRE(cut.ok());
  CHECK(cut->moved_aside.empty());
  CHECK(*cut->state.mesh == m);
  st = std::move(again);
  step(R"({"cluster_id":"c-9","peers":[)" + peer_json(K3, "10.42.0.4/32") + "]}");
  back = load_state(d.path, opts());
  REQUIRE(back.ok());
  CHECK(back->moved_aside.empty());
  CHECK(*back->state.mesh == m);

  // Folded into a new snapshot once it outgrows it: then no longer replayed.
  for (int i = 0; i < 400; ++i)
    step(R"({"cluster_id":"c-9","peers":[)" +
         peer_json(K4, "10.42.0.5/32", "192.0.2." + std::to_string(i % 200 + 1) + ":51820") + "]}");
  CHECK(fa::read_text_file(d.path + "/state.json").value() != snapshot);
  CHECK(fs::file_size(d.path + "/state.journal") < 70 * 1024);
  back = load_state(d.path, opts());
  REQUIRE(back.ok());
  CHECK(*back->state.mesh == m);

  // A journal left from an older snapshot (a crash between the new
  // state.json and the journal's removal) is ignored and removed.
  const std::string journal = fa::read_text_file(d.path + "/state.journal").value_or("");
  REQUIRE(st.save(PersistedState{m, std::nullopt}).ok());
  std::ofstream(d.path + "/state.journal") << journal << "\n";
  back = load_state(d.path, opts());
  REQUIRE(back.ok());
  CHECK(*back->state.mesh == m);
  CHECK_FALSE(fs::exists(d.path + "/state.journal"));

  // A damaged line in the middle: the state is unusable, both files go aside.
  REQUIRE(StateStore(d.path, opts()).load().ok());
  StateStore last(d.path, opts());
  REQUIRE(last.load().ok());
  st = std::move(last);
  step(R"({"cluster_id":"c-9","remove":[")" + K4 + R"("]})");
  step(R"({"cluster_id":"c-9","remove":[")" + K3 + R"("]})");
  std::string text = fa::read_text_file(d.path + "/state.journal").value();
  text[text.find("remove") + 2] = '#';
  std::ofstream(d.path + "/state.journal") << text << "\n";
  auto bad = load_state(d.path, opts());
  REQUIRE(bad.ok());
  CHECK_FALSE(bad->state.mesh);
  CHECK_FALSE(bad->moved_aside.empty());
  CHECK_FALSE(fs::exists(d.path + "/state.journal"));
}

TEST_CASE("token: created 0600, group-readable refused, constant-time compare by value", "[auth]") {
  TempDir d;
  const std::string path = d.path + "/token";
  auto t = load_or_create_token(path, true);
  REQUIRE(t.ok());
  CHECK(t->created);
  struct stat sb {};
  REQUIRE(::stat(path.c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);
  auto secret = read_token_secret(path);
  REQUIRE(secret.ok());
  CHECK(secret->size() == 64);
  CHECK(t->token.matches(*secret));
  CHECK_FALSE(t->token.matches(secret->substr(1)));
  CHECK_FALSE(t->token.matches(*secret + "0"));
  std::string flipped = *secret;
  flipped[37] = flipped[37] == 'a' ? 'b' : 'a';  // same length, one digit off
  CHECK_FALSE(t->token.matches(flipped));
  CHECK_FALSE(Token().matches(""));
  CHECK(check_bearer(t->token, "Bearer " + *secret) == AuthResult::Ok);
  CHECK(check_bearer(t->token, "Bearer x") == AuthResult::Wrong);
  CHECK(check_bearer(t->token, "Bearer ") == AuthResult::Missing);
  CHECK(check_bearer(t->token, "") == AuthResult::Missing);

  auto again = load_or_create_token(path, true);
  REQUIRE(again.ok());
  CHECK_FALSE(again->created);
  CHECK(again->token.matches(*secret));

  ::chmod(path.c_str(), 0640);
  auto loose = load_or_create_token(path, true);
  REQUIRE_FALSE(loose.ok());
  CHECK(loose.error().message == "token file " + path + " has mode 0640; accepted: no access for group and others (chmod 0600)");

  auto missing = load_or_create_token(d.path + "/named-token", false);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "token file " + d.path + "/named-token: No such file or directory");
}

TEST_CASE("rdma probe endpoints: validation, serve state, a failed run is an answer", "[api][rdma]") {
  Fixture f;
  auto post = [&](const std::string& path, const std::string& body) {
    return f.respond(f.req(http::verb::post, path, body));
  };
  Response no_peer = post("/v1/probes/rdma/run", R"({"hca":"mlx5_0:1","gid_index":3})");
  CHECK(no_peer.result_int() == 422);
  CHECK(error_of(no_peer)["field"] == "peer");
  Response bad_size = post("/v1/probes/rdma/run", R"({"peer":"127.0.0.1","hca":"mlx5_0:1","gid_index":3,"size":"huge","key":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})");
  CHECK(bad_size.result_int() == 422);
  CHECK(error_of(bad_size)["field"] == "size");
  Response typo = post("/v1/probes/rdma/run", R"({"peer":"127.0.0.1","gid_idx":3})");
  CHECK(typo.result_int() == 422);
  CHECK(error_of(typo)["field"] == "gid_idx");
  Response bad_gid = post("/v1/probes/rdma/serve", R"({"hca":"mlx5_0:1","gid_index":999,"key":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})");
  CHECK(bad_gid.result_int() == 422);
  CHECK(error_of(bad_gid)["field"] == "gid_index");

  Response status = f.respond(f.req(http::verb::get, "/v1/probes/rdma/serve"));
  CHECK(status.result_int() == 200);
  CHECK(json::parse(status.body())["serving"] == false);
  // No such device on this machine: the listener cannot start, and says why.
  Response nodev = post("/v1/probes/rdma/serve", R"({"hca":"nodev_9:1","gid_index":0,"port":0,"key":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})");
  CHECK(nodev.result_int() == 422);
  CHECK(error_of(nodev)["message"].get<std::string>().find("nodev_9") != std::string::npos);
  Response stop = f.respond(f.req(http::verb::delete_, "/v1/probes/rdma/serve"));
  CHECK(stop.result_int() == 200);
  CHECK(json::parse(stop.body())["stopped"] == false);

  Outcome o = f.api->handle(
      f.req(http::verb::post, "/v1/probes/rdma/run", R"({"peer":"127.0.0.1:1","hca":"nodev_9:1","gid_index":0,"key":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})"), {});
  REQUIRE(std::holds_alternative<Deferred>(o));
  CHECK(std::get<Deferred>(o).long_running);
  Response failed = std::get<Deferred>(o).work();
  INFO(failed.body());
  CHECK(failed.result_int() == 200);
  CHECK(json::parse(failed.body())["status"] == "failed");
  CHECK(f.respond(f.req(http::verb::get, "/v1/probes/rdma/run")).result_int() == 405);

  // The probe key is required on both ends and is never echoed, whether it
  // is malformed or sent under a misspelt name.
  const std::string secret = "s3cret-but-short";
  for (const auto& [path, body, field] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"/v1/probes/rdma/serve", R"({"hca":"nodev_9:1","gid_index":0})", "key"},
           {"/v1/probes/rdma/run", R"({"peer":"127.0.0.1:1","hca":"nodev_9:1","gid_index":0})", "key"},
           {"/v1/probes/rdma/serve", R"({"hca":"nodev_9:1","gid_index":0,"key":")" + secret + R"("})", "key"},
           {"/v1/probes/rdma/run", R"({"peer":"127.0.0.1:1","key":")" + secret + R"("})", "key"},
           {"/v1/probes/rdma/run", R"({"peer":"127.0.0.1:1","key":5})", "key"},
           {"/v1/probes/rdma/serve", R"({"kye":")" + secret + R"("})", "kye"}}) {
    INFO(path << " " << body);
    Response r = post(path, body);
    CHECK(r.result_int() == 422);
    CHECK(error_of(r)["field"] == field);
    CHECK(r.body().find(secret) == std::string::npos);
  }
}

TEST_CASE("scorecard: a run's result is in the status at once, on disk, and after a restart", "[api][rdma]") {
  TempDir keep;
  auto tune = [&](fa::Config& c) { c.state_dir = keep.path; };
  const std::string run = R"({"peer":"127.0.0.1:1","hca":"nodev_9:1","gid_index":0,"key":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})";
  {
    Fixture f(true, tune);
    json before = json::parse(f.respond(f.req(http::verb::get, "/v1/status")).body());
    CHECK(before["scorecard"]["results"].empty());
    Response r = f.respond(f.req(http::verb::post, "/v1/probes/rdma/run", run));
    REQUIRE(r.result_int() == 200);
    json after = json::parse(f.respond(f.req(http::verb::get, "/v1/status")).body());
    CHECK(after["agent"]["generation"].get<uint64_t>() > before["agent"]["generation"].get<uint64_t>());
    REQUIRE(after["scorecard"]["results"].size() == 1);
    json e = after["scorecard"]["results"][0];
    CHECK(e["peer"] == "127.0.0.1");
    CHECK(e["rail"] == "nodev_9:1");
    CHECK(e["status"] == "failed");
    CHECK(e["reason"] == json::parse(r.body())["reason"]);
    CHECK(e["measured_unix"].get<long long>() > 0);
    // The key is not kept.
    CHECK(after.dump().find("aaaaaaaa") == std::string::npos);
    CHECK(fa::read_text_file(keep.path + "/scorecard.json")->find("aaaaaaaa") == std::string::npos);
    std::string m = f.respond(f.req(http::verb::get, "/metrics")).body();
    CHECK(m.find("fabric_agent_rail_status{peer=\"127.0.0.1\",rail=\"nodev_9:1\"} 0") != std::string::npos);
  }
  Fixture again(true, tune);
  json st = json::parse(again.respond(again.req(http::verb::get, "/v1/status")).body());
  REQUIRE(st["scorecard"]["results"].size() == 1);
  CHECK(st["scorecard"]["results"][0]["rail"] == "nodev_9:1");
}

TEST_CASE("ssh login: PUT /v1/login keeps the material 0600 with the mesh, never shows a private key, goes with DELETE /v1/mesh",
          "[api]") {
  fa_test::SshKeys k;
  Fixture f;
  const std::string secret = k.text("host").substr(40, 24), user_secret = k.text("user").substr(40, 24);
  auto put = [&](const json& doc) { return f.respond(f.req(http::verb::put, "/v1/login", doc.dump())); };
  const std::string file = f.dir.path + "/login.json";

  // No mesh yet: the material is for the mesh's cluster.
  Response none = put(k.doc());
  CHECK(none.result_int() == 409);
  CHECK(error_of(none)["field"] == "cluster_id");
  REQUIRE(f.respond(f.req(http::verb::put, "/v1/mesh", R"({"cluster_id":"c-1","address":"10.42.0.1/24","peers":[]})"))
              .result_int() == 200);
  json other = k.doc();
  other["cluster_id"] = "c-2";
  CHECK(put(other).result_int() == 409);

  // Invalid: 422 naming the field, the private key not echoed, nothing kept.
  json bad = k.doc();
  bad["user_key"] = k.text("host");
  bad["host_certificate"] = k.cert("otherip");
  Response r422 = put(bad);
  CHECK(r422.result_int() == 422);
  json e = error_of(r422);
  CHECK(e["details"].size() == 2);
  CHECK(e["field"] == "user_key");
  CHECK(e["details"][0]["value"] == "(not shown)");
  CHECK(e["details"][1]["field"] == "host_certificate");
  CHECK(r422.body().find(secret) == std::string::npos);
  CHECK_FALSE(fs::exists(file));

  Response ok = put(k.doc());
  REQUIRE(ok.result_int() == 200);
  json view = json::parse(ok.body());
  CHECK(view["hosts"] == "10.42.0.*");
  CHECK(view["principals"] == json::array({"10.42.0.1"}));
  CHECK(view["ca_fingerprint"].get<std::string>().rfind("SHA256:", 0) == 0);
  CHECK(ok.body().find(secret) == std::string::npos);
  CHECK(ok.body().find(user_secret) == std::string::npos);
  Response got = f.respond(f.req(http::verb::get, "/v1/login"));
  CHECK(json::parse(got.body())["login"]["user_public_key"] == view["user_public_key"]);
  CHECK(got.body().find(secret) == std::string::npos);
  CHECK(f.respond(f.req(http::verb::get, "/v1/status")).body().find(secret) == std::string::npos);
  struct stat sb {};
  REQUIRE(::stat(file.c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);
  // What the hook gets: every field, the pattern.
  auto held = f.core->login_held();
  REQUIRE(held);
  CHECK((*held)["host_key"].get<std::string>().find(secret) != std::string::npos);
  CHECK((*held)["hosts"] == "10.42.0.*");

  // A restart keeps it with its mesh.
  f.core.reset();
  {
    fa::Config cfg;
    cfg.state_dir = f.dir.path;
    f.core = std::make_unique<Core>(cfg, std::make_unique<TestDiscovery>(), std::make_unique<TestMesh>());
    f.core->set_token(Token::from_secret("s3cret"));
    REQUIRE(f.core->start().ok());
    f.api = std::make_unique<Api>(*f.core);
  }
  CHECK(f.core->login_held().has_value());

  // The mesh goes: so does the material.
  REQUIRE(f.respond(f.req(http::verb::delete_, "/v1/mesh")).result_int() == 200);
  CHECK_FALSE(fs::exists(file));
  CHECK(json::parse(f.respond(f.req(http::verb::get, "/v1/login")).body())["login"].is_null());
  CHECK_FALSE(f.core->login_held().has_value());
  CHECK(json::parse(f.respond(f.req(http::verb::delete_, "/v1/login")).body())["removed"] == false);
  CHECK(f.respond(f.req(http::verb::patch, "/v1/login", "{}")).result_int() == 405);
}
