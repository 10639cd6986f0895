// SPDX-License-Identifier: Apache-2.0
// The desired-state document: validated whole before anything is touched
// (systemd-networkd's parse -> verify -> apply). Every problem is collected
// with its field path, the value as written and what would be accepted.
#include <sys/socket.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

#include "overlay/overlay.hpp"

namespace fa::overlay {

using nlohmann::json;

std::string ValidationError::str() const {
  if (field.empty()) return message;
  return field + ": `" + value + "': " + message;
}

namespace {

std::string show_value(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// A field path built only when it is reported: a 1000-peer file that is
// valid costs no string per field.
struct Field {
  std::string_view a, b, c;
  Field(const std::string& s) : a(s) {}  // NOLINT: implicit on purpose
  Field(const char* s) : a(s) {}         // NOLINT
  Field(std::string_view x, std::string_view y, std::string_view z = {}) : a(x), b(y), c(z) {}
  std::string str() const {
    std::string s;
    s.reserve(a.size() + b.size() + c.size());
    s.append(a).append(b).append(c);
    return s;
  }
};

class Checker {
 public:
  std::vector<ValidationError> errors;

  void fail(const Field& field, const json* v, std::string msg) {
    errors.push_back({field.str(), v ? show_value(*v) : "", std::move(msg)});
  }

  // Unknown keys are errors: a typo like `allowed_ip` must not silently
  // drop a peer's routes.
  void known_keys(std::string_view prefix, const json& obj, std::initializer_list<const char*> keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (auto k : keys) ok |= it.key() == k;
      if (ok) continue;
      std::string list;
      for (auto k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      errors.push_back(
          {std::string(prefix) + it.key(), show_value(it.value()), "unknown key (accepted: " + list + ")"});
    }
  }

  const std::string* str(const Field& field, const json& v) {
    if (!v.is_string()) {
      fail(field, &v, "expected a string");
      return nullptr;
    }
    return v.get_ptr<const std::string*>();
  }

  std::optional<int64_t> integer(const Field& field, const json& v, int64_t lo, int64_t hi, const char* what) {
    if (!v.is_number_integer() && !v.is_number_unsigned()) {
      fail(field, &v, std::string("expected an integer ") + what);
      return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      fail(field, &v, std::string("out of range, accepted: ") + what);
      return std::nullopt;
    }
    int64_t n = v.get<int64_t>();
    if (n < lo || n > hi) {
      fail(field, &v, std::string("out of range, accepted: ") + what);
      return std::nullopt;
    }
    return n;
  }
};

bool valid_ifname(const std::string& s) {
  // Linux dev_valid_name(): 1-15 bytes, not "." or "..", no '/', ':' or
  // whitespace.
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (unsigned char c : s)
    if (c == '/' || c == ':' || c <= ' ' || c >= 0x7f) return false;
  return true;
}

bool valid_name(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (unsigned char c : s)
    if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return s != "." && s != "..";
}

}  // namespace

ParseResult parse_desired(const json& doc, const ParseOptions& opt) {
  ParseResult r;
  Checker ck;
  auto cidr = IpPrefix::parse(opt.overlay_cidr);
  if (!cidr || cidr->family != AF_INET) {
    r.errors.push_back({"overlay_cidr", opt.overlay_cidr, "expected an IPv4 prefix like 10.42.0.0/24"});
    return r;
  }
  IpPrefix net = cidr->network();
  if (!doc.is_object()) {
    r.errors.push_back({"", show_value(doc), "the mesh document must be a mapping/object"});
    return r;
  }
  ck.known_keys(
      "", doc,
      {"cluster_id", "interface", "address", "listen_port", "private_key_file", "mtu", "netns", "peers"});
  DesiredMesh m;

  if (!doc.contains("cluster_id")) {
    ck.fail("cluster_id", nullptr, "required: the cluster this mesh belongs to (1-128 of A-Z a-z 0-9 . _ -)");
  } else if (auto s = ck.str("cluster_id", doc["cluster_id"])) {
    if (!valid_name(*s, 128))
      ck.fail("cluster_id", &doc["cluster_id"], "expected 1-128 characters of A-Z a-z 0-9 . _ -");
    else
      m.cluster_id = *s;
  }

  if (doc.contains("interface")) {
    if (auto s = ck.str("interface", doc["interface"])) {
      if (!valid_ifname(*s))
        ck.fail(
            "interface", &doc["interface"],
            "expected an interface name of 1-15 characters without '/', ':' or whitespace, not '.' or '..'");
      else
        m.interface = *s;
    }
  }

  bool have_address = false;
  if (!doc.contains("address")) {
    ck.fail("address", nullptr,
            "required: this node's overlay address inside " + net.str() + ", e.g. " +
                IpPrefix{net.family, net.addr, net.len}.str());
  } else if (auto s = ck.str("address", doc["address"])) {
    auto a = IpPrefix::parse(*s);
    if (a && s->find('/') == std::string::npos) a->len = net.len;
    IpPrefix host = a ? *a : IpPrefix{};
    host.len = 32;
    IpPrefix bcast = net;
    for (int i = net.len; i < 32; ++i) bcast.addr[i / 8] |= static_cast<uint8_t>(0x80 >> (i % 8));
    bcast.len = 32;
    IpPrefix netaddr = net;
    netaddr.len = 32;
    if (!a || a->family != AF_INET || a->len != net.len || !net.contains(host) || host == netaddr ||
        (net.len < 31 && host == bcast)) {
      ck.fail("address", &doc["address"],
              "expected a host address inside the overlay " + net.str() + " written with /" +
                  std::to_string(net.len) + " (not the network or broadcast address)");
    } else {
      m.address = *a;
      have_address = true;
    }
  }

  if (doc.contains("listen_port"))
    if (auto n = ck.integer("listen_port", doc["listen_port"], 1, 65535, "1-65535"))
      m.listen_port = static_cast<uint16_t>(*n);

  if (doc.contains("private_key_file") && !doc["private_key_file"].is_null()) {
    if (auto s = ck.str("private_key_file", doc["private_key_file"])) {
      if (s->empty() || (*s)[0] != '/')
        ck.fail("private_key_file", &doc["private_key_file"], "expected an absolute path");
      else
        m.private_key_file = *s;
    }
  }

  if (doc.contains("mtu") && !doc["mtu"].is_null())
    if (auto n = ck.integer("mtu", doc["mtu"], 1280, 9000, "1280-9000")) m.mtu = static_cast<uint32_t>(*n);

  if (doc.contains("netns") && !doc["netns"].is_null()) {
    if (auto s = ck.str("netns", doc["netns"])) {
      bool path = !s->empty() && (*s)[0] == '/';
      if (!path && !valid_name(*s, 255))
        ck.fail(
            "netns", &doc["netns"],
            "expected an absolute path (/run/netns/NAME, /proc/PID/ns/net) or a name of A-Z a-z 0-9 . _ -");
      else
        m.netns = *s;
    }
  }

  std::map<Key, size_t> seen_keys;
  std::map<IpPrefix, std::pair<size_t, size_t>> seen_ips;  // -> peers[i].allowed_ips[j]
  IpPrefix self = m.address;
  self.len = 32;
  if (auto pit = doc.find("peers"); pit != doc.end() && !pit->is_null()) {
    const json& peers = *pit;
    if (!peers.is_array()) {
      ck.fail("peers", &peers, "expected a list of peers");
    } else {
      m.peers.reserve(peers.size());
      for (size_t i = 0; i < peers.size(); ++i) {
        const std::string pf = "peers[" + std::to_string(i) + "]";
        const json& pj = peers[i];
        if (!pj.is_object()) {
          ck.fail(pf, &pj, "expected a mapping with public_key, endpoint, allowed_ips, persistent_keepalive");
          continue;
        }
        ck.known_keys(pf + ".", pj, {"public_key", "endpoint", "allowed_ips", "persistent_keepalive"});
        DesiredPeer p;
        bool ok = true;
        auto kit = pj.find("public_key");
        if (kit == pj.end()) {
          ck.fail(Field(pf, ".public_key"), nullptr, "required: the peer's base64 public key (44 characters)");
          ok = false;
        } else if (auto s = ck.str(Field(pf, ".public_key"), *kit)) {
          auto k = key_from_base64(*s);
          if (!k) {
            ck.fail(Field(pf, ".public_key"), &*kit, k.error().message);
            ok = false;
          } else if (auto [it, fresh] = seen_keys.emplace(*k, i); !fresh) {
            ck.fail(Field(pf, ".public_key"), &*kit,
                    "duplicate: same key as peers[" + std::to_string(it->second) +
                        "]; public keys must be unique");
            ok = false;
          } else {
            p.public_key = *k;
          }
        } else {
          ok = false;
        }
        if (auto eit = pj.find("endpoint"); eit != pj.end() && !eit->is_null()) {
          if (auto s = ck.str(Field(pf, ".endpoint"), *eit)) {
            auto e = Endpoint::parse(*s);
            if (!e)
              ck.fail(Field(pf, ".endpoint"), &*eit, "expected IPv4:port or [IPv6]:port with port 1-65535");
            else
              p.endpoint = *e;
          }
        }
        auto ait = pj.find("allowed_ips");
        if (ait == pj.end()) {
          ck.fail(Field(pf, ".allowed_ips"), nullptr, "required: a list of prefixes inside " + net.str());
        } else if (!ait->is_array()) {
          ck.fail(Field(pf, ".allowed_ips"), &*ait, "expected a list of prefixes inside " + net.str());
        } else {
          const json& ips = *ait;
          p.allowed_ips.reserve(ips.size());
          for (size_t j = 0; j < ips.size(); ++j) {
            const std::string js = std::to_string(j) + "]";
            const Field f(pf, ".allowed_ips[", js);
            auto s = ck.str(f, ips[j]);
            if (!s) continue;
            auto a = IpPrefix::parse(*s);
            // Only overlay addresses: a peer announcing 0.0.0.0/0 or a
            // host's LAN would pull the provider's own traffic into the mesh.
            if (!a || !net.contains(*a)) {
              ck.fail(f, &ips[j],
                      "expected a prefix inside the overlay " + net.str() + ", e.g. 10.42.0.2/32");
              continue;
            }
            IpPrefix n = a->network();
            if (auto [it, fresh] = seen_ips.emplace(n, std::pair{i, j}); !fresh) {
              ck.fail(f, &ips[j],
                      "duplicate: already routed to peers[" + std::to_string(it->second.first) + "].allowed_ips[" +
                          std::to_string(it->second.second) + "]; one node per address");
              continue;
            }
            if (have_address && n.contains(self)) {
              ck.fail(f, &ips[j], "covers this node's own address " + self.str() + "; one node per address");
              continue;
            }
            p.allowed_ips.push_back(*a);
          }
        }
        if (auto kait = pj.find("persistent_keepalive"); kait != pj.end() && !kait->is_null())
          if (auto n = ck.integer(Field(pf, ".persistent_keepalive"), *kait, 0, 65535, "0-65535 seconds (0 = off)"))
            p.persistent_keepalive = static_cast<uint16_t>(*n);
        if (ok) m.peers.push_back(std::move(p));
      }
    }
  }
  r.errors = std::move(ck.errors);
  if (r.errors.empty()) r.mesh = std::move(m);
  return r;
}

namespace {

// YAML -> JSON keeping types: plain scalars that read as integers, booleans
// or null become those; quoted scalars stay strings.
Result<json> yaml_to_json(const YAML::Node& n, const std::string& path) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() == "?") {
        if (s == "~" || s == "null") return json(nullptr);
        if (s == "true") return json(true);
        if (s == "false") return json(false);
        bool digits = !s.empty() && s.size() <= 18;
        for (size_t i = 0; i < s.size(); ++i)
          digits &=
              (isdigit(static_cast<unsigned char>(s[i])) != 0) || (i == 0 && s[0] == '-' && s.size() > 1);
        if (digits) return json(std::stoll(s));
      }
      return json(s);
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (size_t i = 0; i < n.size(); ++i) {
        auto v = yaml_to_json(n[i], path + "[" + std::to_string(i) + "]");
        if (!v) return v;
        a.push_back(std::move(*v));
      }
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) return Error{path + ": mapping keys must be plain strings"};
        std::string k = it->first.Scalar();
        if (o.contains(k)) return Error{(path.empty() ? "" : path + ".") + k + ": key appears twice"};
        auto v = yaml_to_json(it->second, (path.empty() ? "" : path + ".") + k);
        if (!v) return v;
        o[k] = std::move(*v);
      }
      return o;
    }
  }
  return json(nullptr);
}

}  // namespace

