// SPDX-License-Identifier: Apache-2.0
#include "probes/logic.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>

#include "common/cli.hpp"

namespace fa::probes {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// GID text -> 16 bytes; callers check is_valid_gid first.
std::array<uint8_t, 16> gid_bytes(std::string_view gid) {
  std::array<uint8_t, 16> b{};
  size_t k = 0;
  for (size_t i = 0; i + 1 < gid.size() && k < 16;) {
    if (gid[i] == ':') {
      ++i;
      continue;
    }
    b[k++] = static_cast<uint8_t>(hex_val(gid[i]) << 4 | hex_val(gid[i + 1]));
    i += 2;
  }
  return b;
}

std::string port_key(const Hca& h, const Port& p) { return h.name + ":" + std::to_string(p.port); }

// fabric.hcas entries name a device ("mlx5_0") or one port ("mlx5_0:1").
bool allowed(const InspectOptions& o, const std::string& hca, const std::string& port) {
  if (o.hcas.empty()) return true;
  return std::any_of(o.hcas.begin(), o.hcas.end(),
                     [&](const std::string& e) { return e == hca || e == port; });
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

uint32_t mask_of(int prefix_len) {
  return prefix_len <= 0 ? 0u : (prefix_len >= 32 ? 0xffffffffu : ~((1u << (32 - prefix_len)) - 1));
}

}  // namespace

std::optional<double> parse_rate_gbps(std::string_view s) {
  s = trim(s);
  auto sp = s.find(' ');
  if (sp == std::string_view::npos || sp == 0) return std::nullopt;
  std::string_view num = s.substr(0, sp);
  if (s.substr(sp + 1, 6) != "Gb/sec") return std::nullopt;
  auto v = parse_decimal(num);
  if (!v || !(*v > 0) || *v > 1e6) return std::nullopt;
  return v;
}

std::optional<std::pair<int, std::string>> parse_numbered_state(std::string_view s) {
  s = trim(s);
  auto colon = s.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  int n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + colon, n);
  if (ec != std::errc() || p != s.data() + colon || n < 0) return std::nullopt;
  std::string_view name = trim(s.substr(colon + 1));
  if (name.empty()) return std::nullopt;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ' ')) return std::nullopt;
  return std::pair<int, std::string>{n, std::string(name)};
}

std::optional<uint32_t> parse_uint(std::string_view s) {
  s = trim(s);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return std::nullopt;
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_counter(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

bool is_valid_gid(std::string_view gid) {
  if (gid.size() != 39) return false;
  for (size_t i = 0; i < gid.size(); ++i) {
    if (i % 5 == 4) {
      if (gid[i] != ':') return false;
    } else if (!is_hex(gid[i])) {
      return false;
    }
  }
  return true;
}

bool is_zero_gid(std::string_view gid) {
  for (char c : gid)
    if (c != '0' && c != ':') return false;
  return true;
}

std::optional<uint32_t> gid_ipv4(std::string_view gid) {
  if (!is_valid_gid(gid)) return std::nullopt;
  auto b = gid_bytes(gid);
  for (int i = 0; i < 10; ++i)
    if (b[i] != 0) return std::nullopt;
  if (b[10] != 0xff || b[11] != 0xff) return std::nullopt;
  return uint32_t{b[12]} << 24 | uint32_t{b[13]} << 16 | uint32_t{b[14]} << 8 | b[15];
}

std::string gid_subnet_prefix(std::string_view gid) { return std::string(gid.substr(0, 19)); }

std::string ipv4_to_string(uint32_t a) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", a >> 24, (a >> 16) & 0xff, (a >> 8) & 0xff, a & 0xff);
  return buf;
}

std::string ipv4_segment(uint32_t addr, int prefix_len) {
  return ipv4_to_string(addr & mask_of(prefix_len)) + "/" + std::to_string(prefix_len);
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto esc = [&](unsigned char c) {
    char b[5];
    std::snprintf(b, sizeof b, "\\x%02x", c);
    out += b;
  };
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // Length of a well-formed UTF-8 sequence starting here (RFC 3629), else 0.
    size_t n = 0;
    if (c >= 0xc2 && c <= 0xdf)
      n = 2;
    else if (c >= 0xe0 && c <= 0xef)
      n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
      n = 4;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && n == 3) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogates
    }
    if (ok && n == 4) {
      auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);  // overlong, > U+10FFFF
    }
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      esc(c);
      ++i;
    }
  }
  return out;
}

bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t i0 = i, j0 = j;
      while (i0 < a.size() && a[i0] == '0') ++i0;
      while (j0 < b.size() && b[j0] == '0') ++j0;
      size_t ie = i0, je = j0;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      // Without leading zeros, a longer digit run is a larger number.
      if (ie - i0 != je - j0) return ie - i0 < je - j0;
      if (auto c = a.substr(i0, ie - i0).compare(b.substr(j0, je - j0)); c != 0) return c < 0;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;  // equal under natural order (e.g. leading zeros): keep a total order
}

