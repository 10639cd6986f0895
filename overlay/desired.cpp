// SPDX-License-Identifier: Apache-2.0
// The desired-state document: validated whole before anything is touched
// (systemd-networkd's parse -> verify -> apply). Every problem is collected
// with its field path, the value as written and what would be accepted.
#include <sys/socket.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string_view>

#include "common/json.hpp"
#include "overlay/desired_raw.hpp"
#include "overlay/internal.hpp"
#include "overlay/overlay.hpp"

namespace fa::overlay {

using nlohmann::json;

std::string ValidationError::str() const {
  if (field.empty()) return message;
  return field + ": `" + value + "': " + message;
}

bool detail::valid_ifname(std::string_view s) {
  // Linux dev_valid_name(): 1-15 bytes, not "." or "..", no '/', ':' or
  // whitespace.
  if (s.empty() || s.size() > 15 || s == "." || s == "..") return false;
  for (unsigned char c : s)
    if (c == '/' || c == ':' || c <= ' ' || c >= 0x7f) return false;
  return true;
}

namespace {

using namespace detail;

std::string show_value(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  std::string s = v.dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

// RawMesh, what the validator reads, and TextStore: overlay/desired_raw.hpp.

// ------------------------------------------------ from a parsed document ---

Raw raw_of(const json& v, TextStore& store) {
  Raw r;
  if (v.is_null()) {
    r.kind = Raw::Null;
  } else if (v.is_string()) {
    r.kind = Raw::String;
    r.s = v.get_ref<const std::string&>();
  } else if (v.is_number_unsigned()) {
    r.kind = Raw::Integer;
    r.uns = true;
    r.u = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    r.kind = Raw::Integer;
    r.i = v.get<int64_t>();
  } else {
    r.kind = Raw::Other;
    r.s = store.keep(show_value(v));
  }
  return r;
}
Raw raw_at(const json& obj, const char* key, TextStore& store) {
  auto it = obj.find(key);
  return it == obj.end() ? Raw{} : raw_of(*it, store);
}
Unknown unknown_keys(const json& obj, std::initializer_list<const char*> keys) {
  Unknown u;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (auto k : keys) ok |= it.key() == k;
    if (!ok) u.emplace_back(it.key(), show_value(it.value()));
  }
  return u;
}

RawMesh raw_from_dom(const json& doc) {
  RawMesh m;
  if (!doc.is_object()) {
    m.not_mapping = show_value(doc);
    return m;
  }
  m.unknown = unknown_keys(doc, kTopKeys);
  m.cluster_id = raw_at(doc, "cluster_id", m.store);
  m.interface = raw_at(doc, "interface", m.store);
  m.address = raw_at(doc, "address", m.store);
  m.listen_port = raw_at(doc, "listen_port", m.store);
  m.private_key_file = raw_at(doc, "private_key_file", m.store);
  m.mtu = raw_at(doc, "mtu", m.store);
  m.netns = raw_at(doc, "netns", m.store);
  auto pit = doc.find("peers");
  if (pit == doc.end()) return m;
  if (pit->is_null()) {
    m.peers.kind = Raw::Null;
  } else if (!pit->is_array()) {
    m.peers.kind = Raw::Other;
    m.peers.other = show_value(*pit);
  } else {
    m.peers.kind = Raw::List;
    m.peers.items.reserve(pit->size());
    for (const auto& pj : *pit) {
      RawPeer& p = m.peers.items.emplace_back();
      if (!pj.is_object()) {
        p.not_mapping = show_value(pj);
        continue;
      }
      p.unknown = unknown_keys(pj, kPeerKeys);
      p.public_key = raw_at(pj, "public_key", m.store);
      p.endpoint = raw_at(pj, "endpoint", m.store);
      p.persistent_keepalive = raw_at(pj, "persistent_keepalive", m.store);
      auto ait = pj.find("allowed_ips");
      if (ait == pj.end()) continue;
      if (!ait->is_array()) {
        p.allowed_ips.kind = ait->is_null() ? Raw::Null : Raw::Other;
        p.allowed_ips.other = show_value(*ait);
        continue;
      }
      p.allowed_ips.kind = Raw::List;
      p.allowed_ips.items.reserve(ait->size());
      for (const auto& a : *ait) p.allowed_ips.items.push_back(raw_of(a, m.store));
    }
  }
  return m;
}

// ------------------------------------------------------------ validation ---

// A field's path as an error names it, put together only when one does: a
// peer's fields are peers[i]<name>[j] with the indices kept as numbers, so a
// valid file builds no path at all (250 peers: ~150k instructions of string
// building fewer).
struct Field {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::string_view a, b, c;
  size_t peer = kNone;                   // "peers[peer]" before a
  size_t item = kNone;                   // "[item]" after a
  Field(const std::string& s) : a(s) {}  // NOLINT: implicit on purpose
  Field(const char* s) : a(s) {}         // NOLINT
  Field(std::string_view x, std::string_view y, std::string_view z = {}) : a(x), b(y), c(z) {}
  static Field of_peer(size_t i, std::string_view name = {}, size_t j = kNone) {
    Field f(name, {});
    f.peer = i;
    f.item = j;
    return f;
  }
  std::string str() const {
    std::string s;
    if (peer != kNone) s.append("peers[").append(std::to_string(peer)).append("]");
    s.append(a);
    if (item != kNone) s.append("[").append(std::to_string(item)).append("]");
    s.append(b).append(c);
    return s;
  }
};

class Checker {
 public:
  std::vector<ValidationError> errors;

