// SPDX-License-Identifier: Apache-2.0
// The real daemon on loopback (ephemeral ports), driven by real clients:
// curl and the Beast client in agent/client.cpp. Covers auth, every error
// code, the body limit, slow clients, 304 and long-poll, TLS and mutual TLS,
// signals, state recovery and `promtool check metrics` on live output.
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>

#include <ctime>
#include <future>
#include <nlohmann/json.hpp>

#include "agent/client.hpp"
#include "common/fs.hpp"
#include "agent_process.hpp"

using namespace fa::test;
using fa::agent::ClientOptions;
using fa::agent::http_request;
using fa::agent::parse_url;
using nlohmann::json;

namespace {

// Without assertions: what a test's other thread may call (Catch2's
// assertions are not thread-safe).
fa::Result<fa::agent::HttpReply> request(const AgentProcess& a, const std::string& method,
                                         const std::string& target, const std::string& body = "",
                                         std::map<std::string, std::string> headers = {}, bool auth = true) {
  ClientOptions o;
  if (auth) o.token = a.token();
  o.headers = std::move(headers);
  o.timeout = std::chrono::seconds(30);
  return http_request(*parse_url(a.url()), method, target, body, o);
}

fa::agent::HttpReply call(const AgentProcess& a, const std::string& method, const std::string& target,
                          const std::string& body = "", std::map<std::string, std::string> headers = {},
                          bool auth = true) {
  auto r = request(a, method, target, body, std::move(headers), auth);
  REQUIRE(r.ok());
  return *r;
}

std::string code_of(const fa::agent::HttpReply& r) { return json::parse(r.body)["error"]["code"]; }

int connect_loopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  return fd;
}

}  // namespace

TEST_CASE("server: auth with curl: none, wrong, wrong header, right", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  const std::string u = a.url();
  auto curl = [&](const std::string& args) {
    return sh("curl -s -o /dev/null -w '%{http_code}' " + args + " " + u + "/v1/status");
  };
  CHECK(curl("") == "401");
  CHECK(curl("-H 'Authorization: Bearer nope'") == "401");
  CHECK(curl("-H 'X-Auth-Token: " + a.token() + "'") == "401");
  CHECK(curl("-H 'Authorization: " + a.token() + "'") == "401");
  CHECK(curl("-H 'Authorization: Bearer " + a.token() + "'") == "200");
  CHECK(sh("curl -s -o /dev/null -w '%{http_code}' " + u + "/healthz") == "200");
  // The token never reaches the log.
  CHECK(a.log().find(a.token()) == std::string::npos);
  CHECK(a.log().find("created a bearer token in " + d.path + "/state/token (mode 0600)") != std::string::npos);
}

TEST_CASE("server: each error code over the wire", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  CHECK(call(a, "GET", "/v1/status", "", {}, false).status == 401);
  CHECK(call(a, "GET", "/nope").status == 404);
  auto r405 = call(a, "POST", "/v1/status", "{}");
  CHECK(r405.status == 405);
  CHECK(r405.headers["allow"] == "GET");
  CHECK(code_of(r405) == "method_not_allowed");
  auto r415 = call(a, "PUT", "/v1/mesh", "{}", {{"Content-Type", "text/yaml"}});
  CHECK(r415.status == 415);
  auto r400 = call(a, "PUT", "/v1/mesh", "{not json");
  CHECK(r400.status == 400);
  CHECK(code_of(r400) == "malformed_json");
  auto r422 = call(a, "PUT", "/v1/mesh", R"({"cluster_id": 7})");
  CHECK(r422.status == 422);
  CHECK(json::parse(r422.body)["error"]["field"] == "cluster_id");
  auto r400q = call(a, "GET", "/v1/status?wait=abc");
  CHECK(r400q.status == 400);
  CHECK(json::parse(r400q.body)["error"]["field"] == "wait");
}

