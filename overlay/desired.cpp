// SPDX-License-Identifier: Apache-2.0
// The desired-state document: validated whole before anything is touched
// (systemd-networkd's parse -> verify -> apply). Every problem is collected
// with its field path, the value as written and what would be accepted.
// One reader: a JSON document (a YAML file is converted to one first).
#include <sys/socket.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "common/json.hpp"
#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

using nlohmann::json;

std::string ValidationError::str() const {
  if (field.empty()) return message;
  return field + ": `" + value + "': " + message;
}

bool valid_interface_name(std::string_view s) {
  // Linux dev_valid_name(): 1-15 bytes, not "." or "..", no '/', ':' or
  // whitespace.
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (unsigned char c : s)
    if (c == '/' || c == ':' || c <= ' ' || c >= 0x7f) return false;
  return true;
}

namespace {

constexpr std::initializer_list<const char*> kTopKeys = {
    "cluster_id", "interface", "address", "listen_port", "private_key_file", "mtu", "netns", "peers"};
constexpr std::initializer_list<const char*> kPeerKeys = {"public_key", "endpoint", "allowed_ips",
                                                          "persistent_keepalive"};
constexpr std::initializer_list<const char*> kChangeKeys = {"cluster_id", "peers", "remove"};

// A value as an error echoes it: strings as written but with control
// characters escaped (a NUL or a newline would hide what follows it),
// anything else as JSON (bytes that are not UTF-8 replaced, so the echo can
// itself be written as JSON); cut at 80 characters.
std::string show_value(const json& v) {
  if (v.is_string()) {
    std::string out;
    for (unsigned char c : v.get_ref<const std::string&>()) {
      if (c < 0x20 || c == 0x7f) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", c);
        out += esc;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// nlohmann's serializer is the check: it refuses what is not UTF-8.
bool is_utf8(const std::string& s) {
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return true;
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

class Checker {
 public:
  std::vector<ValidationError> errors;

  void fail(std::string field, std::string value, std::string msg) {
    errors.push_back({std::move(field), std::move(value), std::move(msg)});
  }
  void fail(std::string field, const json* v, std::string msg) {
    fail(std::move(field), v ? show_value(*v) : std::string(), std::move(msg));
  }

  // Unknown keys are errors: a typo like `allowed_ip` must not silently
  // drop a peer's routes.
  void known_keys(const std::string& prefix, const json& obj, std::initializer_list<const char*> keys) {
    std::string list;
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (auto k : keys) ok |= it.key() == k;
      if (ok) continue;
      if (list.empty())
        for (auto k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(prefix + it.key(), &it.value(), "unknown key (accepted: " + list + ")");
    }
  }

  // A mesh file's strings come from yaml-cpp, which passes any byte
  // through: one that is not UTF-8 text would make every later dump()
  // (state.json, `mesh apply --json`, the API's answers) throw.
  const std::string* str(const std::string& field, const json& v) {
    if (!v.is_string()) {
      fail(field, &v, "expected a string");
      return nullptr;
    }
    const auto& s = v.get_ref<const std::string&>();
    if (!is_utf8(s)) {
      fail(field, &v, "expected UTF-8 text");
      return nullptr;
    }
    return &s;
  }

  std::optional<int64_t> integer(const std::string& field, const json& v, int64_t lo, int64_t hi,
                                 const char* what) {
    if (!v.is_number_integer()) {
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

const json* find(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}
bool present(const json* v) { return v && !v->is_null(); }

bool valid_name(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (unsigned char c : s)
    if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return s != "." && s != "..";
}

struct PrefixHash {
  size_t operator()(const IpPrefix& p) const noexcept {
    uint64_t lo, hi;
    std::memcpy(&lo, p.addr.data(), 8);
    std::memcpy(&hi, p.addr.data() + 8, 8);
    return std::hash<uint64_t>()(lo ^ (hi * 0x9e3779b97f4a7c15ULL) ^ (uint64_t(p.len) << 56));
  }
};

// The overlay's network from the options, or an error.
std::optional<IpPrefix> overlay_net(const ParseOptions& opt, Checker& ck) {
  auto cidr = IpPrefix::parse(opt.overlay_cidr);
  if (!cidr || cidr->family != AF_INET) {
    ck.fail("overlay_cidr", opt.overlay_cidr, "expected an IPv4 prefix like 10.42.0.0/24");
    return std::nullopt;
  }
  return cidr->network();
}

// What makes a mesh one: each key and each allowed IP once, and none of
// them covering this node's address. Peers are checked in order against
// those before them.
class Uniqueness {
 public:
  explicit Uniqueness(std::optional<IpPrefix> self) {
    if (self) {
      self->len = 32;
      self_ = *self;
    }
  }
  // The name an error gives to an earlier peer.
  using Namer = std::function<std::string(size_t)>;

  // false: `k` was seen before (first names the earlier one).
  bool key(const Key& k, size_t who, size_t* first) {
    auto [it, fresh] = keys_.emplace(k, who);
    if (!fresh) *first = it->second;
    return fresh;
  }
  enum class Ip { Ok, Duplicate, CoversSelf };
  Ip ip(const IpPrefix& a, size_t who, size_t item, std::pair<size_t, size_t>* first) {
    IpPrefix n = a.network();
    auto [it, fresh] = ips_.emplace(n, std::pair{who, item});
    if (!fresh) {
      *first = it->second;
      return Ip::Duplicate;
    }
    if (self_ && n.contains(*self_)) return Ip::CoversSelf;
    return Ip::Ok;
  }
  const std::optional<IpPrefix>& self() const { return self_; }

 private:
  std::optional<IpPrefix> self_;
  std::unordered_map<Key, size_t, KeyHash> keys_;
  std::unordered_map<IpPrefix, std::pair<size_t, size_t>, PrefixHash> ips_;
};

std::string peer_path(const std::string& list, size_t i) { return list + "[" + std::to_string(i) + "]"; }

// One peer entry at `path` (e.g. "peers[3]"); nullopt when its key is
// unusable (any other error is in ck, and the peer is still returned so
// that the checks after it see it).
std::optional<DesiredPeer> parse_peer(const json& pj, const std::string& path, const std::string& list,
                                      const IpPrefix& net, size_t index, Uniqueness& seen, Checker& ck) {
  if (!pj.is_object()) {
    ck.fail(path, &pj, "expected a mapping with public_key, endpoint, allowed_ips, persistent_keepalive");
    return std::nullopt;
  }
  ck.known_keys(path + ".", pj, kPeerKeys);
  DesiredPeer p;
  bool ok = true;
  const json* key = find(pj, "public_key");
  if (!key) {
    ck.fail(path + ".public_key", nullptr, "required: the peer's base64 public key (44 characters)");
    ok = false;
  } else if (auto s = ck.str(path + ".public_key", *key)) {
    auto k = key_from_base64(*s);
    size_t first = 0;
    if (!k) {
      ck.fail(path + ".public_key", key, k.error().message);
      ok = false;
    } else if (!seen.key(*k, index, &first)) {
      ck.fail(path + ".public_key", key,
              "duplicate: same key as " + peer_path(list, first) + "; public keys must be unique");
      ok = false;
    } else {
      p.public_key = *k;
    }
  } else {
    ok = false;
  }
  if (const json* ep = find(pj, "endpoint"); present(ep)) {
    if (auto s = ck.str(path + ".endpoint", *ep)) {
      auto e = Endpoint::parse(*s);
      if (!e)
        ck.fail(path + ".endpoint", ep, "expected IPv4:port or [IPv6]:port with port 1-65535");
      else
        p.endpoint = *e;
    }
  }
  const json* ips = find(pj, "allowed_ips");
  if (!ips) {
    ck.fail(path + ".allowed_ips", nullptr, "required: a list of prefixes inside " + net.str());
  } else if (!ips->is_array()) {
    ck.fail(path + ".allowed_ips", ips, "expected a list of prefixes inside " + net.str());
  } else {
    for (size_t j = 0; j < ips->size(); ++j) {
      const std::string f = path + ".allowed_ips[" + std::to_string(j) + "]";
      const json& v = (*ips)[j];
      auto s = ck.str(f, v);
      if (!s) continue;
      auto a = IpPrefix::parse(*s);
      // Only overlay addresses: a peer announcing 0.0.0.0/0 or a host's
      // LAN would pull the provider's own traffic into the mesh.
      if (!a || !net.contains(*a)) {
        ck.fail(f, &v, "expected a prefix inside the overlay " + net.str() + ", e.g. 10.42.0.2/32");
        continue;
      }
      std::pair<size_t, size_t> first;
      switch (seen.ip(*a, index, j, &first)) {
        case Uniqueness::Ip::Duplicate:
          ck.fail(f, &v,
                  "duplicate: already routed to " + peer_path(list, first.first) + ".allowed_ips[" +
                      std::to_string(first.second) + "]; one node per address");
          continue;
        case Uniqueness::Ip::CoversSelf:
          ck.fail(f, &v, "covers this node's own address " + seen.self()->str() + "; one node per address");
          continue;
        case Uniqueness::Ip::Ok:
          break;
      }
      p.allowed_ips.push_back(*a);
    }
  }
  if (const json* ka = find(pj, "persistent_keepalive"); present(ka))
    if (auto n = ck.integer(path + ".persistent_keepalive", *ka, 0, 65535, "0-65535 seconds (0 = off)"))
      p.persistent_keepalive = static_cast<uint16_t>(*n);
  if (!ok) return std::nullopt;
  return p;
}

// This node's address from the document's `address`.
std::optional<IpPrefix> check_address(const json* raw, const IpPrefix& net, Checker& ck) {
  if (!raw) {
    IpPrefix example = net;
    example.addr[3] |= 1;
    ck.fail("address", nullptr, "required: this node's overlay address inside " + net.str() + ", e.g. " +
                                    example.str());
    return std::nullopt;
  }
  auto s = ck.str("address", *raw);
  if (!s) return std::nullopt;
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
    ck.fail("address", raw,
            "expected a host address inside the overlay " + net.str() + " written with /" +
                std::to_string(net.len) + " (not the network or broadcast address)");
    return std::nullopt;
  }
  return *a;
}

std::string too_deep() {
  return "the document nests arrays and objects deeper than " + std::to_string(kJsonMaxDepth) +
         " levels (a desired state has 4)";
}

}  // namespace

ParseResult parse_desired(const json& doc, const ParseOptions& opt) {
  ParseResult r;
  Checker ck;
  // A value that deep would be echoed (dumped) one stack frame per level.
  if (json_depth(doc) > kJsonMaxDepth) {
    r.errors.push_back({"", "", too_deep()});
    return r;
  }
  auto netp = overlay_net(opt, ck);
  if (!netp) {
    r.errors = std::move(ck.errors);
    return r;
  }
  const IpPrefix net = *netp;
  if (!doc.is_object()) {
    r.errors.push_back({"", show_value(doc), "the mesh document must be a mapping/object"});
    return r;
  }
  ck.known_keys("", doc, kTopKeys);
  DesiredMesh m;

  if (const json* v = find(doc, "cluster_id"); !v) {
    ck.fail("cluster_id", nullptr, "required: the cluster this mesh belongs to (1-128 of A-Z a-z 0-9 . _ -)");
  } else if (auto s = ck.str("cluster_id", *v)) {
    if (!valid_name(*s, 128))
      ck.fail("cluster_id", v, "expected 1-128 characters of A-Z a-z 0-9 . _ -");
    else
      m.cluster_id = *s;
  }

  if (const json* v = find(doc, "interface")) {
    if (auto s = ck.str("interface", *v)) {
      if (!valid_interface_name(*s))
        ck.fail("interface", v,
                "expected an interface name of 1-15 characters without '/', ':' or whitespace, not '.' or '..'");
      else
        m.interface = *s;
    }
  }

  auto address = check_address(find(doc, "address"), net, ck);
  if (address) m.address = *address;

  if (const json* v = find(doc, "listen_port"))
    if (auto n = ck.integer("listen_port", *v, 1, 65535, "1-65535")) m.listen_port = static_cast<uint16_t>(*n);

  if (const json* v = find(doc, "private_key_file"); present(v)) {
    if (auto s = ck.str("private_key_file", *v)) {
      if (s->empty() || (*s)[0] != '/')
        ck.fail("private_key_file", v, "expected an absolute path");
      else
        m.private_key_file = *s;
    }
  }

  if (const json* v = find(doc, "mtu"); present(v))
    if (auto n = ck.integer("mtu", *v, 1280, 9000, "1280-9000")) m.mtu = static_cast<uint32_t>(*n);

  if (const json* v = find(doc, "netns"); present(v)) {
    if (auto s = ck.str("netns", *v)) {
      bool path = !s->empty() && (*s)[0] == '/';
      if (!path && !valid_name(*s, 255))
        ck.fail("netns", v,
                "expected an absolute path (/run/netns/NAME, /proc/PID/ns/net) or a name of A-Z a-z 0-9 . _ -");
      else
        m.netns = *s;
    }
  }

  if (const json* peers = find(doc, "peers"); present(peers)) {
    if (!peers->is_array()) {
      ck.fail("peers", peers, "expected a list of peers");
    } else {
      Uniqueness seen(address);
      m.peers.reserve(peers->size());
      for (size_t i = 0; i < peers->size(); ++i)
        if (auto p = parse_peer((*peers)[i], peer_path("peers", i), "peers", net, i, seen, ck))
          m.peers.push_back(std::move(*p));
    }
  }
  r.errors = std::move(ck.errors);
  if (r.errors.empty()) r.value = std::move(m);
  return r;
}

namespace {

// YAML -> JSON keeping types: plain scalars that read as integers, booleans
// or null become those; quoted scalars stay strings.
Result<json> yaml_to_json(const YAML::Node& n, const std::string& path, size_t depth) {
  if (depth > kJsonMaxDepth) return Error{too_deep()};
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
        auto v = yaml_to_json(n[i], path + "[" + std::to_string(i) + "]", depth + 1);
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
        auto v = yaml_to_json(it->second, (path.empty() ? "" : path + ".") + k, depth + 1);
        if (!v) return v;
        o[k] = std::move(*v);
      }
      return o;
    }
  }
  return json(nullptr);
}

}  // namespace

ParseResult parse_desired_text(std::string_view text, const ParseOptions& opt) {
  ParseResult r;
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    // JSON is YAML too, but nlohmann reads it several times faster.
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::exception& e) {
      r.errors.push_back({"", "", std::string("JSON syntax error: ") + e.what()});
      return r;
    }
    return parse_desired(doc, opt);
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    r.errors.push_back({"", "",
                        "YAML syntax error at line " + std::to_string(e.mark.line + 1) + ", column " +
                            std::to_string(e.mark.column + 1) + ": " + e.msg});
    return r;
  }
  auto j = yaml_to_json(root, "", 0);
  if (!j) {
    r.errors.push_back({"", "", j.error().message});
    return r;
  }
  return parse_desired(*j, opt);
}

Parsed<PeerChanges> parse_peer_changes(const json& doc, const ParseOptions& opt) {
  Parsed<PeerChanges> r;
  Checker ck;
  if (json_depth(doc) > kJsonMaxDepth) {
    r.errors.push_back({"", "", too_deep()});
    return r;
  }
  auto net = overlay_net(opt, ck);
  if (!net) {
    r.errors = std::move(ck.errors);
    return r;
  }
  if (!doc.is_object()) {
    r.errors.push_back({"", show_value(doc), "the change must be an object with cluster_id, peers, remove"});
    return r;
  }
  ck.known_keys("", doc, kChangeKeys);
  PeerChanges c;
  if (const json* v = find(doc, "cluster_id"); !v)
    ck.fail("cluster_id", nullptr, "required: the cluster of the running mesh");
  else if (auto s = ck.str("cluster_id", *v))
    c.cluster_id = *s;
  // The changed peers are checked against each other here (each key and
  // allowed IP once among them), against the rest of the mesh by
  // with_changes().
  Uniqueness seen(std::nullopt);
  if (const json* peers = find(doc, "peers"); present(peers)) {
    if (!peers->is_array()) {
      ck.fail("peers", peers, "expected a list of peers");
    } else {
      for (size_t i = 0; i < peers->size(); ++i)
        if (auto p = parse_peer((*peers)[i], peer_path("peers", i), "peers", *net, i, seen, ck))
          c.peers.push_back(std::move(*p));
    }
  }
  if (const json* rm = find(doc, "remove"); present(rm)) {
    if (!rm->is_array()) {
      ck.fail("remove", rm, "expected a list of base64 public keys");
    } else {
      for (size_t i = 0; i < rm->size(); ++i) {
        const std::string f = peer_path("remove", i);
        auto s = ck.str(f, (*rm)[i]);
        if (!s) continue;
        auto k = key_from_base64(*s);
        size_t first = 0;
        if (!k)
          ck.fail(f, &(*rm)[i], k.error().message);
        else if (!seen.key(*k, i, &first))
          ck.fail(f, &(*rm)[i], "also in peers[" + std::to_string(first) + "]: a peer is changed or removed, not both");
        else
          c.remove.push_back(*k);
      }
    }
  }
  r.errors = std::move(ck.errors);
  if (r.errors.empty()) r.value = std::move(c);
  return r;
}

Parsed<DesiredMesh> with_changes(const DesiredMesh& m, const PeerChanges& c, const ParseOptions&) {
  Parsed<DesiredMesh> r;
  std::unordered_map<Key, size_t, KeyHash> changed;  // key -> index in c.peers
  for (size_t i = 0; i < c.peers.size(); ++i) changed.emplace(c.peers[i].public_key, i);
  std::unordered_set<Key, KeyHash> removed(c.remove.begin(), c.remove.end());
  // The changed peers' networks (checked among themselves already), then the
  // rest of the mesh scanned once for them: the work follows the change,
  // not the mesh, and no table of every peer is built.
  IpPrefix self = m.address;
  self.len = 32;
  using Item = std::pair<size_t, size_t>;  // peers[i].allowed_ips[j] of the change
  std::map<Item, ValidationError> errors;
  std::unordered_map<IpPrefix, Item, PrefixHash> wanted;
  auto field = [](Item it) {
    return peer_path("peers", it.first) + ".allowed_ips[" + std::to_string(it.second) + "]";
  };
  for (size_t i = 0; i < c.peers.size(); ++i)
    for (size_t j = 0; j < c.peers[i].allowed_ips.size(); ++j) {
      const IpPrefix& a = c.peers[i].allowed_ips[j];
      IpPrefix n = a.network();
      if (n.contains(self))
        errors.emplace(Item{i, j}, ValidationError{field({i, j}), a.str(),
                                                   "covers this node's own address " + self.str() +
                                                       "; one node per address"});
      else
        wanted.emplace(n, Item{i, j});
    }
  if (!wanted.empty())
    for (const auto& p : m.peers) {
      if (changed.count(p.public_key) || removed.count(p.public_key)) continue;
      for (const auto& a : p.allowed_ips) {
        auto it = wanted.find(a.network());
        if (it == wanted.end()) continue;
        errors.emplace(it->second,
                       ValidationError{field(it->second), c.peers[it->second.first].allowed_ips[it->second.second].str(),
                                       "duplicate: already routed to the mesh's peer " + key_to_base64(p.public_key) +
                                           "; one node per address"});
      }
    }
  if (!errors.empty()) {
    for (auto& [item, e] : errors) r.errors.push_back(std::move(e));
    return r;
  }
  DesiredMesh out;
  out.cluster_id = m.cluster_id;
  out.interface = m.interface;
  out.address = m.address;
  out.listen_port = m.listen_port;
  out.private_key_file = m.private_key_file;
  out.mtu = m.mtu;
  out.netns = m.netns;
  out.peers.reserve(m.peers.size() + c.peers.size());
  std::vector<bool> placed(c.peers.size());
  for (const auto& p : m.peers) {
    if (removed.count(p.public_key)) continue;
    if (auto it = changed.find(p.public_key); it != changed.end()) {
      out.peers.push_back(c.peers[it->second]);
      placed[it->second] = true;
    } else {
      out.peers.push_back(p);
    }
  }
  for (size_t i = 0; i < c.peers.size(); ++i)
    if (!placed[i]) out.peers.push_back(c.peers[i]);
  r.value = std::move(out);
  return r;
}

json to_json(const DesiredPeer& p) {
  json ips = json::array();
  for (const auto& a : p.allowed_ips) ips.push_back(a.str());
  json o = {{"public_key", key_to_base64(p.public_key)},
            {"allowed_ips", std::move(ips)},
            {"persistent_keepalive", p.persistent_keepalive}};
  if (p.endpoint) o["endpoint"] = p.endpoint->str();
  return o;
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
  json peers = json::array();
  for (const auto& p : m.peers) peers.push_back(to_json(p));
  j["peers"] = std::move(peers);
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