  void fail(const Field& field, const Raw* v, std::string msg) {
    errors.push_back({field.str(), v ? v->echo() : "", std::move(msg)});
  }
  void fail(const Field& field, const std::string& echo, std::string msg) {
    errors.push_back({field.str(), echo, std::move(msg)});
  }

  // Unknown keys are errors: a typo like `allowed_ip` must not silently
  // drop a peer's routes.
  void known_keys(const Field& prefix, const Unknown& unknown, std::initializer_list<const char*> keys) {
    if (unknown.empty()) return;
    std::string list;
    for (auto k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
    for (const auto& [k, echo] : unknown)
      errors.push_back({prefix.str() + k, echo, "unknown key (accepted: " + list + ")"});
  }

  const std::string_view* str(const Field& field, const Raw& v) {
    if (v.kind != Raw::String) {
      fail(field, &v, "expected a string");
      return nullptr;
    }
    return &v.s;
  }

  std::optional<int64_t> integer(const Field& field, const Raw& v, int64_t lo, int64_t hi, const char* what) {
    if (v.kind != Raw::Integer) {
      fail(field, &v, std::string("expected an integer ") + what);
      return std::nullopt;
    }
    if (v.uns && v.u > static_cast<uint64_t>(hi)) {
      fail(field, &v, std::string("out of range, accepted: ") + what);
      return std::nullopt;
    }
    int64_t n = v.uns ? static_cast<int64_t>(v.u) : v.i;
    if (n < lo || n > hi) {
      fail(field, &v, std::string("out of range, accepted: ") + what);
      return std::nullopt;
    }
    return n;
  }
};

bool valid_name(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (unsigned char c : s)
    if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) return false;
  return s != "." && s != "..";
}

bool present(const Raw& r) { return r.kind != Raw::Absent && r.kind != Raw::Null; }

// Insert-only open-addressing table for the duplicate checks: validation
// inserts every peer's key and every allowed IP once (a node per entry, as
// std::unordered_map has, was ~500 allocations and frees for 250 peers). The
// slots hold 4-byte indexes into the entries, which are stored in insertion
// order: only the slots are zeroed (4 KiB for 500 entries, not the 48 KiB of
// slots holding the entries themselves, ~0.1 ms of memset in the lab's VM).
template <class K, class V, class Hash>
class FlatIndex {
 public:
  explicit FlatIndex(size_t expected) : slots_(std::bit_ceil(2 * expected + 2)) {
    entries_.reserve(expected);
  }
  // The value stored for k before, or nullptr once v is stored for it.
  const V* insert(const K& k, const V& v) {
    if (2 * (entries_.size() + 1) > slots_.size()) grow();
    uint32_t& s = find(k);
    if (s != 0) return &entries_[s - 1].second;
    entries_.emplace_back(k, v);
    s = static_cast<uint32_t>(entries_.size());
    return nullptr;
  }