TEST_CASE("server: body over 1 MiB is 413 and the connection closes", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  std::string big(1024 * 1024 + 1, ' ');
  big[0] = '{';
  auto r = call(a, "PUT", "/v1/mesh", big);
  CHECK(r.status == 413);
  CHECK(code_of(r) == "payload_too_large");
  // Exactly 1 MiB is read and judged on its content.
  std::string edge(1024 * 1024, ' ');
  edge[0] = '[';
  edge[edge.size() - 1] = ']';
  CHECK(call(a, "PUT", "/v1/mesh", edge).status == 422);
  // Far over the limit: the server reads and drops the rest (lingering
  // close) instead of resetting the connection under a client that writes
  // the whole body before reading (ours does), which would then lose the 413
  // to EPIPE.
  std::string huge(8 * 1024 * 1024, ' ');
  huge[0] = '{';
  auto rh = call(a, "PUT", "/v1/mesh", huge);
  CHECK(rh.status == 413);
  // curl too.
  std::string file = d.path + "/big.json";
  std::ofstream(file) << big;
  CHECK(sh("curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' -H 'Authorization: Bearer " +
           a.token() + "' --data-binary @" + file + " " + a.url() + "/v1/mesh") == "413");
}

TEST_CASE("server: a client dribbling headers is cut off by the read timeout", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "api: {read_timeout: 1s}\n");
  int fd = connect_loopback(a.port());
  const std::string head = "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(200, 'a') + "\r\n\r\n";
  // One byte every 100 ms would take 24 s; the server must close long before.
  bool closed = false;
  size_t sent = 0;
  for (; sent < head.size(); ++sent) {
    if (::send(fd, &head[sent], 1, MSG_NOSIGNAL) != 1) {
      closed = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char c;
      ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) {
        closed = true;
        break;
      }
      FAIL("the server answered a request that never completed");
    }
  }
  ::close(fd);
  CHECK(closed);
  CHECK(sent < head.size());
  // And it still serves others.
  CHECK(call(a, "GET", "/healthz", "", {}, false).status == 200);
}

TEST_CASE("server: HEAD /healthz sends no body, so the next response on the connection is intact", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  int fd = connect_loopback(a.port());
  const std::string req =
      "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  // Two responses; the body only once, at the very end (the GET's).
  auto second = got.find("HTTP/1.1 200", 1);
  REQUIRE(got.rfind("HTTP/1.1 200", 0) == 0);
  REQUIRE(second != std::string::npos);
  CHECK(got.find("{\"status\":\"ok\"}") == got.size() - 16);  // {"status":"ok"}\n
  CHECK(got.substr(0, second).find("{\"status\"") == std::string::npos);
}

TEST_CASE("server: an idle kept-alive connection is closed", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "api: {idle_timeout: 1s, read_timeout: 5s}\n");
  int fd = connect_loopback(a.port());
  const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<size_t>(n)).rfind("HTTP/1.1 200", 0) == 0);
  // Now idle: the server closes the connection (recv returns 0).
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 15000) == 1);
  CHECK(::recv(fd, buf, sizeof buf, 0) == 0);
  ::close(fd);
}