std::string format_nccl_ib_hca(std::vector<std::string> ports) {
  std::sort(ports.begin(), ports.end(), [](const auto& x, const auto& y) { return natural_less(x, y); });
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  return "=" + join(ports, ",");
}

std::string format_guid(uint64_t guid) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(guid));
  return buf;
}

std::string infiniband_fabric_id(std::string_view subnet_prefix, uint64_t sm_guid) {
  std::string p;
  for (char c : subnet_prefix)
    if (c != ':') p += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  char g[17];
  std::snprintf(g, sizeof g, "%016llx", static_cast<unsigned long long>(sm_guid));
  return "ib:" + p + ":" + g;
}

std::string roce_fabric_id(std::string_view provider_id, const std::vector<std::string>& segments) {
  return "roce:" + std::string(provider_id) + ":" + join(segments, ",");
}

std::optional<std::pair<uint32_t, int>> parse_ipv4_segment(std::string_view seg) {
  auto slash = seg.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  uint32_t a = 0;
  std::string_view ip = seg.substr(0, slash);
  for (int i = 0; i < 4; ++i) {
    auto dot = ip.find('.');
    std::string_view part = ip.substr(0, i < 3 ? dot : std::string_view::npos);
    if ((i < 3 && dot == std::string_view::npos) || part.empty()) return std::nullopt;
    unsigned v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (ec != std::errc() || p != part.data() + part.size() || v > 255) return std::nullopt;
    a = a << 8 | v;
    if (i < 3) ip.remove_prefix(dot + 1);
  }
  int len = 0;
  std::string_view l = seg.substr(slash + 1);
  auto [p, ec] = std::from_chars(l.data(), l.data() + l.size(), len);
  if (ec != std::errc() || p != l.data() + l.size() || len < 0 || len > 32) return std::nullopt;
  return std::pair<uint32_t, int>{a & mask_of(len), len};
}

std::string covering_segment(const std::vector<std::string>& segments) {
  std::optional<std::pair<uint32_t, int>> cover;
  for (const auto& sg : segments) {
    auto n = parse_ipv4_segment(sg);
    if (!n) continue;
    if (!cover) {
      cover = n;
      continue;
    }
    int len = std::min(cover->second, n->second);
    while (len > 0 && (cover->first & mask_of(len)) != (n->first & mask_of(len))) --len;
    cover = std::pair<uint32_t, int>{cover->first & mask_of(len), len};
  }
  return cover ? ipv4_segment(cover->first, cover->second) : "";
}

const NetLink* NetState::find(std::string_view name) const {
  for (const auto& l : links)
    if (l.name == name) return &l;
  return nullptr;
}

std::vector<smp::SmInfoRecord> sms_in_takeover_order(std::vector<smp::SmInfoRecord> records,
                                                     const std::optional<smp::SmInfo>& master,
                                                     uint32_t master_lid) {
  if (master && master->guid != 0 &&
      std::none_of(records.begin(), records.end(),
                   [&](const smp::SmInfoRecord& r) { return r.info.guid == master->guid; }))
    records.push_back({master_lid, *master});
  // One entry per GUID (a table read across a takeover can list one twice).
  auto by_guid = [](const auto& a, const auto& b) { return a.info.guid < b.info.guid; };
  std::stable_sort(records.begin(), records.end(), by_guid);
  records.erase(std::unique(records.begin(), records.end(),
                            [](const auto& a, const auto& b) { return a.info.guid == b.info.guid; }),
                records.end());
  std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.info.priority > b.info.priority;  // equal priority keeps GUID order
  });
  auto is_master = [&](const smp::SmInfoRecord& r) {
    return master ? r.info.guid == master->guid : r.info.sm_state == 3;
  };
  std::stable_partition(records.begin(), records.end(), is_master);
  return records;
}

const smp::SmInfoRecord* fabric_anchor_sm(const std::vector<smp::SmInfoRecord>& sms) {
  const smp::SmInfoRecord* last = nullptr;
  for (const auto& r : sms)
    if (!last || r.info.priority < last->info.priority ||
        (r.info.priority == last->info.priority && r.info.guid > last->info.guid))
      last = &r;
  return last;
}

// --- fabric selection ------------------------------------------------------
// select_fabric() in steps: the candidate ports grouped by fabric (the
// InfiniBand and the RoCE rules), the fabric with most ACTIVE ports, then
// what it is called and what NCCL is told, with a reason for each choice.

