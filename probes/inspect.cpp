// SPDX-License-Identifier: Apache-2.0
// discover(): the sysfs, rtnetlink and umad reads, then the pure decisions
// of probes/logic.hpp. to_json()/to_table(): the two renderings.
#include "probes/inspect.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <set>

#include "common/fs.hpp"
#include "probes/lldp_io.hpp"
#include "probes/logic.hpp"
#include "probes/netlink_io.hpp"
#include "probes/sysfs_io.hpp"
#include "probes/umad_io.hpp"

namespace fa::probes {

namespace {

// A rail port's own netdev (DCB and LLDP live there, not on a VLAN over it).
std::string port_netdev(const Report& r, const RailPort& rp) {
  for (const auto& h : r.hcas)
    for (const auto& p : h.ports)
      if (h.name + ":" + std::to_string(p.port) == rp.port && !p.netdev.empty()) return p.netdev;
  return rp.netdev;
}

// PFC/ETS/APP over DCB netlink and ECN from sysfs for each RoCE fabric port
// (queried on the port's own netdev: a VLAN over it has no DCB of its own),
// then one verdict for the fabric and the NCCL_IB_TC its ports agree on.
void check_lossless(const InspectOptions& opts, Report& r) {
  Fabric& f = r.fabric;
  if (f.kind == "infiniband") {
    f.lossless = "yes";
    f.lossless_reason = "InfiniBand: credit-based link-level flow control, lossless by design";
    return;
  }
  if (f.kind != "roce") return;
  std::vector<std::string> nds;
  for (const auto& rl : f.rails)
    for (const auto& rp : rl.ports) nds.push_back(port_netdev(r, rp));
  auto dcb = read_dcb(nds);
  std::vector<std::string> no, unknown;
  std::set<int> tcs;
  size_t yes = 0;
  for (auto& rl : f.rails)
    for (auto& rp : rl.ports) {
      std::string nd = port_netdev(r, rp);
      rp.lossless = lossless_verdict(nd, dcb.at(nd), read_ecn(opts.sysfs_root, nd));
      if (std::find(f.ports.begin(), f.ports.end(), rp.port) == f.ports.end()) continue;  // not ACTIVE
      if (rp.lossless->state == "yes") {
        ++yes;
        if (rp.lossless->nccl_ib_tc) tcs.insert(*rp.lossless->nccl_ib_tc);
      } else {
        (rp.lossless->state == "no" ? no : unknown).push_back(rp.port + ": " + rp.lossless->reason);
      }
    }
  if (!no.empty()) {
    f.lossless = "no";
    f.lossless_reason = "not lossless: " + no.front() +
                        (no.size() > 1 ? " (and " + std::to_string(no.size() - 1) + " more port(s))" : "");
    r.warnings.push_back(
        "RoCE fabric is not lossless: a switch without lossless queueing (PFC/ECN) carries no RDMA "
        "and NCCL drops to TCP; " +
        no.front());
  } else if (!unknown.empty()) {
    f.lossless_reason =
        unknown.front() +
        (unknown.size() > 1 ? " (and " + std::to_string(unknown.size() - 1) + " more port(s))" : "");
  } else if (yes > 0) {
    f.lossless = "yes";
    f.lossless_reason = "PFC on every fabric port";
  }
  if (tcs.size() == 1 && f.lossless == "yes") {
    r.nccl.ib_tc = std::to_string(*tcs.begin());
    r.reasons.emplace_back("NCCL_IB_TC",
                           "the traffic class whose DSCP every fabric port maps to its PFC priority");
  } else if (tcs.size() > 1) {
    r.warnings.push_back(
        "fabric ports map different DSCPs to their PFC priority: no single NCCL_IB_TC reaches "
        "every port's lossless queue");
  }
}

// The switch port behind each RoCE rail port, from lldpd where it runs.
void read_switches(const InspectOptions& opts, Report& r) {
  Fabric& f = r.fabric;
  if (f.kind != "roce") return;
  auto nb = read_lldp_neighbors(opts.lldpd_socket);
  if (!nb) {
    f.lldp_reason = nb.error().message;
    return;
  }
  for (auto& rl : f.rails)
    for (auto& rp : rl.ports) {
      auto it = nb->find(port_netdev(r, rp));
      rp.lldp = it == nb->end() ? std::vector<LldpNeighbor>{} : it->second;
    }
}

}  // namespace

Report discover(const InspectOptions& opts) {
  Report r;
  SysfsScan sysfs = read_sysfs(opts.sysfs_root, r.warnings);
  r.hcas = std::move(sysfs.hcas);
  auto gpus = std::move(sysfs.gpus);

  NetState net;
  bool any_roce = false;
  for (const auto& h : r.hcas)
    for (const auto& p : h.ports) any_roce |= p.link_layer == "Ethernet";
  if (any_roce) {
    net = read_net_state();
    if (net.error) r.warnings.push_back(*net.error + "; RoCE fabric netdev cannot be checked");
  }

  // SMInfo and the SA's SM table per ACTIVE InfiniBand port, through
  // libibumad, whatever the sysfs root: libibumad finds the devices it can
  // open itself, and one it cannot open is a reason, not a guess.
  std::vector<std::pair<std::string, SmLookup>> sm;
  bool any_ib = false;
  for (const auto& h : r.hcas)
    for (const auto& p : h.ports) any_ib |= p.link_layer == "InfiniBand" && p.state == "ACTIVE";
  Status umad_ok = (any_ib && opts.query_sm) ? umad_available() : Status{};
  for (const auto& h : r.hcas) {
    for (const auto& p : h.ports) {
      if (p.link_layer != "InfiniBand" || p.state != "ACTIVE" || !p.sm_lid || *p.sm_lid == 0) continue;
      std::string key = h.name + ":" + std::to_string(p.port);
      SmLookup l;
      if (!opts.query_sm) {
        l.error = l.sa_error = "SM query disabled (query_sm = false)";
      } else if (!umad_ok) {
        l.error = l.sa_error = "SMInfo not sent: " + umad_ok.error().message;
      } else {
        auto q = query_subnet_managers(h.name, p.port, *p.sm_lid);
        if (q.master) {
          l.guid = q.master->guid;
          l.master = *q.master;
        } else {
          l.error = q.master.error().message;
        }
        if (q.records)
          l.records = std::move(*q.records);
        else
          l.sa_error = q.records.error().message;
      }
      sm.emplace_back(key, std::move(l));
    }
  }

  Selection s = select_fabric(r.hcas, net, sm, opts);
  r.fabric = std::move(s.fabric);
  r.nccl = std::move(s.nccl);
  r.reasons = std::move(s.reasons);
  r.warnings.insert(r.warnings.end(), s.warnings.begin(), s.warnings.end());

  check_lossless(opts, r);
  read_switches(opts, r);

  assign_nearest_hcas(gpus, r.hcas, r.fabric.ports);
  r.gpus.devices = std::move(gpus);
  for (const auto& g : r.gpus.devices) {
    if (r.gpus.vendor.empty())
      r.gpus.vendor = g.vendor;
    else if (r.gpus.vendor != g.vendor)
      r.gpus.vendor = "mixed";
    if (r.gpus.model.empty())
      r.gpus.model = g.model;
    else if (r.gpus.model != g.model)
      r.gpus.model = "mixed";
  }
  if (!r.gpus.devices.empty()) {
    std::map<std::string, int> per_hca;
    for (const auto& g : r.gpus.devices)
      if (!g.nearest_hca.empty()) ++per_hca[g.nearest_hca];
    std::string s2 = std::to_string(r.gpus.devices.size()) +
                     " GPU(s); nearest fabric HCA by deepest common PCIe "
                     "upstream bridge";
    if (per_hca.empty()) s2 += ": none (no fabric HCA)";
    r.reasons.emplace_back("gpus", s2);
  }
  GpuDirectInputs gi;
  for (const auto& g : r.gpus.devices) gi.nvidia_gpus += g.vendor == "nvidia";
  if (gi.nvidia_gpus) {
    auto is_dir = [](const std::string& p) {
      struct stat st{};
      return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    };
    gi.nvidia_module = is_dir(opts.sysfs_root + "/module/nvidia");
    for (const char* m : {"nvidia_peermem", "nv_peer_mem"})
      if (gi.peer_module.empty() && is_dir(opts.sysfs_root + "/module/" + m)) gi.peer_module = m;
    if (auto v = read_text_file(opts.proc_root + "/driver/nvidia/version")) gi.driver_version = v->substr(0, v->find('\n'));
    if (auto k = read_text_file(opts.proc_root + "/sys/kernel/osrelease")) gi.kernel_release = *k;
  }
  r.gpudirect = gpudirect_readiness(gi);
  if (r.gpudirect.ready) r.reasons.emplace_back("gpudirect", r.gpudirect.reason);
  return r;
}

namespace {

using nlohmann::json;

__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  out += line;
}

// Every string and key through printable(): sysfs bytes are not always
// UTF-8, and json::dump() throws on invalid UTF-8.
json sanitized(json j) {
  if (j.is_string()) return printable(j.get_ref<const std::string&>());
  if (j.is_array()) {
    for (auto& e : j) e = sanitized(std::move(e));
    return j;
  }
  if (j.is_object()) {
    json o = json::object();
    for (auto it = j.begin(); it != j.end(); ++it) o[printable(it.key())] = sanitized(std::move(it.value()));
    return o;
  }
  return j;
}

// printable() per line, keeping the newlines of the table.
std::string printable_lines(const std::string& s) {
  std::string out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    out += printable(
        std::string_view(s).substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return out;
}

json str_or_null(const std::string& v) { return v.empty() ? json(nullptr) : json(v); }
json opt_str(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }

template <class T>
json opt_vec(const std::optional<std::vector<T>>& v) {
  return v ? json(*v) : json(nullptr);
}

json per_prio(const std::map<int, uint64_t>& m) {
  json o = json::object();
  for (const auto& [k, v] : m) o[std::to_string(k)] = v;
  return o;
}

json lldp_json(const std::vector<LldpNeighbor>& v) {
  json a = json::array();
  for (const auto& n : v)
    a.push_back({{"chassis_id", n.chassis_id},
                 {"chassis_id_subtype", str_or_null(n.chassis_id_subtype)},
                 {"system_name", str_or_null(n.system_name)},
                 {"port_id", n.port_id},
                 {"port_id_subtype", str_or_null(n.port_id_subtype)},
                 {"port_descr", str_or_null(n.port_descr)}});
  return a;
}

json lossless_json(const Lossless& l) {
  json dscp = json::object();
  for (const auto& [d, p] : l.dscp_priority) dscp[std::to_string(d)] = p;
  return {{"state", l.state},
          {"reason", l.reason},
          {"pfc_priorities", l.pfc_priorities},
          {"pfc_requests", per_prio(l.pfc_requests)},
          {"pfc_indications", per_prio(l.pfc_indications)},
          {"prio_tc", opt_vec(l.prio_tc)},
          {"tc_tsa", opt_vec(l.tc_tsa)},
          {"tc_tx_bw", opt_vec(l.tc_tx_bw)},
          {"dscp_priority", dscp},
          {"ecn_np", opt_vec(l.ecn_np)},
          {"ecn_rp", opt_vec(l.ecn_rp)},
          {"nccl_ib_tc", l.nccl_ib_tc ? json(*l.nccl_ib_tc) : json(nullptr)}};
}
template <class T>
json opt_num(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

json to_json(const Report& r) {
  json hcas = json::array();
  json counters = json::object();
  for (const auto& h : r.hcas) {
    json ports = json::array();
    for (const auto& p : h.ports) {
      json gids = json::array();
      for (const auto& g : p.gids)
        gids.push_back({{"index", g.index},
                        {"gid", g.gid},
                        {"type", str_or_null(g.type)},
                        {"netdev", str_or_null(g.netdev)}});
      ports.push_back({{"port", p.port},
                       {"state", str_or_null(p.state)},
                       {"phys_state", str_or_null(p.phys_state)},
                       {"link_layer", str_or_null(p.link_layer)},
                       {"rate_gbps", opt_num(p.rate_gbps)},
                       {"lid", opt_num(p.lid)},
                       {"sm_lid", opt_num(p.sm_lid)},
                       {"netdev", str_or_null(p.netdev)},
                       {"gids", std::move(gids)}});
      counters[h.name + ":" + std::to_string(p.port)] = {{"counters", p.counters},
                                                         {"hw_counters", p.hw_counters}};
    }
    hcas.push_back({{"name", h.name},
                    {"node_guid", str_or_null(h.node_guid)},
                    {"fw_ver", str_or_null(h.fw_ver)},
                    {"board_id", str_or_null(h.board_id)},
                    {"pci", str_or_null(h.pci)},
                    {"numa_node", opt_num(h.numa_node)},
                    {"ports", std::move(ports)}});
  }
  const Fabric& f = r.fabric;
  json sm_guids = json::array(), sms = json::array();
  for (const auto& m : f.sms) {
    sm_guids.push_back(m.guid);
    sms.push_back({{"guid", m.guid}, {"lid", m.lid}, {"priority", m.priority}, {"state", m.state}});
  }
  json rails = json::array();
  for (const auto& rl : f.rails) {
    json ps = json::array();
    for (const auto& p : rl.ports)
      ps.push_back({{"port", p.port},
                    {"state", str_or_null(p.state)},
                    {"netdev", str_or_null(p.netdev)},
                    {"address", p.address},
                    {"gid_index", p.gid_index},
                    {"lossless", p.lossless ? lossless_json(*p.lossless) : json(nullptr)},
                    {"lldp", p.lldp ? lldp_json(*p.lldp) : json(nullptr)}});
    rails.push_back({{"segment", rl.segment}, {"ports", std::move(ps)}});
  }
  json fabric = {{"kind", f.kind},
                 {"id", opt_str(f.id)},
                 {"ports", f.ports},
                 {"subnet_prefix", opt_str(f.subnet_prefix)},
                 {"sm_lid", opt_num(f.sm_lid)},
                 {"sm_guid", opt_str(f.sm_guid)},
                 {"sm_guids", sm_guids},
                 {"sms", sms},
                 {"rails", std::move(rails)},
                 {"segment", opt_str(f.segment)},
                 {"address", opt_str(f.address)},
                 {"netdev", opt_str(f.netdev)},
                 {"provider_id", opt_str(f.provider_id)},
                 {"lossless", f.lossless},
                 {"lossless_reason", str_or_null(f.lossless_reason)},
                 {"lldp_reason", str_or_null(f.lldp_reason)}};
  json nccl = {{"NCCL_IB_HCA", opt_str(r.nccl.ib_hca)},
               {"NCCL_IB_GID_INDEX", opt_str(r.nccl.ib_gid_index)},
               {"NCCL_IB_TC", opt_str(r.nccl.ib_tc)},
               {"NCCL_SOCKET_IFNAME", r.nccl.socket_ifname}};
  json devs = json::array();
  for (const auto& g : r.gpus.devices)
    devs.push_back({{"pci", g.pci},
                    {"numa_node", opt_num(g.numa_node)},
                    {"vendor", g.vendor},
                    {"device_id", g.device_id},
                    {"model", g.model},
                    {"nearest_hca", str_or_null(g.nearest_hca)}});
  json gpus = {{"vendor", str_or_null(r.gpus.vendor)},
               {"model", str_or_null(r.gpus.model)},
               {"count", r.gpus.devices.size()},
               {"devices", std::move(devs)}};
  json reasons = json::object();
  for (const auto& [k, v] : r.reasons) reasons[k] = v;
  json gdr = {{"rdma", r.gpudirect.ready ? json(*r.gpudirect.ready) : json(nullptr)},
              {"via", str_or_null(r.gpudirect.via)},
              {"reason", r.gpudirect.reason}};
  json out = {{"hcas", std::move(hcas)}, {"fabric", std::move(fabric)},   {"nccl_env", std::move(nccl)},
              {"gpus", std::move(gpus)}, {"gpudirect", std::move(gdr)},  {"reasons", std::move(reasons)},
              {"counters", std::move(counters)}, {"warnings", r.warnings}};
  return sanitized(std::move(out));
}

std::string to_table(const Report& r) {
  std::string out;
  const Fabric& f = r.fabric;
  appendf(out, "fabric    %s", f.kind.c_str());
  if (f.id) appendf(out, "  id %s", f.id->c_str());
  out += "\n";
  if (f.kind == "infiniband") {
    appendf(out, "          subnet %s  SM LID %u  SM GUID %s\n", f.subnet_prefix.value_or("-").c_str(),
            f.sm_lid.value_or(0), f.sm_guid.value_or("unknown").c_str());
    std::string sms;
    for (const auto& m : f.sms)
      sms += (sms.empty() ? "" : ", ") + m.guid + " " + m.state + " p" + std::to_string(m.priority);
    appendf(out, "          SMs %s\n", sms.empty() ? "unknown" : sms.c_str());
  }
  if (f.kind == "roce") {
    appendf(out, "          segment %s  address %s on %s  provider %s\n", f.segment.value_or("-").c_str(),
            f.address.value_or("-").c_str(), f.netdev.value_or("-").c_str(),
            f.provider_id.value_or("(unset)").c_str());
    if (!f.rails.empty()) {
      appendf(out, "          %zu rail%s:\n", f.rails.size(), f.rails.size() == 1 ? "" : "s");
      for (const auto& rl : f.rails) {
        std::string ps;
        for (const auto& p : rl.ports)
          ps += (ps.empty() ? "" : ", ") + p.port + " " + p.netdev + " " + p.address + " GID " +
                std::to_string(p.gid_index) +
                (p.state == "ACTIVE" ? "" : " " + (p.state.empty() ? "?" : p.state)) +
                (p.lossless ? " lossless " + p.lossless->state : "") +
                (p.lldp && !p.lldp->empty()
                     ? " switch " +
                           (p.lldp->front().system_name.empty() ? p.lldp->front().chassis_id
                                                                : p.lldp->front().system_name) +
                           " " + p.lldp->front().port_id
                     : "");
        appendf(out, "            %-18s %s\n", rl.segment.c_str(), ps.c_str());
      }
    }
    if (!f.lldp_reason.empty()) appendf(out, "          switches unknown: %s\n", f.lldp_reason.c_str());
  }
  if (f.kind != "none")
    appendf(out, "          lossless %s%s%s\n", f.lossless.c_str(), f.lossless_reason.empty() ? "" : ": ",
            f.lossless_reason.c_str());
  out += "\n";
  if (r.hcas.empty()) {
    out += "no RDMA devices\n";
  } else {
    appendf(out, "%-10s %-4s %-7s %-10s %-10s %7s %6s %-14s %s\n", "HCA", "PORT", "STATE", "PHYS", "LINK",
            "GB/S", "LID", "NETDEV", "FABRIC");
    for (const auto& h : r.hcas) {
      if (h.ports.empty()) appendf(out, "%-10s (no readable ports)\n", h.name.c_str());
      for (const auto& p : h.ports) {
        std::string key = h.name + ":" + std::to_string(p.port);
        bool in = std::find(f.ports.begin(), f.ports.end(), key) != f.ports.end();
        char rate[16] = "-";
        if (p.rate_gbps) std::snprintf(rate, sizeof rate, "%g", *p.rate_gbps);
        char lid[16] = "-";
        if (p.lid && p.link_layer == "InfiniBand") std::snprintf(lid, sizeof lid, "%u", *p.lid);
        appendf(out, "%-10s %-4d %-7s %-10s %-10s %7s %6s %-14s %s\n", h.name.c_str(), p.port,
                p.state.empty() ? "?" : p.state.c_str(), p.phys_state.empty() ? "?" : p.phys_state.c_str(),
                p.link_layer.empty() ? "?" : p.link_layer.c_str(), rate, lid,
                p.netdev.empty() ? "-" : p.netdev.c_str(), in ? "yes" : "");
      }
    }
  }
  out += "\n";
  if (r.gpus.devices.empty()) {
    out += "GPUs      none\n";
  } else {
    appendf(out, "GPUs      %zu x %s (%s)\n", r.gpus.devices.size(), r.gpus.model.c_str(),
            r.gpus.vendor.c_str());
    for (const auto& g : r.gpus.devices)
      appendf(out, "          %s  numa %s  nearest HCA %s\n", g.pci.c_str(),
              g.numa_node ? std::to_string(*g.numa_node).c_str() : "-",
              g.nearest_hca.empty() ? "-" : g.nearest_hca.c_str());
  }
  if (r.gpudirect.ready)
    appendf(out, "GPUDirect %s\n", *r.gpudirect.ready ? ("RDMA via " + r.gpudirect.via).c_str() : "no RDMA (host copies)");
  out += "\n";
  appendf(out, "NCCL_IB_HCA=%s\n", r.nccl.ib_hca.value_or("(unset)").c_str());
  if (r.nccl.ib_gid_index) appendf(out, "NCCL_IB_GID_INDEX=%s\n", r.nccl.ib_gid_index->c_str());
  if (r.nccl.ib_tc) appendf(out, "NCCL_IB_TC=%s\n", r.nccl.ib_tc->c_str());
  appendf(out, "NCCL_SOCKET_IFNAME=%s\n", r.nccl.socket_ifname.c_str());
  if (!r.reasons.empty()) {
    out += "\nwhy:\n";
    for (const auto& [k, v] : r.reasons) out += "  " + k + ": " + v + "\n";
  }
  if (!r.warnings.empty()) {
    out += "\nwarnings:\n";
    for (const auto& w : r.warnings) out += "  ! " + w + "\n";
  }
  return printable_lines(out);
}

}  // namespace fa::probes
