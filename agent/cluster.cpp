// SPDX-License-Identifier: Apache-2.0
// `fabric-agent cluster form`: the reference control-plane flow. What a
// provider runs to check a set of machines before listing them together,
// and what the end-to-end test uses:
//   1. GET /v1/status from every agent;
//   2. refuse a mixed set: fabric.id, GPU model and GPU count must agree
//      (the odd agent is named against the majority), and refuse any agent
//      whose fabric has no id (it may be on any fabric);
//   3. node i (order given) gets host i+1 of the overlay CIDR, e.g. 10.42.0.(i+1)/24;
//   4. PUT /v1/mesh to every agent with all the others as peers;
//   5. wait until every agent reports a recent handshake with every peer.
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/auth.hpp"
#include "agent/cli.hpp"
#include "agent/cluster.hpp"
#include "agent/client.hpp"
#include "common/cli.hpp"
#include "common/json.hpp"
#include "common/random.hpp"

namespace fa::agent {

using nlohmann::json;

namespace {

struct Node {
  Url url;
  json status;
  std::string fabric_id;  // "(none)": no RDMA fabric; "(unknown)": a fabric without id
  std::string gpu_shape;
  std::string public_key;
  std::string endpoint;
  std::string interface;
  int listen_port = 51820;
  std::string address;  // assigned, with prefix length
};

Result<std::vector<std::string>> assign_addresses(const std::string& cidr, size_t n) {
  auto slash = cidr.find('/');
  in_addr a{};
  if (slash == std::string::npos || inet_pton(AF_INET, cidr.substr(0, slash).c_str(), &a) != 1)
    return Error{"--overlay-cidr '" + cidr + "' is not accepted; accepted: A.B.C.D/N"};
  int len = std::stoi(cidr.substr(slash + 1));
  if (len < 8 || len > 30) return Error{"--overlay-cidr '" + cidr + "': prefix length must be 8..30"};
  uint32_t base = ntohl(a.s_addr);
  uint64_t hosts = (uint64_t{1} << (32 - len)) - 2;
  if (n > hosts) return Error{"--overlay-cidr " + cidr + " has room for " + std::to_string(hosts) + " nodes, not " + std::to_string(n)};
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    in_addr h{htonl(base + static_cast<uint32_t>(i) + 1)};
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &h, buf, sizeof buf);
    out.push_back(std::string(buf) + "/" + std::to_string(len));
  }
  return out;
}

std::string host_of(const std::string& prefix) { return prefix.substr(0, prefix.find('/')); }

int usage(FILE* out) {
  std::fprintf(out,
               "usage: fabric-agent cluster form --agent URL --agent URL ... --token-file F\n"
               "         [--cluster-id ID] [--overlay-cidr 10.42.0.0/24] [--keepalive 25] [--timeout 60]\n"
               "         [--ca-file F] [--cert F --key F] [--json]\n"
               "       fabric-agent cluster verify --agent URL --agent URL ... --token-file F\n"
               "         [--min-fraction 0.9] [--json FILE|-] [--duration 5] [--latency-iters 1000] [--size 65536]\n"
               "         [--probe-port 18520] [--no-overlay] [--ca-file F] [--cert F --key F]\n");
  return out == stdout ? 0 : 2;
}

}  // namespace

std::string unknown_reason(const json& st) {
  const json& in = st.contains("inspect") ? st["inspect"] : json(nullptr);
  if (!in.is_object()) return "its status carries no inspect document";
  if (in.contains("warnings") && in["warnings"].is_array())
    for (const auto& w : in["warnings"])
      if (w.is_string() && w.get<std::string>().find("fabric.id is null") != std::string::npos)
        return w.get<std::string>();
  if (in.contains("reasons") && in["reasons"].is_object() && in["reasons"].contains("fabric") &&
      in["reasons"]["fabric"].is_string())
    return in["reasons"]["fabric"].get<std::string>();
  return "no reason given";
}

std::string fabric_id_of(const json& st) {
  const json& in = st.contains("inspect") ? st["inspect"] : json(nullptr);
  if (!in.is_object() || !in.contains("fabric") || !in["fabric"].is_object()) return "(unknown)";
  const json& f = in["fabric"];
  if (f.contains("id") && f["id"].is_string()) return f["id"].get<std::string>();
  if (f.value("kind", "") == "none") return "(none)";
  return "(unknown)";
}