namespace {

// A candidate port of a fabric; for RoCE, the port's GID in that segment.
struct Member {
  std::string key;  // dev:port
  bool active = false;
  // RoCE
  int gid_index = -1;
  uint32_t addr = 0;
  std::string netdev;
  std::string segment;
  std::string state;
  std::optional<double> rate_gbps;
};

// The candidate ports of one fabric: one InfiniBand subnet and SM, or one
// RoCE segment.
struct Group {
  std::string kind;  // infiniband | roce
  std::string label;
  std::string subnet_prefix;
  uint32_t sm_lid = 0;
  std::optional<uint64_t> sm_guid;
  std::string sm_error;
  std::vector<smp::SmInfoRecord> sms;  // takeover order, master first
  std::optional<uint64_t> anchor;      // the SM that names the fabric
  bool sa_read = false;
  std::string sa_error;
  std::string segment;
  std::vector<Member> members;
  int active() const {
    return static_cast<int>(
        std::count_if(members.begin(), members.end(), [](const Member& m) { return m.active; }));
  }
};

struct Candidates {
  std::map<std::string, Group> groups;  // ordered key: deterministic tie-break
  std::vector<std::string> excluded;    // why a port or a RoCE GID was not taken
  bool pin_seen = false;                // a usable GID on the pinned fabric.netdev
};

void warn(Selection& out, std::string w) { out.warnings.push_back(std::move(w)); }
void reason(Selection& out, std::string k, std::string v) {
  out.reasons.emplace_back(std::move(k), std::move(v));
}

const SmLookup* sm_for(const std::vector<std::pair<std::string, SmLookup>>& sm, const std::string& key) {
  for (const auto& [k, v] : sm)
    if (k == key) return &v;
  return nullptr;
}

// InfiniBand: an ACTIVE port with GID 0 (its subnet prefix) and an SM LID.
void add_infiniband_port(const std::string& key, const Port& p, const SmLookup* l, Candidates& c,
                         Selection& out) {
  if (p.state != "ACTIVE") {  // a DOWN IB port has no SM and no fabric to name
    c.excluded.push_back(key + ": " + (p.state.empty() ? "state unknown" : p.state));
    return;
  }
  const Gid* g0 = nullptr;
  for (const auto& g : p.gids)
    if (g.index == 0) g0 = &g;
  if (!g0) {
    warn(out, key + ": ACTIVE InfiniBand port without GID 0; its subnet prefix is unknown, port left out");
    return;
  }
  if (!p.sm_lid || *p.sm_lid == 0) {
    warn(out, key + ": ACTIVE InfiniBand port reports no SM LID; port left out of the fabric");
    return;
  }
  std::string prefix = gid_subnet_prefix(g0->gid);
  std::optional<uint64_t> guid = l ? l->guid : std::nullopt;
  std::vector<smp::SmInfoRecord> sms;
  const smp::SmInfoRecord* anchor = nullptr;
  if (l && l->records) {
    sms = sms_in_takeover_order(*l->records, l->master, *p.sm_lid);
    anchor = fabric_anchor_sm(sms);
  }
  // Ports agree on a fabric when prefix and SMs agree; without the SA's
  // table the master's GUID, without that the SM LID (not unique across
  // fabrics) is the best key we have.
  std::string gkey = "ib|" + prefix + "|" +
                     (anchor ? "anchor " + format_guid(anchor->info.guid)
                      : guid ? "master " + format_guid(*guid)
                             : "lid " + std::to_string(*p.sm_lid));
  Group& gr = c.groups[gkey];
  if (gr.members.empty()) {
    gr.kind = "infiniband";
    gr.subnet_prefix = prefix;
    gr.sm_lid = *p.sm_lid;
    gr.sm_guid = guid;
    gr.sm_error = l ? l->error : "";
    gr.sa_read = l && l->records;
    gr.sa_error = l ? l->sa_error : "";
    gr.sms = sms;
    if (anchor) gr.anchor = anchor->info.guid;
    if (!gr.sm_guid)  // SMInfo failed, the SA still names its master
      for (const auto& r : sms)
        if (r.info.sm_state == 3) gr.sm_guid = r.info.guid;
    gr.label = "InfiniBand subnet " + prefix + " SM LID " + std::to_string(*p.sm_lid) +
               (gr.sm_guid ? " (SM GUID " + format_guid(*gr.sm_guid) + ")" : "");
  }
  gr.members.push_back({key, true, -1, 0, "", "", p.state, p.rate_gbps});
}

// Why netdev `nd` cannot carry a RoCE GID with address `addr` (apart from
// the default route), or "" with `held` set to its entry for that address.
std::string netdev_problem(const std::string& nd, uint32_t addr, const NetState& net,
                           const InspectOptions& opts, const Ipv4Addr*& held) {
  if (nd.empty()) return "no netdev";
  if (!opts.fabric_netdev.empty() && nd != opts.fabric_netdev)
    return "not the configured fabric.netdev " + opts.fabric_netdev;
  const NetLink* l = net.find(nd);
  if (!l) return "netdev not found over rtnetlink";
  if (!l->up) return "netdev is down";
  held = nullptr;
  for (const auto& x : l->addrs)
    if (x.addr == addr) held = &x;
  if (!held) return "netdev does not hold that address";
  return "";
}

// RoCE: every RoCE v2 GID carrying an IPv4 address on an up netdev that
// holds that address and does not carry the default route; per segment,
// the port's lowest such GID.
void add_roce_port(const std::string& key, const Port& p, const NetState& net, const InspectOptions& opts,
                   Candidates& c, Selection& out) {
  const bool pinned = !opts.fabric_netdev.empty();
  std::map<std::string, Member> per_segment;
  for (const auto& g : p.gids) {
    if (g.type != "RoCE v2") continue;
    auto a = gid_ipv4(g.gid);
    if (!a) continue;
    std::string nd = g.netdev.empty() ? p.netdev : g.netdev;
    std::string where = key + " GID " + std::to_string(g.index) + " (" + ipv4_to_string(*a) + " on " +
                        (nd.empty() ? "no netdev" : nd) + ")";
    const Ipv4Addr* ia = nullptr;
    if (std::string why = netdev_problem(nd, *a, net, opts, ia); !why.empty()) {
      c.excluded.push_back(where + ": " + why);
      continue;
    }
    if (net.default_route_ifs.count(nd)) {
      if (!pinned) {
        c.excluded.push_back(where + ": carries the default route (internet-facing)");
        continue;
      }
      warn(out,
           "configured fabric.netdev " + nd + " carries the default route; using it because it is pinned");
    }
    if (pinned) c.pin_seen = true;
    std::string seg = ipv4_segment(ia->addr, ia->prefix_len);
    auto it = per_segment.find(seg);
    if (it == per_segment.end() || g.index < it->second.gid_index)
      per_segment[seg] = Member{key, p.state == "ACTIVE", g.index, *a, nd, seg, p.state, p.rate_gbps};
  }
  for (auto& [seg, m] : per_segment) {
    Group& gr = c.groups["roce|" + seg];
    if (gr.members.empty()) {
      gr.kind = "roce";
      gr.segment = seg;
      gr.label = "RoCE segment " + seg;
    }
    gr.members.push_back(m);
  }
}

Candidates candidate_ports(const std::vector<Hca>& hcas, const NetState& net,
                           const std::vector<std::pair<std::string, SmLookup>>& sm,
                           const InspectOptions& opts, Selection& out) {
  Candidates c;
  for (const auto& h : hcas) {
    for (const auto& p : h.ports) {
      std::string key = port_key(h, p);
      if (!allowed(opts, h.name, key))
        c.excluded.push_back(key + ": not in the configured fabric.hcas");
      else if (p.link_layer == "InfiniBand")
        add_infiniband_port(key, p, sm_for(sm, key), c, out);
      else if (p.link_layer == "Ethernet")
        add_roce_port(key, p, net, opts, c, out);
    }
  }
  if (!opts.fabric_netdev.empty() && !c.pin_seen)
    warn(out, "configured fabric.netdev " + opts.fabric_netdev +
                  " has no usable RoCE v2 IPv4 GID (up, holding the GID's address); no RoCE fabric chosen");
  return c;
}

std::string rate_text(double g) {
  char b[32];
  std::snprintf(b, sizeof b, "%g Gb/s", g);
  return b;
}

// A rail-optimised host puts NIC k of every machine on segment k: its RoCE
// segments are the rails of one fabric, not fabrics of their own. Segments
// whose ACTIVE ports are all slower than the fastest RoCE port (a front-end
// or management card without the default route) are not rails and are left
// out; a segment with no ACTIVE port (a rail whose link is down) stays a
// rail, so the host's fabric id does not change with a link.
void merge_rails(Candidates& c, Selection& out) {
  std::optional<double> top;
  for (const auto& [k, g] : c.groups)
    if (g.kind == "roce")
      for (const auto& m : g.members)
        if (m.active && m.rate_gbps && (!top || *m.rate_gbps > *top)) top = m.rate_gbps;
  Group rails;
  rails.kind = "roce";
  std::vector<std::string> segs;
  for (auto it = c.groups.begin(); it != c.groups.end();) {
    Group& g = it->second;
    if (g.kind != "roce") {
      ++it;
      continue;
    }
    bool any_active = false, at_top = false;
    std::optional<double> fastest;
    for (const auto& m : g.members) {
      if (!m.active) continue;
      any_active = true;
      if (!m.rate_gbps || !top || *m.rate_gbps >= *top) at_top = true;
      if (m.rate_gbps && (!fastest || *m.rate_gbps > *fastest)) fastest = m.rate_gbps;
    }
    if (any_active && !at_top) {
      std::vector<std::string> ps;
      for (const auto& m : g.members) ps.push_back(m.key);
      c.excluded.push_back("RoCE segment " + g.segment + " (" + join(ps) + "): its ports run at " +
                           rate_text(*fastest) + ", the fabric's at " + rate_text(*top) +
                           ", so it is not a rail");
      warn(out, "RoCE segment " + g.segment + " (" + join(ps) +
                    ") left out of the fabric: " + rate_text(*fastest) + " against " + rate_text(*top) +
                    " on the other RoCE ports; pin it with fabric.hcas if it is a rail");
    } else {
      for (auto& m : g.members) rails.members.push_back(std::move(m));
      segs.push_back(g.segment);
    }
    it = c.groups.erase(it);
  }
  if (rails.members.empty()) return;
  std::sort(segs.begin(), segs.end(), [](const std::string& a, const std::string& b) {
    return parse_ipv4_segment(a) < parse_ipv4_segment(b);
  });
  rails.segment = segs.front();
  rails.label = (segs.size() == 1 ? "RoCE segment " : "RoCE rails ") + join(segs);
  c.groups["roce|rails"] = std::move(rails);
}

// The fabric: the group with most ACTIVE ports, the first in key order on
// a tie. `others`: the groups with ACTIVE ports that lost.
struct Choice {
  const Group* best = nullptr;
  std::vector<const Group*> others;
};

Choice choose_fabric(const std::map<std::string, Group>& groups) {
  Choice ch;
  for (const auto& [k, g] : groups) {
    if (g.active() == 0) continue;
    if (!ch.best || g.active() > ch.best->active()) {
      if (ch.best) ch.others.push_back(ch.best);
      ch.best = &g;
    } else {
      ch.others.push_back(&g);
    }
  }
  return ch;
}

void warn_other_fabrics(const Choice& ch, Selection& out) {
  if (ch.others.empty()) return;
  std::vector<std::string> o;
  for (const auto* g : ch.others) {
    std::vector<std::string> ps;
    for (const auto& m : g->members)
      if (m.active) ps.push_back(m.key);
    o.push_back(g->label + " (" + std::to_string(g->active()) + " ACTIVE: " + join(ps) + ")");
  }
  warn(out, "ports of several fabrics on this host: chose " + ch.best->label + " with " +
                std::to_string(ch.best->active()) + " ACTIVE ports; ignored " + join(o, "; "));
}

std::string not_taken(const std::vector<std::string>& excluded) {
  return excluded.empty() ? "" : "; not taken: " + join(excluded, "; ");
}

void no_fabric(bool no_hcas, const std::vector<std::string>& excluded, Selection& out) {
  out.fabric.kind = "none";
  reason(out, "fabric",
         (no_hcas ? "no RDMA devices under the sysfs root"
                  : "no ACTIVE InfiniBand port with an SM and no ACTIVE RoCE port with a RoCE v2 "
                    "IPv4 GID on an up, non-default-route netdev") +
             not_taken(excluded));
  reason(out, "NCCL_IB_HCA", "not set: no fabric");
}

std::string sms_text(const std::vector<smp::SmInfoRecord>& sms) {
  std::vector<std::string> v;
  for (const auto& r : sms)
    v.push_back(format_guid(r.info.guid) + " (" + smp::sm_state_name(r.info.sm_state) + ", priority " +
                std::to_string(r.info.priority) + ")");
  return join(v);
}

void describe_infiniband(const Group& best, const std::string& nports,
                         const std::vector<std::string>& excluded, Selection& out) {
  out.fabric.subnet_prefix = best.subnet_prefix;
  out.fabric.sm_lid = best.sm_lid;
  if (best.sm_guid) out.fabric.sm_guid = format_guid(*best.sm_guid);
  for (const auto& r : best.sms)
    out.fabric.sms.push_back(
        {format_guid(r.info.guid), r.lid, r.info.priority, smp::sm_state_name(r.info.sm_state)});
  std::string where = "InfiniBand: " + nports + " on subnet prefix " + best.subnet_prefix + ", SM LID " +
                      std::to_string(best.sm_lid);
  if (best.anchor) {
    out.fabric.id = infiniband_fabric_id(best.subnet_prefix, *best.anchor);
    reason(out, "fabric",
           where + "; SMs " + sms_text(best.sms) + "; the id names " + format_guid(*best.anchor) +
               ", the SM that would take over last, so a failover keeps it" + not_taken(excluded));
  } else if (!best.sm_guid) {
    std::string why = best.sm_error.empty() ? "SM not queried" : best.sm_error;
    warn(out, "sm_guid unknown: " + why + "; fabric.id is null because subnet prefix " + best.subnet_prefix +
                  " and SM LID " + std::to_string(best.sm_lid) + " alone do not tell fabrics apart");
    reason(out, "fabric", where + "; SM GUID unknown (" + why + "), so no fabric id" + not_taken(excluded));
  } else {
    std::string why = best.sa_read            ? "the SA lists no SM"
                      : best.sa_error.empty() ? "SA not queried"
                                              : best.sa_error;
    warn(out, "fabric.id is null: the SA's table of subnet managers could not be read (" + why +
                  "); the master SM " + format_guid(*best.sm_guid) +
                  " alone would name the fabric only until the next failover");
    reason(out, "fabric",
           where + ", master SM " + format_guid(*best.sm_guid) + "; the SA's SM table is unknown (" + why +
               "), so no fabric id" + not_taken(excluded));
  }
  reason(out, "NCCL_IB_HCA",
         "the " + nports +
             " of the InfiniBand fabric, '=' for exact names (NCCL prefix-matches otherwise), natural order");
  reason(out, "NCCL_IB_GID_INDEX", "not set: InfiniBand ports are LID-routed");
}

// NCCL takes one GID index for all HCAs: the most common one among the
// fabric ports (the first port's wins ties); a warning names the ports it
// is wrong for.
void choose_gid_index(const std::vector<Member>& ms, const std::string& segment, Selection& out) {
  // `segment`: the fabric's segment, or the one covering all its rails.
  std::map<int, int> count;
  for (const auto& m : ms) ++count[m.gid_index];
  int idx = ms.front().gid_index, n = 0;
  for (const auto& m : ms)
    if (count[m.gid_index] > n) {
      n = count[m.gid_index];
      idx = m.gid_index;
    }
  out.nccl.ib_gid_index = std::to_string(idx);
  std::vector<std::string> differ;
  for (const auto& m : ms)
    if (m.gid_index != idx) differ.push_back(m.key + " (GID " + std::to_string(m.gid_index) + ")");
  if (differ.empty()) {
    reason(
        out, "NCCL_IB_GID_INDEX",
        "GID " + std::to_string(idx) + " is the RoCE v2 GID holding the fabric address on every fabric port");
    return;
  }
  warn(out, "fabric ports disagree on the RoCE v2 GID index: NCCL_IB_GID_INDEX=" + std::to_string(idx) +
                " is wrong for " + join(differ) + "; with NCCL >= 2.21 set NCCL_IB_ADDR_RANGE=" + segment +
                " instead, which selects the GID per device (each port's index is in fabric.rails)");
  reason(out, "NCCL_IB_GID_INDEX",
         "GID " + std::to_string(idx) + " is the most common RoCE v2 GID index with an address in " +
             segment + " (" + std::to_string(n) + " of " + std::to_string(ms.size()) + " ports)");
}

void describe_roce(const Group& best, const std::vector<Member>& ms, const std::string& nports,
                   const std::vector<std::string>& excluded, const InspectOptions& opts, Selection& out) {
  const Member& first = ms.front();
  // Rails in network order, each with its ports (not ACTIVE ones too).
  std::map<std::pair<uint32_t, int>, Rail> by_net;
  for (const auto& m : best.members) {
    auto n = parse_ipv4_segment(m.segment).value_or(std::pair<uint32_t, int>{0, 0});
    Rail& r = by_net[n];
    r.segment = m.segment;
    r.ports.push_back(
        {m.key, m.state, m.netdev, ipv4_to_string(m.addr), m.gid_index, std::nullopt, std::nullopt});
  }
  std::vector<std::string> segs;
  for (auto& [n, r] : by_net) {
    std::sort(r.ports.begin(), r.ports.end(),
              [](const RailPort& a, const RailPort& b) { return natural_less(a.port, b.port); });
    segs.push_back(r.segment);
    std::vector<std::string> down;
    for (const auto& p : r.ports)
      if (p.state != "ACTIVE")
        down.push_back(p.port + " (" + (p.state.empty() ? "state unknown" : p.state) + ")");
    if (down.size() == r.ports.size())
      warn(out, "rail " + r.segment + " has no ACTIVE port: " + join(down) + "; NCCL runs on the other " +
                    std::to_string(by_net.size() - 1) + " rail(s) until it is back");
    else if (!down.empty())
      warn(out, "rail " + r.segment + ": " + join(down) + " not ACTIVE, left out of NCCL_IB_HCA");
    out.fabric.rails.push_back(std::move(r));
  }
  out.fabric.segment = first.segment;
  out.fabric.address = ipv4_to_string(first.addr);
  out.fabric.netdev = first.netdev;
  std::string seg_text = (segs.size() == 1 ? "segment " : "rail segments ") + join(segs);
  if (!opts.provider_id.empty()) {
    out.fabric.provider_id = opts.provider_id;
    out.fabric.id = roce_fabric_id(opts.provider_id, segs);
  } else {
    warn(out, "provider_id is not set in the config; fabric.id is null because " + seg_text +
                  " alone does not tell two providers' networks apart");
  }
  std::string where;
  if (segs.size() == 1)
    where = "RoCE: " + nports + " with RoCE v2 GIDs in " + segs.front() + " on " +
            (opts.fabric_netdev.empty() ? "netdev " : "the configured fabric.netdev ") + first.netdev +
            " (up, holds " + *out.fabric.address + ", no default route)";
  else
    where = "RoCE: " + std::to_string(segs.size()) + " rails (" + join(segs) + "), " + nports +
            ", each with a RoCE v2 GID on an up netdev holding its address, no default route";
  reason(out, "fabric", where + not_taken(excluded));
  bool internet = std::any_of(excluded.begin(), excluded.end(), [](const std::string& e) {
    return e.find("default route") != std::string::npos;
  });
  reason(out, "NCCL_IB_HCA",
         "the " + nports + " of the RoCE fabric" + (segs.size() > 1 ? ", every rail" : "") +
             ", '=' for exact names (NCCL prefix-matches otherwise), natural order" +
             (internet ? "; internet-facing (default-route) ports left out" : ""));
  choose_gid_index(ms, covering_segment(segs), out);
}

}  // namespace

