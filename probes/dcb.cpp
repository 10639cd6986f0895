// SPDX-License-Identifier: Apache-2.0
#include "probes/dcb.hpp"

#include <linux/dcbnl.h>
#include <netlink/attr.h>

#include <cstring>
#include <vector>

namespace fa::probes {
namespace {

std::string prio_list(uint8_t mask) {
  std::string s;
  for (int p = 0; p < 8; ++p)
    if (mask & (1u << p)) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

std::vector<int> prios_of(uint8_t mask) {
  std::vector<int> v;
  for (int p = 0; p < 8; ++p)
    if (mask & (1u << p)) v.push_back(p);
  return v;
}

std::string tsa_name(uint8_t t) {
  switch (t) {
    case IEEE_8021QAZ_TSA_STRICT:
      return "strict";
    case IEEE_8021QAZ_TSA_CB_SHAPER:
      return "cbs";
    case IEEE_8021QAZ_TSA_ETS:
      return "ets";
    case IEEE_8021QAZ_TSA_VENDOR:
      return "vendor";
    default:
      return std::to_string(t);
  }
}

}  // namespace

Result<DcbIeee> decode_dcb_ieee(std::span<const uint8_t> attrs) {
  // nla_parse reads in place and wants the attributes 4-byte aligned.
  std::vector<uint8_t> buf(attrs.begin(), attrs.end());
  nlattr* tb[DCB_ATTR_MAX + 1] = {};
  if (int rc = nla_parse(tb, DCB_ATTR_MAX, reinterpret_cast<nlattr*>(buf.data()),
                         static_cast<int>(buf.size()), nullptr);
      rc < 0)
    return Error{"DCB reply: attributes do not parse (" + std::to_string(-rc) + ")"};
  DcbIeee d;
  if (tb[DCB_ATTR_DCBX] && nla_len(tb[DCB_ATTR_DCBX]) >= 1) d.dcbx = nla_get_u8(tb[DCB_ATTR_DCBX]);
  if (!tb[DCB_ATTR_IEEE]) return d;  // a driver without IEEE ops answers with its name only
  nlattr* ie[DCB_ATTR_IEEE_MAX + 1] = {};
  if (nla_parse_nested(ie, DCB_ATTR_IEEE_MAX, tb[DCB_ATTR_IEEE], nullptr) < 0)
    return Error{"DCB reply: DCB_ATTR_IEEE does not parse"};
  if (nlattr* a = ie[DCB_ATTR_IEEE_PFC]) {
    if (nla_len(a) < static_cast<int>(sizeof(ieee_pfc)))
      return Error{"DCB reply: DCB_ATTR_IEEE_PFC is " + std::to_string(nla_len(a)) +
                   " bytes, struct ieee_pfc " + std::to_string(sizeof(ieee_pfc))};
    ieee_pfc pfc;
    std::memcpy(&pfc, nla_data(a), sizeof pfc);
    d.has_pfc = true;
    d.pfc_cap = pfc.pfc_cap;
    d.pfc_en = pfc.pfc_en;
    for (int p = 0; p < 8; ++p) {
      d.pfc_requests[p] = pfc.requests[p];
      d.pfc_indications[p] = pfc.indications[p];
    }
  }
  if (nlattr* a = ie[DCB_ATTR_IEEE_ETS]) {
    if (nla_len(a) < static_cast<int>(sizeof(ieee_ets)))
      return Error{"DCB reply: DCB_ATTR_IEEE_ETS is " + std::to_string(nla_len(a)) +
                   " bytes, struct ieee_ets " + std::to_string(sizeof(ieee_ets))};
    ieee_ets ets;
    std::memcpy(&ets, nla_data(a), sizeof ets);
    d.has_ets = true;
    for (int i = 0; i < 8; ++i) {
      d.prio_tc[i] = ets.prio_tc[i];
      d.tc_tsa[i] = ets.tc_tsa[i];
      d.tc_tx_bw[i] = ets.tc_tx_bw[i];
    }
  }
  if (nlattr* t = ie[DCB_ATTR_IEEE_APP_TABLE]) {
    nlattr* a;
    int rem;
    nla_for_each_nested(a, t, rem) {
      if (nla_type(a) != DCB_ATTR_IEEE_APP || nla_len(a) < static_cast<int>(sizeof(dcb_app))) continue;
      dcb_app app;
      std::memcpy(&app, nla_data(a), sizeof app);
      if (app.selector == IEEE_8021QAZ_APP_SEL_DSCP && app.protocol < 64 && app.priority < 8)
        d.dscp_prio[app.protocol] = app.priority;
    }
  }
  return d;
}

Lossless lossless_verdict(const std::string& netdev, const Result<DcbIeee>& dcb,
                          const std::optional<Ecn>& ecn) {
  Lossless l;
  if (ecn) {
    l.ecn_np = prios_of(ecn->np);
    l.ecn_rp = prios_of(ecn->rp);
  }
  if (!dcb) {
    l.reason = netdev + ": " +
               (dcb.error().sys_errno == EOPNOTSUPP
                    ? "the driver has no DCB support (RTM_GETDCB: Operation not supported), so PFC and the "
                      "priority map cannot be read"
                    : dcb.error().message);
    return l;
  }
  const DcbIeee& d = *dcb;
  if (d.has_ets) {
    l.prio_tc = std::vector<int>(d.prio_tc.begin(), d.prio_tc.end());
    l.tc_tx_bw = std::vector<int>(d.tc_tx_bw.begin(), d.tc_tx_bw.end());
    std::vector<std::string> tsa;
    for (uint8_t t : d.tc_tsa) tsa.push_back(tsa_name(t));
    l.tc_tsa = std::move(tsa);
  }
  l.dscp_priority = d.dscp_prio;
  if (!d.has_pfc) {
    l.reason = netdev + ": the driver reports no IEEE PFC state";
    return l;
  }
  l.pfc_priorities = prios_of(d.pfc_en);
  for (int p : l.pfc_priorities) {
    l.pfc_requests[p] = d.pfc_requests[p];
    l.pfc_indications[p] = d.pfc_indications[p];
  }
  if (d.pfc_en == 0) {
    l.state = "no";
    l.reason = netdev +
               ": PFC is off on every priority: RoCE runs over a lossy queue, drops under congestion, "
               "and NCCL falls back to TCP";
    return l;
  }
  l.state = "yes";
  l.reason = netdev + ": PFC on priority " + prio_list(d.pfc_en);
  // The traffic class NCCL must put on its packets: a DSCP the APP table
  // maps to a PFC priority (the lowest such DSCP), shifted into the TOS byte.
  int prio = -1;
  for (const auto& [dscp, p] : d.dscp_prio)
    if (d.pfc_en & (1u << p)) {
      l.nccl_ib_tc = dscp << 2;
      prio = p;
      l.reason += "; DSCP " + std::to_string(dscp) + " maps to it (priority " + std::to_string(p) +
                  "): NCCL_IB_TC=" + std::to_string(dscp << 2);
      break;
    }
  if (prio < 0) {
    prio = l.pfc_priorities.front();
    l.reason +=
        d.dscp_prio.empty()
            ? "; no DSCP map (the port trusts the VLAN priority): NCCL_IB_SL=" + std::to_string(prio) +
                  " on a VLAN netdev whose egress map gives priority " + std::to_string(prio)
            : "; no DSCP maps to a PFC priority, so no NCCL_IB_TC reaches the lossless queue";
  }
  if (ecn) {
    bool on = (ecn->np & ecn->rp & (1u << prio)) != 0;
    l.reason +=
        on ? "; ECN on for priority " + std::to_string(prio)
           : "; ECN is off for priority " + std::to_string(prio) +
                 " (sysfs ecn/roce_np, roce_rp): congestion spreads as pause frames instead of slowing "
                 "the senders";
  }
  return l;
}

}  // namespace fa::probes
