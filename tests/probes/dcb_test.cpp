// SPDX-License-Identifier: Apache-2.0
// DCB_CMD_IEEE_GET replies laid out by hand as the kernel builds them for
// mlx5 (dcbnl_ieee_fill: DCB_ATTR_IFNAME, then DCB_ATTR_IEEE nesting ETS,
// MAXRATE, PFC, DCB_BUFFER and the APP table, then DCB_ATTR_DCBX), with
// the uapi structs' byte offsets of include/uapi/linux/dcbnl.h, in host
// byte order (x86_64: little endian), netlink attributes padded to 4 bytes.
#include <catch2/catch.hpp>

#include <linux/dcbnl.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include "probes/dcb.hpp"

using namespace fa::probes;
using Bytes = std::vector<uint8_t>;

namespace {

// struct nlattr { __u16 nla_len; __u16 nla_type; } + payload, padded to 4.
Bytes attr(uint16_t type, const Bytes& payload) {
  Bytes b;
  uint16_t len = static_cast<uint16_t>(4 + payload.size());
  b.push_back(static_cast<uint8_t>(len & 0xff));
  b.push_back(static_cast<uint8_t>(len >> 8));
  b.push_back(static_cast<uint8_t>(type & 0xff));
  b.push_back(static_cast<uint8_t>(type >> 8));
  b.insert(b.end(), payload.begin(), payload.end());
  while (b.size() % 4) b.push_back(0);
  return b;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes b;
  for (const auto& p : parts) b.insert(b.end(), p.begin(), p.end());
  return b;
}

void put_le(Bytes& b, size_t off, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

// struct ieee_ets, 59 bytes: willing, ets_cap, cbs, then 8 bytes each of
// tc_tx_bw (3), tc_rx_bw (11), tc_tsa (19), prio_tc (27), tc_reco_bw,
// tc_reco_tsa, reco_prio_tc. mlx5 after `mlnx_qos --trust dscp --pfc
// 0,0,0,1,0,0,0,0`: priority 0 on TC 1 and 1 on TC 0, all ETS.
Bytes mlx5_ets() {
  Bytes e(59, 0);
  e[1] = 8;
  const uint8_t bw[8] = {12, 13, 12, 13, 12, 13, 12, 13};
  const uint8_t prio_tc[8] = {1, 0, 2, 3, 4, 5, 6, 7};
  for (int i = 0; i < 8; ++i) {
    e[3 + i] = bw[i];
    e[19 + i] = 2;  // IEEE_8021QAZ_TSA_ETS
    e[27 + i] = prio_tc[i];
  }
  return e;
}

// struct ieee_pfc, 136 bytes: pfc_cap (0), pfc_en (1), mbc (2), delay (4,
// u16), requests[8] (8, u64), indications[8] (72, u64).
Bytes mlx5_pfc(uint8_t pfc_en) {
  Bytes p(136, 0);
  p[0] = 8;
  p[1] = pfc_en;
  put_le(p, 8 + 3 * 8, 1200, 8);   // pause frames sent on priority 3
  put_le(p, 72 + 3 * 8, 3400, 8);  // received on priority 3
  return p;
}

// struct dcb_app, 4 bytes: selector, priority, protocol (u16).
Bytes app(uint8_t selector, uint8_t prio, uint16_t protocol) {
  Bytes a(4, 0);
  a[0] = selector;
  a[1] = prio;
  put_le(a, 2, protocol, 2);
  return a;
}

Bytes mlx5_reply(uint8_t pfc_en, bool dscp_map) {
  Bytes name = {'e', 'n', 's', '1', '0', 'n', 'p', '0', 0};
  Bytes apps = dscp_map ? cat({attr(DCB_ATTR_IEEE_APP, app(5, 0, 0)), attr(DCB_ATTR_IEEE_APP, app(5, 3, 26)),
                               attr(DCB_ATTR_IEEE_APP, app(5, 6, 48))})
                        : Bytes{};
  Bytes ieee = cat({attr(DCB_ATTR_IEEE_ETS, mlx5_ets()), attr(DCB_ATTR_IEEE_MAXRATE, Bytes(64, 0)),
                    attr(DCB_ATTR_IEEE_PFC, mlx5_pfc(pfc_en)), attr(DCB_ATTR_DCB_BUFFER, Bytes(44, 0)),
                    attr(DCB_ATTR_IEEE_APP_TABLE, apps)});
  return cat({attr(DCB_ATTR_IFNAME, name), attr(DCB_ATTR_IEEE, ieee),
              attr(DCB_ATTR_DCBX, {DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE})});
}

}  // namespace

static_assert(sizeof(ieee_pfc) == 136 && offsetof(ieee_pfc, requests) == 8 &&
              offsetof(ieee_pfc, indications) == 72);
static_assert(sizeof(ieee_ets) == 59 && offsetof(ieee_ets, tc_tsa) == 19 &&
              offsetof(ieee_ets, prio_tc) == 27);

TEST_CASE("DCB: an mlx5 IEEE_GET reply decodes PFC, ETS and the DSCP map") {
  auto d = decode_dcb_ieee(mlx5_reply(0x48, true));  // lossless priorities 3 and 6
  REQUIRE(d.ok());
  CHECK(d->has_pfc);
  CHECK(d->pfc_cap == 8);
  CHECK(d->pfc_en == 0x48);
  CHECK(d->pfc_requests[3] == 1200u);
  CHECK(d->pfc_indications[3] == 3400u);
  CHECK(d->pfc_requests[0] == 0u);
  CHECK(d->has_ets);
  CHECK(d->prio_tc == std::array<uint8_t, 8>{1, 0, 2, 3, 4, 5, 6, 7});
  CHECK(d->tc_tsa[0] == 2);
  CHECK(d->tc_tx_bw[1] == 13);
  CHECK(d->dscp_prio == std::map<int, int>{{0, 0}, {26, 3}, {48, 6}});
  CHECK(d->dcbx == (DCB_CAP_DCBX_HOST | DCB_CAP_DCBX_VER_IEEE));

  Lossless l = lossless_verdict("ens10np0", d, Ecn{0x08, 0x08});
  CHECK(l.state == "yes");
  CHECK(l.pfc_priorities == std::vector<int>{3, 6});
  CHECK(l.pfc_requests.at(3) == 1200u);
  CHECK(l.nccl_ib_tc == 104);  // DSCP 26 << 2
  CHECK(
      l.reason ==
      "ens10np0: PFC on priority 3,6; DSCP 26 maps to it (priority 3): NCCL_IB_TC=104; ECN on for priority 3");
  CHECK(l.tc_tsa == std::vector<std::string>{"ets", "ets", "ets", "ets", "ets", "ets", "ets", "ets"});
  CHECK(l.ecn_np == std::vector<int>{3});
}

TEST_CASE("DCB: the verdicts") {
  // PFC off everywhere: not lossless.
  Lossless no = lossless_verdict("ens10np0", decode_dcb_ieee(mlx5_reply(0x00, true)), std::nullopt);
  CHECK(no.state == "no");
  CHECK(no.reason.find("PFC is off on every priority") != std::string::npos);
  CHECK_FALSE(no.nccl_ib_tc);
  // PFC on, but ECN off for that priority: lossless, and the reason says what is missing.
  Lossless no_ecn = lossless_verdict("ens10np0", decode_dcb_ieee(mlx5_reply(0x08, true)), Ecn{0, 0});
  CHECK(no_ecn.state == "yes");
  CHECK(no_ecn.reason.find("ECN is off for priority 3") != std::string::npos);
  // PFC on without a DSCP map: the VLAN priority selects the queue.
  Lossless pcp = lossless_verdict("ens10np0", decode_dcb_ieee(mlx5_reply(0x08, false)), std::nullopt);
  CHECK(pcp.state == "yes");
  CHECK_FALSE(pcp.nccl_ib_tc);
  CHECK(pcp.reason.find("NCCL_IB_SL=3") != std::string::npos);
  // A driver without DCB (veth, rxe): unknown, with why.
  Lossless unk =
      lossless_verdict("vethA", fa::Error{"RTM_GETDCB: Operation not supported", EOPNOTSUPP}, std::nullopt);
  CHECK(unk.state == "unknown");
  CHECK(unk.reason.find("vethA: the driver has no DCB support") != std::string::npos);
  // A reply with the name only (no IEEE ops): unknown.
  Lossless bare =
      lossless_verdict("eth0", decode_dcb_ieee(attr(DCB_ATTR_IFNAME, {'e', 't', 'h', '0', 0})), std::nullopt);
  CHECK(bare.state == "unknown");
  CHECK(bare.reason == "eth0: the driver reports no IEEE PFC state");
}

TEST_CASE("DCB: damaged replies are errors naming the attribute") {
  Bytes shortpfc = attr(DCB_ATTR_IEEE, attr(DCB_ATTR_IEEE_PFC, Bytes(40, 0)));
  auto r = decode_dcb_ieee(shortpfc);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("DCB_ATTR_IEEE_PFC is 40 bytes") != std::string::npos);
  Bytes shortets = attr(DCB_ATTR_IEEE, attr(DCB_ATTR_IEEE_ETS, Bytes(10, 0)));
  CHECK(decode_dcb_ieee(shortets).error().message.find("DCB_ATTR_IEEE_ETS") != std::string::npos);
  Bytes truncated = mlx5_reply(0x08, true);
  truncated.resize(truncated.size() - 37);  // cut inside an attribute: nla_parse stops there, no overread
  (void)decode_dcb_ieee(truncated);
}