std::string gpu_shape_of(const json& st) {
  const json& in = st.contains("inspect") ? st["inspect"] : json(nullptr);
  std::string model = "(none)";
  long count = 0;
  if (in.is_object() && in.contains("gpus") && in["gpus"].is_object()) {
    const json& g = in["gpus"];
    if (g.contains("model") && g["model"].is_string() && !g["model"].get<std::string>().empty()) model = g["model"];
    if (g.contains("count") && g["count"].is_number_integer()) count = g["count"].get<long>();
    else if (g.contains("devices") && g["devices"].is_array()) count = static_cast<long>(g["devices"].size());
  }
  return std::to_string(count) + " x " + model;
}

int odd_one(const std::vector<std::string>& values) {
  std::map<std::string, int> votes;
  for (const auto& v : values) ++votes[v];
  if (votes.size() <= 1) return -1;
  std::string majority;
  int best = -1;
  for (const auto& [v, c] : votes)
    if (c > best) best = c, majority = v;
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] != majority) return static_cast<int>(i);
  return -1;
}

std::string error_message(const HttpReply& r) {
  json d = fa::parse_json(r.body);
  if (d.is_object() && d.contains("error") && d["error"].is_object()) {
    std::string m = d["error"].value("message", "");
    if (d["error"].contains("field") && d["error"]["field"].is_string()) m += " (field " + d["error"]["field"].get<std::string>() + ")";
    return m;
  }
  return r.body;
}

void split_agents(const std::vector<std::string>& argv, size_t from, std::vector<std::string>& agents,
                  std::vector<std::string>& rest) {
  for (size_t i = from; i < argv.size(); ++i) {
    if (argv[i] == "--agent" && i + 1 < argv.size()) agents.push_back(argv[++i]);
    else if (argv[i].rfind("--agent=", 0) == 0) agents.push_back(argv[i].substr(8));
    else rest.push_back(argv[i]);
  }
}