TEST_CASE("server: 304 and long-poll", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  auto first = call(a, "GET", "/v1/status");
  REQUIRE(first.status == 200);
  const std::string etag = first.headers["etag"];
  REQUIRE_FALSE(etag.empty());
  auto again = call(a, "GET", "/v1/status", "", {{"If-None-Match", etag}});
  CHECK(again.status == 304);
  CHECK(again.body.empty());

  // Unchanged: the long-poll runs out and answers 304.
  auto waited = call(a, "GET", "/v1/status?wait=1", "", {{"If-None-Match", etag}});
  CHECK(waited.status == 304);

  // A change during the wait (SIGHUP with a new public address moves the
  // advertised endpoint) ends it early with 200 and a new ETag.
  auto poll = std::async(std::launch::async, [&] {
    return request(a, "GET", "/v1/status?wait=120", "", {{"If-None-Match", etag}});
  });
  REQUIRE(poll.wait_for(std::chrono::milliseconds(500)) == std::future_status::timeout);  // it is waiting
  std::ofstream(a.config_path(), std::ios::app) << "overlay: {public_address: 192.0.2.7}\n";
  a.signal(SIGHUP);
  REQUIRE(poll.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  auto got = poll.get();
  REQUIRE(got.ok());
  auto changed = *got;
  CHECK(changed.status == 200);
  CHECK(changed.headers["etag"] != etag);
  CHECK(json::parse(changed.body)["mesh"]["endpoint"] == "192.0.2.7:51820");
  CHECK(json::parse(changed.body)["agent"]["generation"].get<int>() > 1);
}

TEST_CASE("server: a change answers every waiting long-poll, many more than are woken at once, on kept-alive connections",
          "[server]") {
  // The server answers woken long-polls a window at a time: a woken one
  // gives its turn back once its answer is written. A turn never given back
  // would leave every long-poll past the window waiting until its wait ends.
  TempDir d;
  AgentProcess a(d.path, "");
  auto first = call(a, "GET", "/v1/status");
  REQUIRE(first.status == 200);
  const std::string etag = first.headers["etag"];
  const std::string req = "GET /v1/status?wait=120 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + a.token() +
                          "\r\nIf-None-Match: " + etag + "\r\n\r\n";
  constexpr int kPolls = 80;
  std::vector<int> fds;
  for (int i = 0; i < kPolls; ++i) {
    fds.push_back(connect_loopback(a.port()));
    REQUIRE(::send(fds.back(), req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()));
  }
  // Every one is waiting: nothing to read yet.
  std::vector<pollfd> pfds;
  for (int fd : fds) pfds.push_back({fd, POLLIN, 0});
  REQUIRE(::poll(pfds.data(), pfds.size(), 500) == 0);
  std::ofstream(a.config_path(), std::ios::app) << "overlay: {public_address: 192.0.2.9}\n";
  a.signal(SIGHUP);
  // Each reads its answer's head (the connection stays open).
  std::vector<std::string> heads(kPolls);
  int complete = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (complete < kPolls && std::chrono::steady_clock::now() < deadline) {
    for (auto& p : pfds) p.revents = 0;
    if (::poll(pfds.data(), pfds.size(), 200) <= 0) continue;
    for (int i = 0; i < kPolls; ++i) {
      if (!(pfds[i].revents & POLLIN) || heads[i].find("\r\n\r\n") != std::string::npos) continue;
      char buf[4096];
      ssize_t n = ::recv(fds[i], buf, sizeof buf, 0);
      if (n <= 0) {
        pfds[i].fd = -1;  // closed: counted as not answered
        continue;
      }
      heads[i].append(buf, static_cast<size_t>(n));
      if (heads[i].find("\r\n\r\n") != std::string::npos) {
        ++complete;
        pfds[i].fd = -1;
      }
    }
  }
  for (int fd : fds) ::close(fd);
  CHECK(complete == kPolls);
  int ok = 0;
  for (const auto& h : heads)
    if (h.rfind("HTTP/1.1 200", 0) == 0 && h.find("Connection: close") == std::string::npos) ++ok;
  CHECK(ok == kPolls);
}

TEST_CASE("server: SIGTERM while long-polls wait: each gets its answer with Connection: close, exit 0", "[server]") {
  // The control plane long-polls by design: every systemctl restart and
  // package upgrade stops the daemon with a wait pending. The wait ends with
  // an answer (the status is unchanged: 304), not a dropped connection.
  TempDir d;
  AgentProcess a(d.path, "");
  auto first = call(a, "GET", "/v1/status");
  REQUIRE(first.status == 200);
  const std::string etag = first.headers["etag"];
  std::vector<std::future<fa::Result<fa::agent::HttpReply>>> polls;
  for (int i = 0; i < 3; ++i)
    polls.push_back(std::async(std::launch::async, [&] {
      return request(a, "GET", "/v1/status?wait=120", "", {{"If-None-Match", etag}});
    }));
  auto with_curl = std::async(std::launch::async, [&] {
    return sh("curl -s -D - -o /dev/null -H 'Authorization: Bearer " + a.token() + "' -H 'If-None-Match: " + etag +
              "' '" + a.url() + "/v1/status?wait=120'; echo \"curl_rc=$?\"");
  });
  for (auto& p : polls) REQUIRE(p.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  REQUIRE(with_curl.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  CHECK(a.stop(SIGTERM) == 0);
  for (auto& p : polls) {
    REQUIRE(p.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    auto r = p.get();
    REQUIRE(r.ok());
    CHECK(r->status == 304);
    CHECK(r->headers["connection"] == "close");
  }
  REQUIRE(with_curl.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const std::string curl_out = with_curl.get();
  INFO(curl_out);
  CHECK(curl_out.find("HTTP/1.1 304") != std::string::npos);
  CHECK(curl_out.find("Connection: close") != std::string::npos);
  CHECK(curl_out.find("curl_rc=0") != std::string::npos);
  CHECK(a.log().find("stopping: answering 4 waiting long-polls") != std::string::npos);
  CHECK(a.log().find("stopped") != std::string::npos);
}

TEST_CASE("server: SIGHUP with a bad config keeps the running one", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  std::ofstream(a.config_path(), std::ios::app) << "overlay: {mtu: 99999}\n";
  a.signal(SIGHUP);
  REQUIRE(a.log_has("reload failed, keeping the running config: " + a.config_path() + ":6:16: overlay.mtu: '99999' is out of range"));
  CHECK(call(a, "GET", "/v1/status").status == 200);
  CHECK(a.stop(SIGTERM) == 0);
  CHECK(a.log().find("SIGTERM: stopping; the mesh stays up") != std::string::npos);
}

TEST_CASE("server: config drop-ins are read at start and on SIGHUP, and a bad one keeps the running config", "[server][dropins]") {
  // What a fleet tool does: leave agent.yaml (the package's conffile) alone
  // and put its settings beside it.
  TempDir d;
  const std::string dir = d.path + "/agent.yaml.d";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  std::ofstream(dir + "/50-fleet.yaml") << "overlay: {public_address: 192.0.2.10}\n";
  AgentProcess a(d.path, "");
  CHECK(a.log_has("starting (config: " + a.config_path() + " + " + dir + "/50-fleet.yaml)"));
  auto first = call(a, "GET", "/v1/status");
  REQUIRE(first.status == 200);
  CHECK(json::parse(first.body)["mesh"]["endpoint"] == "192.0.2.10:51820");

  std::ofstream(dir + "/60-site.yaml") << "overlay: {public_address: 192.0.2.11}\n";
  a.signal(SIGHUP);
  REQUIRE(a.log_has("reloaded config from " + a.config_path() + " + " + dir + "/50-fleet.yaml, " + dir + "/60-site.yaml"));
  // The worker applies the reloaded config after that line: the status moves then.
  auto moved = call(a, "GET", "/v1/status?wait=30", "", {{"If-None-Match", first.headers["etag"]}});
  CHECK(moved.status == 200);
  CHECK(json::parse(moved.body)["mesh"]["endpoint"] == "192.0.2.11:51820");

  std::ofstream(dir + "/70-typo.yaml") << "overlay: {public_adress: 192.0.2.12}\n";
  a.signal(SIGHUP);
  REQUIRE(a.log_has("reload failed, keeping the running config: " + dir + "/70-typo.yaml:1:11: overlay.public_adress: unknown key"));
  CHECK(json::parse(call(a, "GET", "/v1/status").body)["mesh"]["endpoint"] == "192.0.2.11:51820");
  CHECK(a.stop(SIGTERM) == 0);

  // At start, such a drop-in stops the daemon with the same line (exit 2).
  TempDir d2;
  REQUIRE(::mkdir((d2.path + "/agent.yaml.d").c_str(), 0755) == 0);
  std::ofstream(d2.path + "/agent.yaml.d/70-typo.yaml") << "overlay: {public_adress: 192.0.2.12}\n";
  AgentProcess b(d2.path, "", false);
  CHECK(b.wait_exit() == 2);
  CHECK(b.log().find(d2.path + "/agent.yaml.d/70-typo.yaml:1:11: overlay.public_adress: unknown key") != std::string::npos);
}

TEST_CASE("server: refuses plain HTTP on a non-loopback address, bad config exits 2", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "", false, "0.0.0.0:0");
  CHECK(a.wait_exit() == 2);
  CHECK(a.log().find("is not loopback and tls is not set") != std::string::npos);

  TempDir d2;
  AgentProcess b(d2.path, "colour: blue\n", false);
  CHECK(b.wait_exit() == 2);
  CHECK(b.log().find("colour: unknown key") != std::string::npos);
}

TEST_CASE("server: token file readable by others is refused", "[server]") {
  TempDir d;
  std::string tok = d.path + "/tok";
  std::ofstream(tok) << "abc\n";
  ::chmod(tok.c_str(), 0644);
  AgentProcess a(d.path, "token_file: " + tok + "\n", false);
  CHECK(a.wait_exit() == 1);
  CHECK(a.log().find("has mode 0644") != std::string::npos);
}

TEST_CASE("server: corrupt state file is moved aside with a clear log line", "[server]") {
  TempDir d;
  ::mkdir((d.path + "/state").c_str(), 0700);
  std::ofstream(d.path + "/state/state.json") << "\x01garbage{";
  AgentProcess a(d.path, "");
  CHECK(a.log().find("state file " + d.path + "/state/state.json is unusable (not valid JSON); moved it to " + d.path +
                     "/state/state.json.corrupt-") != std::string::npos);
  CHECK(call(a, "GET", "/v1/status").status == 200);
}

TEST_CASE("server: /metrics passes promtool check metrics", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  call(a, "GET", "/v1/status");
  call(a, "GET", "/nope");
  auto m = call(a, "GET", "/metrics");
  REQUIRE(m.status == 200);
  std::string file = d.path + "/metrics.txt";
  std::ofstream(file) << m.body;
  int rc = -1;
  std::string out = sh("promtool check metrics < " + file + " 2>&1", &rc);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.empty());
  CHECK(m.body.find("fabric_agent_http_requests_total{route=\"other\",code=\"404\"} 1") != std::string::npos);
  CHECK(m.body.find("fabric_agent_http_request_duration_seconds_count{route=\"/v1/status\"} 1") != std::string::npos);
}

TEST_CASE("server: fabric-agent status reads the token itself", "[server]") {
  TempDir d;
  AgentProcess a(d.path, "");
  int rc = -1;
  std::string out = sh(agent_binary() + " status --config " + a.config_path() + " --url " + a.url() + " 2>&1", &rc);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("agent     fabric-agent " FA_VERSION " at " + a.url()) != std::string::npos);
  std::string js = sh(agent_binary() + " status --json --config " + a.config_path() + " --url " + a.url(), &rc);
  CHECK(rc == 0);
  CHECK(json::parse(js)["agent"]["generation"] == 1);
}

namespace {
// A throwaway PKI made with the openssl CLI: CA A signs the server and a
// good client; CA B signs an intruder.
void make_pki(const std::string& dir) {
  const std::string s =
      "set -e; cd " + dir +
      "; for ca in caA caB; do openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
      "-subj /CN=$ca -keyout $ca.key -out $ca.pem 2>/dev/null; done; "
      "mk() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=$1 -keyout $1.key -out $1.csr "
      "2>/dev/null; printf 'subjectAltName=IP:127.0.0.1\\n' > $1.ext; openssl x509 -req -in $1.csr -CA $2.pem -CAkey "
      "$2.key -CAcreateserial -days 1 -extfile $1.ext -out $1.pem 2>/dev/null; }; "
      "mk server caA; mk client caA; mk intruder caB";
  int rc = -1;
  sh(s, &rc);
  REQUIRE(rc == 0);
}
}  // namespace

TEST_CASE("server: TLS and mutual TLS", "[server][tls]") {
  TempDir d;
  make_pki(d.path);
  const std::string p = d.path + "/";
  AgentProcess a(d.path, "tls: {cert: " + p + "server.pem, key: " + p + "server.key, client_ca: " + p + "caA.pem}\n");
  REQUIRE(a.log().find("listening on https://127.0.0.1:") != std::string::npos);
  auto url = *parse_url("https://127.0.0.1:" + std::to_string(a.port()));
  auto get = [&](ClientOptions o) { return http_request(url, "GET", "/v1/status", "", o); };

  ClientOptions cert;  // client cert from the trusted CA, no token
  cert.ca_file = p + "caA.pem";
  cert.cert_file = p + "client.pem";
  cert.key_file = p + "client.key";
  auto r = get(cert);
  REQUIRE(r.ok());
  CHECK(r->status == 200);

  ClientOptions intruder = cert;  // another CA's cert: refused in the handshake
  intruder.cert_file = p + "intruder.pem";
  intruder.key_file = p + "intruder.key";
  auto ri = get(intruder);
  if (ri.ok()) CHECK(ri->status != 200);  // TLS 1.3 may report the alert on the first read instead
  else CHECK(ri.error().message.find("127.0.0.1") != std::string::npos);

  ClientOptions token;  // no cert, token: accepted
  token.ca_file = p + "caA.pem";
  token.token = a.token();
  auto rt = get(token);
  REQUIRE(rt.ok());
  CHECK(rt->status == 200);

  ClientOptions none;  // neither: 401
  none.ca_file = p + "caA.pem";
  auto rn = get(none);
  REQUIRE(rn.ok());
  CHECK(rn->status == 401);

  // curl as the second real client: the intruder's cert fails, the good one passes.
  CHECK(sh("curl -s -o /dev/null -w '%{http_code}' --cacert " + p + "caA.pem --cert " + p + "client.pem --key " + p +
           "client.key " + url.base + "/v1/status") == "200");
  int rc = 0;
  sh("curl -s -o /dev/null --cacert " + p + "caA.pem --cert " + p + "intruder.pem --key " + p + "intruder.key " + url.base +
         "/v1/status",
     &rc);
  CHECK(rc != 0);
}

namespace {
// `openssl s_server` on a free loopback port with the given certificate: a
// TLS peer that prints every byte a client sends it after the handshake.
class TlsPeer {
 public:
  TlsPeer(const std::string& dir, const std::string& cert, const std::string& key) : out_(dir + "/s_server.out") {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    ::close(s);
    int in[2];
    REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);  // stdin held open: s_server quits on its EOF
      int fd = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      const std::string accept = "127.0.0.1:" + std::to_string(port_);
      ::execlp("openssl", "openssl", "s_server", "-accept", accept.c_str(), "-cert", cert.c_str(), "-key", key.c_str(),
               nullptr);
      ::_exit(127);
    }
    ::close(in[0]);
    stdin_ = in[1];
    for (int i = 0; i < 100 && read_all(out_).find("ACCEPT") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(read_all(out_).find("ACCEPT") != std::string::npos);
  }
  ~TlsPeer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    ::close(stdin_);
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  std::string received() const { return read_all(out_); }

 private:
  std::string out_;
  int port_ = 0;
  pid_t pid_ = -1;
  int stdin_ = -1;
};
}  // namespace

TEST_CASE("client: the token goes only to a server whose certificate is verified and names the host", "[server][tls]") {
  TempDir d;
  make_pki(d.path);
  const std::string p = d.path + "/";
  // A certificate from the trusted CA, but for another host.
  int rc = -1;
  sh("cd " + d.path +
         " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=other -keyout other.key -out "
         "other.csr 2>/dev/null && printf 'subjectAltName=DNS:other.example,IP:192.0.2.7\\n' > other.ext && openssl "
         "x509 -req -in other.csr -CA caA.pem -CAkey caA.key -CAcreateserial -days 1 -extfile other.ext -out other.pem "
         "2>/dev/null",
     &rc);
  REQUIRE(rc == 0);
  const std::string token = "tok-" + std::string(40, 'q');
  auto send_to = [&](const TlsPeer& peer, const std::string& ca) {
    ClientOptions o;
    o.token = token;
    o.ca_file = ca;
    o.timeout = std::chrono::milliseconds(1500);  // s_server never answers
    return http_request(*parse_url(peer.url()), "GET", "/v1/status", "", o);
  };

  SECTION("a certificate no trusted CA signed, without --ca-file") {
    TlsPeer impostor(d.path, p + "intruder.pem", p + "intruder.key");
    auto r = send_to(impostor, "");
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message);
    CHECK(r.error().message.find("tls handshake") != std::string::npos);
    CHECK(r.error().message.find("give --ca-file") != std::string::npos);
    CHECK(impostor.received().find(token) == std::string::npos);
  }
  SECTION("a certificate from the CA given, for another host") {
    TlsPeer impostor(d.path, p + "other.pem", p + "other.key");
    auto r = send_to(impostor, p + "caA.pem");
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message);
    CHECK(r.error().message.find("tls handshake") != std::string::npos);
    CHECK(r.error().message.find("mismatch") != std::string::npos);
    CHECK(impostor.received().find(token) == std::string::npos);
  }
  SECTION("the server's own certificate: the token is sent (what the checks above would see)") {
    TlsPeer server(d.path, p + "server.pem", p + "server.key");
    auto r = send_to(server, p + "caA.pem");  // times out: s_server does not answer
    CHECK_FALSE(r.ok());
    CHECK(server.received().find("Authorization: Bearer " + token) != std::string::npos);
  }
}