Selection select_fabric(const std::vector<Hca>& hcas, const NetState& net,
                        const std::vector<std::pair<std::string, SmLookup>>& sm, const InspectOptions& opts) {
  Selection out;
  out.nccl.socket_ifname = opts.socket_ifname;
  Candidates c = candidate_ports(hcas, net, sm, opts, out);
  merge_rails(c, out);
  Choice ch = choose_fabric(c.groups);
  if (!ch.best) {
    no_fabric(hcas.empty(), c.excluded, out);
  } else {
    warn_other_fabrics(ch, out);
    std::vector<Member> ms;
    for (const auto& m : ch.best->members)
      if (m.active) ms.push_back(m);
    std::sort(ms.begin(), ms.end(),
              [](const Member& a, const Member& b) { return natural_less(a.key, b.key); });
    for (const auto& m : ms) out.fabric.ports.push_back(m.key);
    out.fabric.kind = ch.best->kind;
    out.nccl.ib_hca = format_nccl_ib_hca(out.fabric.ports);
    std::string nports = std::to_string(ms.size()) + " ACTIVE port" + (ms.size() == 1 ? "" : "s");
    if (ch.best->kind == "infiniband")
      describe_infiniband(*ch.best, nports, c.excluded, out);
    else
      describe_roce(*ch.best, ms, nports, c.excluded, opts, out);
  }
  reason(out, "NCCL_SOCKET_IFNAME",
         "overlay interface " + opts.socket_ifname + " carries NCCL's bootstrap traffic");
  return out;
}