 private:
  // The slot of k, or the empty slot where it goes (0: empty, else entry + 1).
  uint32_t& find(const K& k) {
    // The slot from the top bits of the hash times 2^64/phi (Fibonacci
    // hashing): the low bits of a hash may all be the same (the first
    // bytes of 10.42.x.y addresses are).
    const size_t mask = slots_.size() - 1;
    const int shift = 64 - std::countr_zero(slots_.size());
    for (size_t i = (uint64_t{Hash{}(k)} * 0x9e3779b97f4a7c15ULL) >> shift;; i = (i + 1) & mask)
      if (slots_[i] == 0 || entries_[slots_[i] - 1].first == k) return slots_[i];
  }
  void grow() {
    std::vector<uint32_t>(2 * slots_.size()).swap(slots_);
    for (size_t e = 0; e < entries_.size(); ++e) find(entries_[e].first) = static_cast<uint32_t>(e + 1);
  }
  std::vector<uint32_t> slots_;
  std::vector<std::pair<K, V>> entries_;
};

struct PrefixHash {
  size_t operator()(const IpPrefix& p) const noexcept {
    uint64_t lo, hi;
    std::memcpy(&lo, p.addr.data(), 8);
    std::memcpy(&hi, p.addr.data() + 8, 8);
    return std::hash<uint64_t>()(lo * 0x9e3779b97f4a7c15ULL ^ hi ^ (uint64_t(p.len) << 56 | unsigned(p.family)));
  }
};

// This node's address from the document's `address` (an error in ck when it
// is missing or wrong).
std::optional<IpPrefix> check_address(const Raw& raw, const IpPrefix& net, Checker& ck) {
  if (raw.kind == Raw::Absent) {
    ck.fail("address", nullptr,
            "required: this node's overlay address inside " + net.str() + ", e.g. " +
                IpPrefix{net.family, net.addr, net.len}.str());
    return std::nullopt;
  }
  auto s = ck.str("address", raw);
  if (!s) return std::nullopt;
  auto a = IpPrefix::parse(*s);
  if (a && s->find('/') == std::string_view::npos) a->len = net.len;
  IpPrefix host = a ? *a : IpPrefix{};
  host.len = 32;
  IpPrefix bcast = net;
  for (int i = net.len; i < 32; ++i) bcast.addr[i / 8] |= static_cast<uint8_t>(0x80 >> (i % 8));
  bcast.len = 32;
  IpPrefix netaddr = net;
  netaddr.len = 32;
  if (!a || a->family != AF_INET || a->len != net.len || !net.contains(host) || host == netaddr ||
      (net.len < 31 && host == bcast)) {
    ck.fail("address", &raw,
            "expected a host address inside the overlay " + net.str() + " written with /" +
                std::to_string(net.len) + " (not the network or broadcast address)");
    return std::nullopt;
  }
  return *a;
}

// The checks of the peer entries, in document order, with the state they
// share (the keys and allowed IPs seen so far, this node's address). Fed by
// validate() from a RawMesh holding every entry, or by the SAX reader one
// entry at a time as it reads them (PeerStream): the same checks in the same
// order, so the same errors in the same order.
class PeerCheck final : public PeerStream {
 public:
  PeerCheck(const IpPrefix& net, size_t expected) : net_(net), seen_keys_(expected), seen_ips_(expected) {
    peers.reserve(expected);
  }
  void set_self(const std::optional<IpPrefix>& address) {
    have_address_ = address.has_value();
    if (address) {
      self_ = *address;
      self_.len = 32;
    }
  }
  // The SAX reader takes the peers one at a time only when `address` came
  // before them: an allowed IP covering this node's address is an error at
  // its place among the peer's (what address() says in validate() is only
  // told after, with the other fields, in their order).
  bool begin(const RawMesh& so_far) override {
    if (so_far.address.kind == Raw::Absent) return false;
    Checker quiet;
    set_self(check_address(so_far.address, net_, quiet));
    return true;
  }
  void peer(size_t i, const RawPeer& pj) override { check(i, pj); }