ParseResult parse_desired_yaml(std::string_view text, const ParseOptions& opt) {
  ParseResult r;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    r.errors.push_back({"", "",
                        "YAML syntax error at line " + std::to_string(e.mark.line + 1) + ", column " +
                            std::to_string(e.mark.column + 1) + ": " + e.msg});
    return r;
  }
  auto j = yaml_to_json(root, "");
  if (!j) {
    r.errors.push_back({"", "", j.error().message});
    return r;
  }
  return parse_desired(*j, opt);
}

json to_json(const DesiredMesh& m) {
  json j;
  j["cluster_id"] = m.cluster_id;
  j["interface"] = m.interface;
  j["address"] = m.address.str();
  j["listen_port"] = m.listen_port;
  if (m.private_key_file) j["private_key_file"] = *m.private_key_file;
  if (m.mtu) j["mtu"] = *m.mtu;
  if (m.netns) j["netns"] = *m.netns;
  j["peers"] = json::array();
  for (const auto& p : m.peers) {
    json pj;
    pj["public_key"] = key_to_base64(p.public_key);
    if (p.endpoint) pj["endpoint"] = p.endpoint->str();
    pj["allowed_ips"] = json::array();
    for (const auto& a : p.allowed_ips) pj["allowed_ips"].push_back(a.str());
    pj["persistent_keepalive"] = p.persistent_keepalive;
    j["peers"].push_back(std::move(pj));
  }
  return j;
}

Result<Backend> parse_backend(std::string_view s) {
  if (s == "auto") return Backend::Auto;
  if (s == "kernel") return Backend::Kernel;
  if (s == "userspace") return Backend::Userspace;
  return Error{"unknown backend '" + std::string(s) + "' (accepted: auto, kernel, userspace)"};
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::Auto:
      return "auto";
    case Backend::Kernel:
      return "kernel";
    case Backend::Userspace:
      return "userspace";
  }
  return "?";
}

}  // namespace fa::overlay
