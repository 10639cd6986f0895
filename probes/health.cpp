// SPDX-License-Identifier: Apache-2.0
#include "probes/health.hpp"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <set>

#include "common/fs.hpp"

namespace fa::probes {

namespace {

// The counters whose growth means the link is damaged (gpud and Azure's
// checks): any increase is a condition.
const char* const kErrorCounters[] = {"link_downed", "port_rcv_remote_physical_errors",
                                      "excessive_buffer_overrun_errors", "local_link_integrity_errors"};

std::string port_name(const Hca& h, const Port& p) { return h.name + ":" + std::to_string(p.port); }

bool port_up(const Port& p) { return p.state == "ACTIVE" && (p.phys_state.empty() || p.phys_state == "LinkUp"); }

std::string port_state(const Port& p) {
  return "state " + (p.state.empty() ? std::string("unreadable") : p.state) +
         (p.phys_state.empty() ? "" : ", phys " + p.phys_state);
}

std::string fmt_rate(double g) {
  char b[32];
  std::snprintf(b, sizeof b, "%g Gb/s", g);
  return b;
}

// The ports health watches: every InfiniBand port, every port of an HCA
// that carries a fabric port (its other ports are rails of the same card),
// and the pinned ones.
std::set<std::string> watched(const Report& r, const HealthConfig& c) {
  std::set<std::string> hcas;
  for (const auto& p : r.fabric.ports) hcas.insert(p.substr(0, p.find(':')));
  std::set<std::string> pinned(c.pinned.begin(), c.pinned.end());
  std::set<std::string> out;
  for (const auto& h : r.hcas)
    for (const auto& p : h.ports)
      if (p.link_layer == "InfiniBand" || hcas.count(h.name) || pinned.count(h.name) ||
          pinned.count(port_name(h, p)))
        out.insert(port_name(h, p));
  return out;
}

const Port* find_port(const Report& r, const std::string& name, const Hca** hca = nullptr) {
  for (const auto& h : r.hcas)
    for (const auto& p : h.ports)
      if (port_name(h, p) == name) {
        if (hca) *hca = &h;
        return &p;
      }
  return nullptr;
}

std::string link_text(int width, double speed) {
  char b[48];
  std::snprintf(b, sizeof b, "x%d at %g GT/s", width, speed);
  return b;
}

void pcie_conditions(const std::string& sysfs_root, const std::string& pci_path, PcieReader pcie,
                     std::vector<Condition>& out, int64_t now) {
  auto links = pcie(sysfs_root, pci_path);
  for (size_t i = 0; i < links.size(); ++i) {
    const auto& [name, l] = links[i];
    // What this link can do: the lesser of its two ends (the device and the
    // bridge above it).
    double can_speed = l.max_speed;
    int can_width = l.max_width;
    if (i > 0) {
      can_speed = std::min(can_speed, links[i - 1].second.max_speed);
      can_width = std::min(can_width, links[i - 1].second.max_width);
    }
    if (l.speed <= 0 || l.width <= 0 || can_speed <= 0 || can_width <= 0) continue;  // unknown
    if (l.speed + 1e-9 < can_speed || l.width < can_width)
      out.push_back({"pcie_degraded", name,
                     "trained " + link_text(l.width, l.speed) + ", the link can do " + link_text(can_width, can_speed),
                     now});
  }
}

double leading_number(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

}  // namespace

std::vector<std::pair<std::string, PcieLink>> read_pcie_path(const std::string& sysfs_root,
                                                             const std::string& pci_path) {
  std::vector<std::pair<std::string, PcieLink>> out;
  std::string dir = sysfs_root + "/devices";
  size_t pos = 0;
  while (pos < pci_path.size()) {
    size_t slash = pci_path.find('/', pos);
    std::string elem = pci_path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos);
    dir += "/" + elem;
    pos = slash == std::string::npos ? pci_path.size() : slash + 1;
    auto cs = read_text_file(dir + "/current_link_speed"), cw = read_text_file(dir + "/current_link_width"),
         ms = read_text_file(dir + "/max_link_speed"), mw = read_text_file(dir + "/max_link_width");
    if (!cs || !cw || !ms || !mw) continue;
    PcieLink l;
    l.speed = leading_number(*cs);
    l.max_speed = leading_number(*ms);
    l.width = std::atoi(cw->c_str());
    l.max_width = std::atoi(mw->c_str());
    out.emplace_back(elem, l);
  }
  return out;
}

std::vector<Condition> snapshot_conditions(const Report& r, const std::string& sysfs_root, const HealthConfig& c,
                                           int64_t now, PcieReader pcie) {
  std::vector<Condition> out;
  const auto ports = watched(r, c);
  std::map<std::string, double> fastest;  // link layer -> the fastest up port's rate
  for (const auto& name : ports) {
    const Port* p = find_port(r, name);
    if (p && port_up(*p) && p->rate_gbps)
      fastest[p->link_layer] = std::max(fastest[p->link_layer], *p->rate_gbps);
  }
  std::set<std::string> pci_seen;
  for (const auto& name : ports) {
    const Hca* h = nullptr;
    const Port* p = find_port(r, name, &h);
    if (!p) continue;
    if (!port_up(*p)) {
      out.push_back({"port_down", name, port_state(*p), now});
      continue;
    }
    if (p->rate_gbps && *p->rate_gbps + 1e-9 < fastest[p->link_layer])
      out.push_back({"port_slow", name,
                     "runs at " + fmt_rate(*p->rate_gbps) + ", its siblings at " + fmt_rate(fastest[p->link_layer]),
                     now});
    if (!h->pci_path.empty() && pci_seen.insert(h->pci_path).second)
      pcie_conditions(sysfs_root, h->pci_path, pcie, out, now);
  }
  for (const auto& g : r.gpus.devices)
    if (!g.pci_path.empty() && pci_seen.insert(g.pci_path).second) pcie_conditions(sysfs_root, g.pci_path, pcie, out, now);
  // One condition per link: a degraded bridge above several devices once.
  std::sort(out.begin(), out.end(), [](const Condition& a, const Condition& b) {
    return std::tie(a.code, a.subject) < std::tie(b.code, b.subject);
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Condition& a, const Condition& b) { return a.code == b.code && a.subject == b.subject; }),
            out.end());
  return out;
}