  void check(size_t i, const RawPeer& pj) {
    if (pj.not_mapping) {
      ck.fail(Field::of_peer(i), *pj.not_mapping,
              "expected a mapping with public_key, endpoint, allowed_ips, persistent_keepalive");
      return;
    }
    ck.known_keys(Field::of_peer(i, "."), pj.unknown, kPeerKeys);
    DesiredPeer p;
    bool ok = true;
    if (pj.public_key.kind == Raw::Absent) {
      ck.fail(Field::of_peer(i, ".public_key"), nullptr,
              "required: the peer's base64 public key (44 characters)");
      ok = false;
    } else if (auto s = ck.str(Field::of_peer(i, ".public_key"), pj.public_key)) {
      auto k = public_key_from_base64(*s);
      if (!k) {
        ck.fail(Field::of_peer(i, ".public_key"), &pj.public_key, k.error().message);
        ok = false;
      } else if (const size_t* first = seen_keys_.insert(*k, i)) {
        ck.fail(Field::of_peer(i, ".public_key"), &pj.public_key,
                "duplicate: same key as peers[" + std::to_string(*first) + "]; public keys must be unique");
        ok = false;
      } else {
        p.public_key = *k;
      }
    } else {
      ok = false;
    }
    if (present(pj.endpoint)) {
      if (auto s = ck.str(Field::of_peer(i, ".endpoint"), pj.endpoint)) {
        auto e = Endpoint::parse(*s);
        if (!e)
          ck.fail(Field::of_peer(i, ".endpoint"), &pj.endpoint,
                  "expected IPv4:port or [IPv6]:port with port 1-65535");
        else
          p.endpoint = *e;
      }
    }
    const RawIps& ips = pj.allowed_ips;
    if (ips.kind == Raw::Absent) {
      ck.fail(Field::of_peer(i, ".allowed_ips"), nullptr,
              "required: a list of prefixes inside " + net_.str());
    } else if (!ips.is_list()) {
      ck.fail(Field::of_peer(i, ".allowed_ips"), ips.other,
              "expected a list of prefixes inside " + net_.str());
    } else {
      p.allowed_ips.reserve(ips.items.size());
      for (size_t j = 0; j < ips.items.size(); ++j) {
        const Field f = Field::of_peer(i, ".allowed_ips", j);
        auto s = ck.str(f, ips.items[j]);
        if (!s) continue;
        auto a = IpPrefix::parse(*s);
        // Only overlay addresses: a peer announcing 0.0.0.0/0 or a
        // host's LAN would pull the provider's own traffic into the mesh.
        if (!a || !net_.contains(*a)) {
          ck.fail(f, &ips.items[j],
                  "expected a prefix inside the overlay " + net_.str() + ", e.g. 10.42.0.2/32");
          continue;
        }
        IpPrefix n = a->network();
        if (const auto* first = seen_ips_.insert(n, std::pair{i, j})) {
          ck.fail(f, &ips.items[j],
                  "duplicate: already routed to peers[" + std::to_string(first->first) + "].allowed_ips[" +
                      std::to_string(first->second) + "]; one node per address");
          continue;
        }
        if (have_address_ && n.contains(self_)) {
          ck.fail(f, &ips.items[j],
                  "covers this node's own address " + self_.str() + "; one node per address");
          continue;
        }
        p.allowed_ips.push_back(*a);
      }
    }
    if (present(pj.persistent_keepalive))
      if (auto n = ck.integer(Field::of_peer(i, ".persistent_keepalive"), pj.persistent_keepalive, 0, 65535,
                              "0-65535 seconds (0 = off)"))
        p.persistent_keepalive = static_cast<uint16_t>(*n);
    if (ok) peers.push_back(std::move(p));
  }

  Checker ck;                      // the peers' errors
  std::vector<DesiredPeer> peers;  // the entries without an error in their key