TEST_CASE("client: a server that accepts and never answers is given up at the deadline", "[server]") {
  // A listening socket nobody accepts from: the kernel completes the
  // handshake, nothing is ever read or written.
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s, 8) == 0);
  REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  for (const std::string scheme : {"http", "https"}) {
    ClientOptions o;
    o.timeout = std::chrono::milliseconds(500);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = http_request(*parse_url(scheme + "://127.0.0.1:" + std::to_string(ntohs(a.sin_port))), "GET",
                          "/v1/status", "", o);
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_FALSE(r.ok());
    INFO(scheme << ": " << r.error().message);
    CHECK(r.error().message.find("timeout") != std::string::npos);
    CHECK(took < std::chrono::seconds(3));
  }
  ::close(s);
}

TEST_CASE("server: bad TLS files stop the start before anything is touched, naming the setting and the file",
          "[server][tls]") {
  TempDir d;
  make_pki(d.path);
  const std::string p = d.path + "/";
  struct Case {
    std::string tls, says;
  } cases[] = {
      {"{cert: " + p + "server.pem, key: " + p + "client.key}",
       "tls.key: " + p + "client.key: key values mismatch (accepted: the PEM private key of tls.cert " + p +
           "server.pem)"},
      {"{cert: " + p + "server.pem, key: " + p + "absent.key}", "tls.key: " + p + "absent.key: No such file or directory"},
      {"{cert: " + p + "server.key, key: " + p + "server.key}", "tls.cert: " + p + "server.key: "},
      {"{cert: " + p + "server.pem, key: " + p + "server.key, client_ca: " + p + "nothing.pem}",
       "tls.client_ca: " + p + "nothing.pem: No such file or directory"},
  };
  for (const auto& c : cases) {
    TempDir run;
    AgentProcess a(run.path, "tls: " + c.tls + "\n", false);
    CHECK(a.wait_exit() == 1);
    INFO(a.log());
    CHECK(a.log().find(c.says) != std::string::npos);
    // Neither the state directory nor the token: the check came first.
    CHECK_FALSE(std::filesystem::exists(run.path + "/state"));
  }
}