int common_upstream_depth(std::string_view a, std::string_view b) {
  auto split = [](std::string_view s) {
    std::vector<std::string_view> v;
    while (!s.empty()) {
      auto k = s.find('/');
      if (k != 0) v.push_back(s.substr(0, k));
      if (k == std::string_view::npos) break;
      s.remove_prefix(k + 1);
    }
    return v;
  };
  auto pa = split(a), pb = split(b);
  if (pa.empty() || pb.empty()) return 0;
  pa.pop_back();  // the devices themselves are not bridges
  pb.pop_back();
  size_t n = 0;
  while (n < pa.size() && n < pb.size() && pa[n] == pb[n]) ++n;
  return static_cast<int>(n);
}

void assign_nearest_hcas(std::vector<GpuDevice>& gpus, const std::vector<Hca>& hcas,
                         const std::vector<std::string>& fabric_ports) {
  std::vector<const Hca*> cands;
  for (const auto& h : hcas) {
    if (h.pci_path.empty()) continue;
    bool in = std::any_of(fabric_ports.begin(), fabric_ports.end(),
                          [&](const std::string& k) { return k.rfind(h.name + ":", 0) == 0; });
    if (in) cands.push_back(&h);
  }
  std::sort(cands.begin(), cands.end(),
            [](const Hca* x, const Hca* y) { return natural_less(x->name, y->name); });
  for (auto& g : gpus) {
    g.nearest_hca.clear();
    int best_depth = -1;
    bool best_numa = false;
    for (const Hca* h : cands) {
      int d = common_upstream_depth(g.pci_path, h->pci_path);
      bool numa = g.numa_node && h->numa_node && *g.numa_node == *h->numa_node;
      if (d > best_depth || (d == best_depth && numa && !best_numa)) {
        best_depth = d;
        best_numa = numa;
        g.nearest_hca = h->name;
      }
    }
  }
}