 private:
  IpPrefix net_;
  bool have_address_ = false;
  IpPrefix self_;
  FlatIndex<Key, size_t, KeyHash> seen_keys_;
  FlatIndex<IpPrefix, std::pair<size_t, size_t>, PrefixHash> seen_ips_;  // -> peers[i].allowed_ips[j]
};

std::optional<IpPrefix> overlay_net(const ParseOptions& opt) {
  auto cidr = IpPrefix::parse(opt.overlay_cidr);
  if (!cidr || cidr->family != AF_INET) return std::nullopt;
  return cidr->network();
}

// streamed: the checks the SAX reader fed with the peers as it read them
// (doc.peers_streamed), else validate() runs them over doc.peers.
ParseResult validate(const RawMesh& doc, const ParseOptions& opt, PeerCheck* streamed = nullptr) {
  ParseResult r;
  Checker ck;
  auto netp = overlay_net(opt);
  if (!netp) {
    r.errors.push_back({"overlay_cidr", opt.overlay_cidr, "expected an IPv4 prefix like 10.42.0.0/24"});
    return r;
  }
  const IpPrefix net = *netp;
  if (doc.not_mapping) {
    r.errors.push_back({"", *doc.not_mapping, "the mesh document must be a mapping/object"});
    return r;
  }
  ck.known_keys("", doc.unknown, kTopKeys);
  DesiredMesh m;

  if (doc.cluster_id.kind == Raw::Absent) {
    ck.fail("cluster_id", nullptr, "required: the cluster this mesh belongs to (1-128 of A-Z a-z 0-9 . _ -)");
  } else if (auto s = ck.str("cluster_id", doc.cluster_id)) {
    if (!valid_name(*s, 128))
      ck.fail("cluster_id", &doc.cluster_id, "expected 1-128 characters of A-Z a-z 0-9 . _ -");
    else
      m.cluster_id = std::string(*s);
  }

  if (doc.interface.kind != Raw::Absent) {
    if (auto s = ck.str("interface", doc.interface)) {
      if (!valid_ifname(*s))
        ck.fail(
            "interface", &doc.interface,
            "expected an interface name of 1-15 characters without '/', ':' or whitespace, not '.' or '..'");
      else
        m.interface = std::string(*s);
    }
  }

  auto address = check_address(doc.address, net, ck);
  if (address) m.address = *address;

  if (doc.listen_port.kind != Raw::Absent)
    if (auto n = ck.integer("listen_port", doc.listen_port, 1, 65535, "1-65535"))
      m.listen_port = static_cast<uint16_t>(*n);

  if (present(doc.private_key_file)) {
    if (auto s = ck.str("private_key_file", doc.private_key_file)) {
      if (s->empty() || (*s)[0] != '/')
        ck.fail("private_key_file", &doc.private_key_file, "expected an absolute path");
      else
        m.private_key_file = std::string(*s);
    }
  }

  if (present(doc.mtu))
    if (auto n = ck.integer("mtu", doc.mtu, 1280, 9000, "1280-9000")) m.mtu = static_cast<uint32_t>(*n);

  if (present(doc.netns)) {
    if (auto s = ck.str("netns", doc.netns)) {
      bool path = !s->empty() && (*s)[0] == '/';
      if (!path && !valid_name(*s, 255))
        ck.fail(
            "netns", &doc.netns,
            "expected an absolute path (/run/netns/NAME, /proc/PID/ns/net) or a name of A-Z a-z 0-9 . _ -");
      else
        m.netns = std::string(*s);
    }
  }

  std::optional<PeerCheck> own;
  PeerCheck* pc = doc.peers_streamed ? streamed : nullptr;
  if (doc.peers.kind == Raw::Other) {
    ck.fail("peers", doc.peers.other, "expected a list of peers");
  } else if (doc.peers.is_list() && !pc) {
    pc = &own.emplace(net, doc.peers.items.size());
    pc->set_self(address);
    for (size_t i = 0; i < doc.peers.items.size(); ++i) pc->check(i, doc.peers.items[i]);
  }
  if (pc) {
    ck.errors.insert(ck.errors.end(), std::make_move_iterator(pc->ck.errors.begin()),
                     std::make_move_iterator(pc->ck.errors.end()));
    m.peers = std::move(pc->peers);
  }
  r.errors = std::move(ck.errors);
  if (r.errors.empty()) r.mesh = std::move(m);
  return r;
}

}  // namespace

ParseResult parse_desired(const json& doc, const ParseOptions& opt) {
  // A value that deep would be echoed (dumped) one stack frame per level.
  if (json_depth(doc) > kJsonMaxDepth) {
    ParseResult r;
    r.errors.push_back({"", "",
                        "the document nests arrays and objects deeper than " + std::to_string(kJsonMaxDepth) +
                            " levels (a desired state has 4)"});
    return r;
  }
  return validate(raw_from_dom(doc), opt);
}

std::optional<ParseResult> parse_desired_json_sax(std::string_view text, const ParseOptions& opt) {
  RawMesh raw;
  // A peer takes at least 64 characters of JSON: room for every peer
  // without regrowth, whether they are kept or checked as they are read.
  const size_t most_peers = text.size() / 64;
  std::optional<PeerCheck> stream;
  if (auto net = overlay_net(opt)) stream.emplace(*net, most_peers);
  if (!read_json_sax(text, raw, &opt.on_interface, stream ? &*stream : nullptr, most_peers))
    return std::nullopt;
  return validate(raw, opt, stream ? &*stream : nullptr);
}

namespace {

// Where in a JSON text nlohmann stopped with an error: the field path of the
// value it was reading ("peers[3].persistent_keepalive") and the token.
class WhereSax {
 public:
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(json::number_integer_t) { return value(); }
  bool number_unsigned(json::number_unsigned_t) { return value(); }
  bool number_float(json::number_float_t, const json::string_t&) { return value(); }
  bool string(json::string_t&) { return value(); }
  bool binary(json::binary_t&) { return value(); }
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    frames_.back().key = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string& last, const nlohmann::detail::exception& e) {
    id = e.id;
    token = last;
    for (const auto& f : frames_) {
      if (f.array)
        field += "[" + std::to_string(f.index) + "]";
      else
        field += (field.empty() ? "" : ".") + f.key;
    }
    return false;
  }