TEST_CASE("server: a crashing daemon leaves no core dump (it holds the token and the keys)", "[server]") {
  TempDir d;
  // Everything a core needs: no size limit, and a writable working
  // directory for the kernel's default core_pattern ("core").
  // The signal's default action, as a crash meets it in production, not
  // AddressSanitizer's SIGSEGV handler (its report hung once on this
  // asynchronous signal). Under ASan no core is written either way (it sets
  // RLIMIT_CORE to 0): the plain build's run is the one that can fail.
  AgentProcess a(d.path, "", true, "127.0.0.1:0", {"ASAN_OPTIONS=handle_segv=0:detect_leaks=0"}, [dir = d.path] {
    rlimit r{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_CORE, &r);
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
  });
  REQUIRE(call(a, "GET", "/v1/status").status == 200);  // the token is in memory
  CHECK(a.stop(SIGSEGV) == -SIGSEGV);
  CHECK_FALSE(WCOREDUMP(a.wait_status()));
  for (const auto& e : std::filesystem::directory_iterator(d.path))
    CHECK(e.path().filename().string().rfind("core", 0) != 0);
}

TEST_CASE("server: sd_notify READY after startup, watchdog pings", "[server]") {
  TempDir d;
  const std::string sock_path = d.path + "/notify.sock";
  int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(s >= 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path.c_str());
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  AgentProcess a(d.path, "", true, "127.0.0.1:0", {"NOTIFY_SOCKET=" + sock_path, "WATCHDOG_USEC=400000"});
  std::string all;
  bool ready = false;
  int watchdogs = 0;
  for (int i = 0; i < 100 && (!ready || watchdogs < 2); ++i) {
    pollfd p{s, POLLIN, 0};
    if (::poll(&p, 1, 100) != 1) continue;
    char buf[512];
    ssize_t n = ::recv(s, buf, sizeof buf, 0);
    if (n <= 0) continue;
    std::string msg(buf, static_cast<size_t>(n));
    all += msg + "|";
    if (msg.find("READY=1") != std::string::npos) ready = true;
    if (msg.find("WATCHDOG=1") != std::string::npos && ready) ++watchdogs;
  }
  ::close(s);
  INFO(all);
  CHECK(ready);
  CHECK(watchdogs >= 2);
  CHECK(a.log().find("systemd watchdog every 400 ms (pinging at half)") != std::string::npos);
  // READY comes after the first discovery and after listening.
  CHECK(a.log().find("listening on") < a.log().find("ready (generation 1)"));
}

