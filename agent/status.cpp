// SPDX-License-Identifier: Apache-2.0
// `fabric-agent status`: the operator's view of the local daemon. Finds it
// from the config (listen, tls) and reads the token file itself.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "agent/auth.hpp"
#include "agent/cli.hpp"
#include "agent/client.hpp"
#include "common/cli.hpp"
#include "common/config.hpp"
#include "common/json.hpp"

namespace fa::agent {

using nlohmann::json;

namespace {

std::string str(const json& j, const char* key, const char* fallback = "-") {
  if (j.is_object() && j.contains(key) && j[key].is_string()) return j[key].get<std::string>();
  if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].dump();
  return fallback;
}

std::string duration(long long s) {
  char buf[64];
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%lldd%lldh", s / 86400, (s % 86400) / 3600);
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%lldm", s / 3600, (s % 3600) / 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%lldm%llds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%llds", s);
  return buf;
}

void print_human(const json& st, const std::string& url) {
  const json& a = st.value("agent", json::object());
  std::printf("agent     fabric-agent %s at %s, up %s, generation %s\n", str(a, "version").c_str(), url.c_str(),
              duration(a.value("uptime_seconds", 0LL)).c_str(), str(a, "generation").c_str());
  const json& in = st.contains("inspect") ? st["inspect"] : json(nullptr);
  if (in.is_object()) {
    const json& f = in.value("fabric", json::object());
    std::string ports;
    for (const auto& p : f.value("ports", json::array())) ports += (ports.empty() ? "" : ",") + p.get<std::string>();
    std::printf("fabric    %s, id %s, ports %s\n", str(f, "kind").c_str(), str(f, "id").c_str(),
                ports.empty() ? "(none active)" : ports.c_str());
    const json& n = in.value("nccl_env", json::object());
    std::printf("nccl      NCCL_IB_HCA=%s NCCL_IB_GID_INDEX=%s NCCL_SOCKET_IFNAME=%s\n", str(n, "NCCL_IB_HCA").c_str(),
                str(n, "NCCL_IB_GID_INDEX").c_str(), str(n, "NCCL_SOCKET_IFNAME").c_str());
    const json& g = in.value("gpus", json::object());
    std::printf("gpus      %s x %s\n", str(g, "count", "0").c_str(), str(g, "model", "none").c_str());
    std::printf("hcas      %zu\n", in.value("hcas", json::array()).size());
    for (const auto& w : in.value("warnings", json::array())) std::printf("warning   %s\n", w.get<std::string>().c_str());
  } else {
    std::printf("inspect   (none)\n");
  }
  const json& m = st.value("mesh", json::object());
  std::string state = str(m, "state");
  if (state == "none") {
    std::printf("mesh      none (public key %s, endpoint %s)\n", str(m, "public_key").c_str(), str(m, "endpoint").c_str());
  } else {
    std::printf("mesh      %s on %s %s, cluster %s, %zu peers (public key %s, endpoint %s)\n", state.c_str(),
                str(m, "interface").c_str(), str(m, "address").c_str(), str(m, "cluster_id").c_str(),
                m.value("peers", json::array()).size(), str(m, "public_key").c_str(), str(m, "endpoint").c_str());
    for (const auto& p : m.value("peers", json::array()))
      std::printf("  peer    %s %s\n", str(p, "public_key").c_str(), str(p, "endpoint").c_str());
    if (m.contains("error")) std::printf("  error   %s\n", str(m, "error").c_str());
  }
  std::printf("pods      %zu\n", st.value("pods", json::array()).size());
  for (const auto& w : st.value("warnings", json::array())) std::printf("warning   %s\n", w.get<std::string>().c_str());
}

}  // namespace

int cmd_status(const std::vector<std::string>& argv) {
  auto args = Args::parse(argv, {{"config", true},
                                 {"url", true},
                                 {"token-file", true},
                                 {"ca-file", true},
                                 {"cert", true},
                                 {"key", true},
                                 {"json", false},
                                 {"help", false}});
  if (!args) {
    std::fprintf(stderr, "fabric-agent status: %s\n", args.error().message.c_str());
    return 2;
  }
  if (args->has("help")) {
    std::printf(
        "usage: fabric-agent status [--config FILE] [--url URL] [--token-file F] [--ca-file F]\n"
        "                           [--cert F --key F] [--json]\n"
        "  the local daemon's view: fabric, NCCL env, mesh, pods (URL and token from the config)\n");
    return 0;
  }
  if (!args->positional().empty()) {
    std::fprintf(stderr, "fabric-agent status: unexpected argument '%s'\n", args->positional()[0].c_str());
    return 2;
  }
  auto cfg = load_config(args->get_or("config", ""));
  if (!cfg) {
    std::fprintf(stderr, "fabric-agent status: %s\n", cfg.error().message.c_str());
    return 2;
  }
  std::string url_s;
  if (auto u = args->get("url")) {
    url_s = *u;
  } else {
    auto hp = parse_host_port(cfg->listen);
    std::string host = hp->host;
    if (host == "0.0.0.0") host = "127.0.0.1";
    if (host == "::") host = "::1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    url_s = std::string(cfg->tls.enabled() ? "https" : "http") + "://" + host + ":" + std::to_string(hp->port);
  }
  auto url = parse_url(url_s);
  if (!url) {
    std::fprintf(stderr, "fabric-agent status: %s\n", url.error().message.c_str());
    return 2;
  }
  ClientOptions opt;
  auto secret = read_token_secret(args->get_or("token-file", cfg->effective_token_file()));
  if (!secret) {
    std::fprintf(stderr, "fabric-agent status: %s\n", secret.error().message.c_str());
    return 1;
  }
  opt.token = *secret;
  opt.ca_file = args->get_or("ca-file", "");
  opt.cert_file = args->get_or("cert", "");
  opt.key_file = args->get_or("key", "");
  auto r = http_request(*url, "GET", "/v1/status", "", opt);
  if (!r) {
    std::fprintf(stderr, "fabric-agent status: %s (is the daemon running? `systemctl status fabric-agent`)\n",
                 r.error().message.c_str());
    return 1;
  }
  json doc = fa::parse_json(r->body);
  if (r->status != 200) {
    std::string msg = doc.is_object() && doc.contains("error") ? doc["error"].value("message", r->body) : r->body;
    std::fprintf(stderr, "fabric-agent status: %s answered %d: %s\n", url->base.c_str(), r->status, msg.c_str());
    return 1;
  }
  if (doc.is_discarded()) {
    std::fprintf(stderr, "fabric-agent status: %s answered with a body that is not JSON\n", url->base.c_str());
    return 1;
  }
  if (args->has("json")) std::printf("%s\n", doc.dump(2).c_str());
  else print_human(doc, url->base);
  return 0;
}

}  // namespace fa::agent