  int id = 0;
  std::string field, token;

 private:
  struct Frame {
    bool array;
    size_t index = 0;  // array: the element being read
    std::string key;   // object: the key whose value is being read
  };
  bool open(bool array) {
    frames_.push_back({array, 0, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  bool value() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
    return true;
  }
  std::vector<Frame> frames_;
};

}  // namespace

ParseResult parse_desired_json(std::string_view text, const ParseOptions& opt) {
  if (auto r = parse_desired_json_sax(text, opt)) return std::move(*r);
  try {
    return parse_desired(json::parse(text), opt);  // throws json::parse_error on a syntax error
  } catch (const json::out_of_range&) {
    // nlohmann reads a number as a 64-bit integer or a double, and one that
    // fits neither (1e999) stops it (its error 406). That is bad input in a
    // field like any other: say which, with the number as written.
    WhereSax where;
    json::sax_parse(text, &where);
    if (where.id != 406) throw;
    ParseResult r;
    r.errors.push_back(
        {where.field, where.token,
         "number out of range: JSON numbers are read as 64-bit integers or doubles, and this one "
         "fits neither"});
    return r;
  }
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
  // Built in place, without a lookup per field (as show_doc does).
  json::array_t peers;
  peers.reserve(m.peers.size());
  for (const auto& p : m.peers) {
    json::array_t ips;
    ips.reserve(p.allowed_ips.size());
    for (const auto& a : p.allowed_ips) ips.emplace_back(a.str());
    json& pj = peers.emplace_back(json::value_t::object);
    auto& o = *pj.get_ptr<json::object_t*>();
    o.emplace("public_key", key_to_base64(p.public_key));
    if (p.endpoint) o.emplace("endpoint", p.endpoint->str());
    o.emplace("allowed_ips", std::move(ips));
    o.emplace("persistent_keepalive", p.persistent_keepalive);
  }
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