std::string gpu_vendor(std::string_view vendor_id, std::string_view class_code) {
  // Display controllers (0x03xx: VGA, 3D, other); AMD Instinct parts also
  // present as processing accelerators (0x1200).
  std::string_view cls = class_code.substr(0, std::min<size_t>(class_code.size(), 6));
  bool display = cls.rfind("0x03", 0) == 0;
  bool accel = cls.rfind("0x1200", 0) == 0;
  if (vendor_id == "0x10de" && display) return "nvidia";
  if (vendor_id == "0x1002" && (display || accel)) return "amd";
  return "";
}

std::string gpu_model(std::string_view vendor_id, std::string_view device_id) {
  struct Entry {
    const char* vendor;
    const char* device;
    const char* model;
  };
  // Current datacenter parts (pci.ids names); anything else shows its raw id.
  static constexpr Entry kTable[] = {
      {"0x10de", "0x2901", "B200"},
      {"0x10de", "0x2335", "H200 SXM 141GB"},
      {"0x10de", "0x2342", "GH200"},
      {"0x10de", "0x2330", "H100 SXM5 80GB"},
      {"0x10de", "0x2331", "H100 PCIe"},
      {"0x10de", "0x2321", "H100 NVL"},
      {"0x10de", "0x2324", "H800"},
      {"0x10de", "0x20b0", "A100 SXM4 40GB"},
      {"0x10de", "0x20b2", "A100 SXM4 80GB"},
      {"0x10de", "0x20b5", "A100 PCIe 80GB"},
      {"0x10de", "0x20f1", "A100 PCIe 40GB"},
      {"0x10de", "0x20f3", "A800 SXM4 80GB"},
      {"0x10de", "0x20b7", "A30"},
      {"0x10de", "0x2235", "A40"},
      {"0x10de", "0x2236", "A10"},
      {"0x10de", "0x26b9", "L40S"},
      {"0x10de", "0x26b5", "L40"},
      {"0x10de", "0x27b8", "L4"},
      {"0x10de", "0x1db1", "V100 SXM2 16GB"},
      {"0x10de", "0x1db5", "V100 SXM2 32GB"},
      {"0x10de", "0x1db6", "V100 PCIe 32GB"},
      {"0x10de", "0x1df6", "V100S PCIe 32GB"},
      {"0x1002", "0x74a1", "Instinct MI300X"},
      {"0x1002", "0x74a0", "Instinct MI300A"},
      {"0x1002", "0x74a5", "Instinct MI325X"},
      {"0x1002", "0x740c", "Instinct MI250X/MI250"},
      {"0x1002", "0x7408", "Instinct MI250X"},
      {"0x1002", "0x740f", "Instinct MI210"},
      {"0x1002", "0x738c", "Instinct MI100"},
  };
  for (const auto& e : kTable)
    if (vendor_id == e.vendor && device_id == e.device) return e.model;
  return std::string(vendor_id) + ":" + std::string(device_id);
}