int cmd_cluster(const std::vector<std::string>& argv_in) {
  if (argv_in.empty() || argv_in[0] == "-h" || argv_in[0] == "--help") return usage(argv_in.empty() ? stderr : stdout);
  if (argv_in[0] == "verify") return cmd_cluster_verify({argv_in.begin() + 1, argv_in.end()});
  if (argv_in[0] != "form") {
    std::fprintf(stderr, "fabric-agent cluster: unknown action '%s' (accepted: form, verify)\n", argv_in[0].c_str());
    return 2;
  }
  std::vector<std::string> agents, rest;
  split_agents(argv_in, 1, agents, rest);
  auto args = Args::parse(rest, {{"token-file", true},
                                 {"cluster-id", true},
                                 {"overlay-cidr", true},
                                 {"keepalive", true},
                                 {"timeout", true},
                                 {"ca-file", true},
                                 {"cert", true},
                                 {"key", true},
                                 {"json", false}});
  if (!args) {
    std::fprintf(stderr, "fabric-agent cluster form: %s\n", args.error().message.c_str());
    return 2;
  }
  if (agents.size() < 2) {
    std::fprintf(stderr, "fabric-agent cluster form: give at least two --agent URL\n");
    return 2;
  }
  auto token_file = args->get("token-file");
  if (!token_file) {
    std::fprintf(stderr, "fabric-agent cluster form: --token-file F is required\n");
    return 2;
  }
  auto secret = read_token_secret(*token_file);
  if (!secret) {
    std::fprintf(stderr, "fabric-agent cluster form: %s\n", secret.error().message.c_str());
    return 1;
  }
  int timeout_s = 60, keepalive = 25;
  try {
    timeout_s = std::stoi(args->get_or("timeout", "60"));
    keepalive = std::stoi(args->get_or("keepalive", "25"));
  } catch (const std::exception&) {
    std::fprintf(stderr, "fabric-agent cluster form: --timeout and --keepalive take whole seconds\n");
    return 2;
  }
  ClientOptions opt;
  opt.token = *secret;
  opt.ca_file = args->get_or("ca-file", "");
  opt.cert_file = args->get_or("cert", "");
  opt.key_file = args->get_or("key", "");

  // 1. Status of every agent.
  std::vector<Node> nodes;
  for (const auto& a : agents) {
    auto u = parse_url(a);
    if (!u) {
      std::fprintf(stderr, "fabric-agent cluster form: %s\n", u.error().message.c_str());
      return 2;
    }
    auto r = http_request(*u, "GET", "/v1/status", "", opt);
    if (!r) {
      std::fprintf(stderr, "fabric-agent cluster form: %s\n", r.error().message.c_str());
      return 1;
    }
    if (r->status != 200) {
      std::fprintf(stderr, "fabric-agent cluster form: %s: GET /v1/status answered %d: %s\n", u->base.c_str(), r->status,
                   error_message(*r).c_str());
      return 1;
    }
    Node n;
    n.url = *u;
    n.status = fa::parse_json(r->body);
    if (!n.status.is_object()) {
      std::fprintf(stderr, "fabric-agent cluster form: %s: status is not a JSON object\n", u->base.c_str());
      return 1;
    }
    n.fabric_id = fabric_id_of(n.status);
    n.gpu_shape = gpu_shape_of(n.status);
    const json& m = n.status.value("mesh", json::object());
    if (!m.value("available", false) || !m.contains("public_key") || !m["public_key"].is_string()) {
      std::fprintf(stderr, "fabric-agent cluster form: %s: the agent has no overlay (mesh.available is false)\n", u->base.c_str());
      return 1;
    }
    if (!m.contains("endpoint") || !m["endpoint"].is_string()) {
      std::fprintf(stderr,
                   "fabric-agent cluster form: %s: the agent has no WireGuard endpoint (no RoCE fabric address; set "
                   "overlay.public_address in its config)\n",
                   u->base.c_str());
      return 1;
    }
    n.public_key = m["public_key"];
    n.endpoint = m["endpoint"];
    n.interface = m.value("interface", "wg0");
    n.listen_port = m.value("listen_port", 51820);
    nodes.push_back(std::move(n));
  }

  // 2. One fabric, one GPU shape. A machine whose fabric has no id may be
  // on any fabric: it is never grouped, whatever the others say.
  std::vector<const Node*> unknown;
  for (const auto& n : nodes)
    if (n.fabric_id == "(unknown)") unknown.push_back(&n);
  if (!unknown.empty()) {
    std::fprintf(stderr, "fabric-agent cluster form: refused: the fabric of %zu agent(s) is unknown:\n",
                 unknown.size());
    for (const Node* n : unknown)
      std::fprintf(stderr, "  %s: %s\n", n->url.base.c_str(), unknown_reason(n->status).c_str());
    return 1;
  }
  auto each = [&](std::string Node::*field) {
    std::vector<std::string> v;
    for (const auto& n : nodes) v.push_back(n.*field);
    return v;
  };
  if (int i = odd_one(each(&Node::fabric_id)); i >= 0) {
    std::fprintf(stderr, "fabric-agent cluster form: refused: %s is on fabric %s, the others on %s\n",
                 nodes[i].url.base.c_str(), nodes[i].fabric_id.c_str(), nodes[i == 0 ? 1 : 0].fabric_id.c_str());
    return 1;
  }
  if (int i = odd_one(each(&Node::gpu_shape)); i >= 0) {
    std::fprintf(stderr, "fabric-agent cluster form: refused: %s has GPUs %s, the others %s\n", nodes[i].url.base.c_str(),
                 nodes[i].gpu_shape.c_str(), nodes[i == 0 ? 1 : 0].gpu_shape.c_str());
    return 1;
  }
  if (nodes[0].fabric_id == "(none)")
    std::fprintf(stderr, "fabric-agent cluster form: warning: no agent reports an RDMA fabric; forming the overlay only\n");

  // 3. Addresses, cluster id.
  auto addrs = assign_addresses(args->get_or("overlay-cidr", "10.42.0.0/24"), nodes.size());
  if (!addrs) {
    std::fprintf(stderr, "fabric-agent cluster form: %s\n", addrs.error().message.c_str());
    return 2;
  }
  for (size_t i = 0; i < nodes.size(); ++i) nodes[i].address = (*addrs)[i];
  std::string cluster_id = args->get_or("cluster-id", "");
  if (cluster_id.empty()) {
    unsigned char raw[4]{};
    (void)random_bytes(raw, sizeof raw);  // as before: an id, not a secret
    cluster_id = "c-" + to_hex(raw, sizeof raw);
  }

  // 4. PUT every mesh.
  for (size_t i = 0; i < nodes.size(); ++i) {
    json peers = json::array();
    for (size_t j = 0; j < nodes.size(); ++j) {
      if (j == i) continue;
      json p = {{"public_key", nodes[j].public_key},
                {"endpoint", nodes[j].endpoint},
                {"allowed_ips", json::array({host_of(nodes[j].address) + "/32"})}};
      if (keepalive > 0) p["persistent_keepalive"] = keepalive;
      peers.push_back(std::move(p));
    }
    json mesh = {{"cluster_id", cluster_id},
                 {"interface", nodes[i].interface},
                 {"address", nodes[i].address},
                 {"listen_port", nodes[i].listen_port},
                 {"peers", std::move(peers)}};
    auto r = http_request(nodes[i].url, "PUT", "/v1/mesh", mesh.dump(), opt);
    if (!r) {
      std::fprintf(stderr, "fabric-agent cluster form: %s\n", r.error().message.c_str());
      return 1;
    }
    if (r->status != 200) {
      std::fprintf(stderr, "fabric-agent cluster form: %s: PUT /v1/mesh answered %d: %s\n", nodes[i].url.base.c_str(),
                   r->status, error_message(*r).c_str());
      return 1;
    }
    std::fprintf(stderr, "cluster %s: node %zu %s is %s (%s)\n", cluster_id.c_str(), i, nodes[i].url.base.c_str(),
                 nodes[i].address.c_str(), nodes[i].public_key.c_str());
  }

  // 5. Handshakes. WireGuard handshakes on first traffic; persistent
  // keepalive makes that immediate, so a healthy set converges in seconds.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::vector<std::string> missing;
  for (;;) {
    missing.clear();
    long long now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    for (const auto& n : nodes) {
      auto r = http_request(n.url, "GET", "/v1/mesh", "", opt);
      if (!r || r->status != 200) {
        missing.push_back(n.url.base + ": GET /v1/mesh failed" + (r ? ": " + error_message(*r) : ": " + r.error().message));
        continue;
      }
      json d = fa::parse_json(r->body);
      json live = d.is_object() && d.contains("live") ? d["live"] : json(nullptr);
      std::map<std::string, long long> hs;
      if (live.is_object())
        for (const auto& p : live.value("peers", json::array()))
          hs[p.value("public_key", "")] = p.value("last_handshake_unix", 0LL);
      for (const auto& other : nodes) {
        if (&other == &n) continue;
        auto it = hs.find(other.public_key);
        // "Recent": WireGuard re-handshakes every 2 minutes on an active tunnel.
        if (it == hs.end() || it->second <= 0 || now - it->second > 180)
          missing.push_back(n.url.base + " has no recent handshake with " + other.url.base);
      }
    }
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (!missing.empty()) {
    for (const auto& m : missing) std::fprintf(stderr, "fabric-agent cluster form: %s\n", m.c_str());
    std::fprintf(stderr, "fabric-agent cluster form: handshakes incomplete after %d s\n", timeout_s);
    return 1;
  }
  json out = {{"cluster_id", cluster_id}, {"nodes", json::array()}};
  for (size_t i = 0; i < nodes.size(); ++i)
    out["nodes"].push_back({{"agent", nodes[i].url.base},
                            {"index", i},
                            {"address", nodes[i].address},
                            {"public_key", nodes[i].public_key},
                            {"endpoint", nodes[i].endpoint}});
  if (args->has("json")) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("cluster %s formed: %zu nodes, every peer has a recent handshake\n", cluster_id.c_str(), nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i)
      std::printf("  node %zu  %-18s %-28s %s\n", i, nodes[i].address.c_str(), nodes[i].url.base.c_str(),
                  nodes[i].endpoint.c_str());
  }
  return 0;
}

}  // namespace fa::agent