void Health::raise(std::map<std::pair<std::string, std::string>, Condition>& now_raised, Condition c) {
  now_raised.emplace(std::pair{c.code, c.subject}, std::move(c));
}

std::vector<Condition> Health::observe(const Report& r, const std::string& sysfs_root,
                                       const std::vector<PeerSeen>& peers, int64_t now, PcieReader pcie) {
  std::map<std::pair<std::string, std::string>, Condition> held;
  for (auto& c : snapshot_conditions(r, sysfs_root, cfg_, now, pcie)) raise(held, std::move(c));

  // Every port watched now or before: one that left the fabric (its HCA's
  // only port went down) is still watched.
  for (const auto& name : watched(r, cfg_)) ports_.try_emplace(name);
  for (auto& [name, h] : ports_) {
    const Port* p = find_port(r, name);
    const bool up = p && port_up(*p);
    if (!p) raise(held, {"port_down", name, "the device is gone", now});
    else if (!up) raise(held, {"port_down", name, port_state(*p), now});
    if (h.up && !up) {
      h.down_since = now;
      h.losses.push_back(now);
    } else if (!h.up && up && now - h.down_since >= cfg_.flap_down_seconds) {
      h.flaps.push_back(now);
    }
    h.up = up;
    if (p) {
      for (const char* k : kErrorCounters) {
        auto it = p->counters.find(k);
        if (it == p->counters.end()) continue;
        auto prev = h.counters.find(k);
        if (prev != h.counters.end() && it->second > prev->second) {
          const uint64_t d = it->second - prev->second;
          raise(held, {"port_errors", name, std::string(k) + " +" + std::to_string(d), now});
          // A link that went down and up between two looks is a loss too.
          if (std::string(k) == "link_downed")
            for (uint64_t i = 0; i < d && i < 100; ++i) h.losses.push_back(now);
        }
        h.counters[k] = it->second;
      }
      if (auto it = p->counters.find("symbol_error"); it != p->counters.end()) {
        h.symbol_errors.emplace_back(now, it->second);
        while (!h.symbol_errors.empty() && now - h.symbol_errors.front().first > 3600)
          h.symbol_errors.erase(h.symbol_errors.begin());
        const uint64_t first = h.symbol_errors.front().second;
        if (it->second >= first && double(it->second - first) > cfg_.symbol_errors_per_hour)
          raise(held, {"symbol_errors", name,
                       "symbol_error +" + std::to_string(it->second - first) + " within an hour (more than " +
                           std::to_string(int(cfg_.symbol_errors_per_hour)) + ")",
                       now});
      }
    }
    auto prune = [now](std::vector<int64_t>& v, int64_t window) {
      v.erase(std::remove_if(v.begin(), v.end(), [&](int64_t t) { return now - t > window; }), v.end());
    };
    prune(h.flaps, cfg_.flap_window_seconds);
    prune(h.losses, cfg_.carrier_window_seconds);
    if (static_cast<int>(h.flaps.size()) >= cfg_.flap_count)
      raise(held, {"link_flapping", name,
                   std::to_string(h.flaps.size()) + " times down for " + std::to_string(cfg_.flap_down_seconds) +
                       " s or more within " + std::to_string(cfg_.flap_window_seconds / 3600) + " h",
                   now});
    else if (static_cast<int>(h.losses.size()) >= cfg_.carrier_losses)
      raise(held, {"link_flapping", name,
                   std::to_string(h.losses.size()) + " losses of the link within " +
                       std::to_string(cfg_.carrier_window_seconds / 3600) + " h",
                   now});
  }

  if (r.fabric.id) {
    if (!first_fabric_) first_fabric_ = r.fabric.id;
    else if (*first_fabric_ != *r.fabric.id)
      raise(held, {"fabric_changed", "fabric", "was " + *first_fabric_ + ", now " + *r.fabric.id, now});
  }

  // With a mesh up, the GID NCCL uses must stay what it was.
  if (!peers.empty() && r.nccl.ib_gid_index) {
    const int index = std::atoi(r.nccl.ib_gid_index->c_str());
    for (const auto& name : r.fabric.ports) {
      const Port* p = find_port(r, name);
      if (!p) continue;
      for (const auto& g : p->gids)
        if (g.index == index) {
          auto [it, fresh] = gids_.emplace(name, g.gid);
          if (!fresh && it->second != g.gid)
            raise(held, {"gid_changed", name,
                         "GID " + std::to_string(index) + " was " + it->second + ", now " + g.gid, now});
        }
    }
  } else if (peers.empty()) {
    gids_.clear();
  }

  std::set<std::string> present;
  for (const auto& p : peers) {
    present.insert(p.public_key);
    const int64_t first = peer_first_.try_emplace(p.public_key, now).first->second;
    const std::string subject = "peer " + p.public_key;
    if (p.last_handshake_unix > 0 && now - p.last_handshake_unix > cfg_.handshake_seconds)
      raise(held, {"peer_down", subject,
                   "last handshake " + std::to_string(now - p.last_handshake_unix) + " s ago", now});
    else if (p.last_handshake_unix == 0 && now - first > cfg_.handshake_seconds)
      raise(held, {"peer_down", subject, "no handshake in " + std::to_string(now - first) + " s", now});
  }
  for (auto it = peer_first_.begin(); it != peer_first_.end();)
    it = present.count(it->first) ? std::next(it) : peer_first_.erase(it);

  // Latched: a condition keeps its first evidence and time while it holds,
  // and stays hold_seconds after it last held.
  for (auto& [key, c] : held) {
    last_held_[key] = now;
    raised_.try_emplace(key, c);
  }
  for (auto it = raised_.begin(); it != raised_.end();) {
    if (!held.count(it->first) && now - last_held_[it->first] >= cfg_.hold_seconds) {
      last_held_.erase(it->first);
      it = raised_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<Condition> out;
  for (const auto& [key, c] : raised_) out.push_back(c);
  return out;
}

std::string condition_line(const Condition& c) {
  char when[32] = "";
  std::time_t t = static_cast<std::time_t>(c.since_unix);
  std::tm tm{};
  if (gmtime_r(&t, &tm)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return c.subject + ": " + c.code + ": " + c.evidence + " (since " + when + ")";
}

nlohmann::json to_json(const std::vector<Condition>& conditions) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : conditions)
    out.push_back({{"code", c.code}, {"subject", c.subject}, {"evidence", c.evidence}, {"since_unix", c.since_unix}});
  return out;
}

}  // namespace fa::probes