GpuDirect gpudirect_readiness(const GpuDirectInputs& in) {
  GpuDirect g;
  if (in.nvidia_gpus == 0) {
    g.reason = "no NVIDIA GPU";
    return g;
  }
  g.ready = false;
  if (!in.nvidia_module) {
    g.reason = "the nvidia kernel module is not loaded (module/nvidia)";
    return g;
  }
  if (!in.peer_module.empty()) {
    g.ready = true;
    g.via = "nvidia_peermem";
    g.reason = in.peer_module + " is loaded: the HCA reads and writes GPU memory directly";
    return g;
  }
  // NVIDIA's driver names its flavour in the version line: "NVIDIA UNIX Open
  // Kernel Module for x86_64 ..." vs "NVIDIA UNIX x86_64 Kernel Module ...".
  std::optional<bool> open;
  if (in.driver_version) open = in.driver_version->find("Open Kernel Module") != std::string::npos;
  std::optional<std::pair<int, int>> kv;
  if (in.kernel_release) {
    int a = 0, b = 0;
    if (std::sscanf(in.kernel_release->c_str(), "%d.%d", &a, &b) == 2) kv = std::make_pair(a, b);
  }
  bool kernel_ok = kv && *kv >= std::make_pair(5, 12);
  if (open.value_or(false) && kernel_ok) {
    g.ready = true;
    g.via = "dma-buf";
    g.reason = "the open NVIDIA kernel module on kernel " + *in.kernel_release +
               " (>= 5.12): NCCL registers GPU memory through dma-buf (NCCL >= 2.13, CUDA >= 11.7)";
    return g;
  }
  std::vector<std::string> why;
  if (!open)
    why.push_back("the NVIDIA driver flavour is unknown (driver/nvidia/version unreadable)");
  else if (!*open)
    why.push_back("the NVIDIA kernel module is the proprietary flavour");
  if (!kv)
    why.push_back("the kernel release is unknown");
  else if (!kernel_ok)
    why.push_back("kernel " + *in.kernel_release + " is older than 5.12");
  std::string w = why[0];
  for (size_t i = 1; i < why.size(); ++i) w += " and " + why[i];
  g.reason = "nvidia_peermem is not loaded and dma-buf is not available (" + w +
             "): NCCL stages GPU buffers through host memory; load it with `modprobe nvidia_peermem`";
  return g;
}

}  // namespace fa::probes