// The daemon's node labels (agent/nfd.hpp): the feature file written at each
// pass with the expiry ahead of it, left in place by a stop (its expiry
// removes the labels), and a file it cannot write is a status warning.
TEST_CASE("server: the daemon keeps NFD's feature file fresh and says when it cannot write it", "[server][nfd]") {
  TempDir d;
  const std::string dir = d.path + "/features.d";
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  const std::string file = dir + "/fabric-agent";
  AgentProcess a(d.path, "sysfs_root: " + std::string(FA_FIXTURES_DIR) + "/a-ib-8gpu\nrefresh_interval: 1s\nnfd: {feature_file: " +
                             file + "}\n");
  auto expiry_of = [](const std::string& text) -> long long {
    auto at = text.find("# +expiry-time=");
    if (at == std::string::npos) return -1;
    std::tm tm{};
    if (!::strptime(text.c_str() + at + 15, "%Y-%m-%dT%H:%M:%SZ", &tm)) return -1;
    return static_cast<long long>(::timegm(&tm));
  };
  std::string text;
  for (int i = 0; i < 100 && expiry_of(text) < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    text = read_all(file);
  }
  INFO(text << a.log());
  const long long first = expiry_of(text);
  REQUIRE(first > 0);
  // refresh_interval 1s: the 60 s floor.
  const long long now = static_cast<long long>(std::time(nullptr));
  CHECK(first >= now + 55);
  CHECK(first <= now + 61);
  CHECK(text.find("\nfabric-agent.io/fabric.kind=infiniband\n") != std::string::npos);
  CHECK(text.find("\nfabric-agent.io/gpu.count=8\n") != std::string::npos);
  CHECK(text.find("\nfabric-agent.io/healthy=") != std::string::npos);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(a.log_has("node labels: " + file + " written"));
  // Later passes move the expiry.
  long long later = first;
  for (int i = 0; i < 60 && later <= first; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    later = expiry_of(read_all(file));
  }
  CHECK(later > first);
  // A stop leaves the file: the labels go at its expiry, not at a restart.
  CHECK(a.stop(SIGTERM) == 0);
  CHECK(expiry_of(read_all(file)) > 0);
  CHECK(*fa::list_dir(dir) == std::vector<std::string>{"fabric-agent"});

  // A directory that is a file: the status says so.
  std::ofstream(d.path + "/not-a-dir") << "";
  TempDir d2;
  AgentProcess b(d2.path, "sysfs_root: " + std::string(FA_FIXTURES_DIR) + "/a-ib-8gpu\nnfd: {feature_file: " + d.path +
                              "/not-a-dir/fabric-agent}\n");
  auto st2 = call(b, "GET", "/v1/status");
  auto w = json::parse(st2.body)["warnings"];
  INFO(st2.body);
  bool found = false;
  for (const auto& x : w)
    if (x.get<std::string>().rfind("node labels not written to " + d.path + "/not-a-dir/fabric-agent: ", 0) == 0) found = true;
  CHECK(found);
}
