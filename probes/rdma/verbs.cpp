// SPDX-License-Identifier: Apache-2.0
#include "probes/rdma/verbs.hpp"

#include <cerrno>
#include <cstring>
#include <random>

namespace fa::rdma {
namespace {

std::string where(const Port& p) { return p.device + ":" + std::to_string(p.port); }

Fault device_fault(const std::string& what, int err) {
  return Fault{Reason::kDeviceError, what + ": " + std::strerror(err)};
}

uint32_t mtu_bytes(ibv_mtu m) { return 128u << static_cast<unsigned>(m); }

ibv_mtu mtu_enum(uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

}  // namespace

DeviceList::DeviceList() { list_ = ibv_get_device_list(&n_); }
DeviceList::~DeviceList() {
  if (list_) ibv_free_device_list(list_);
}

Outcome<Port> open_port(const HcaPort& hca, int gid_index) {
  DeviceList devs;
  // Without the RDMA subsystem (no ib_uverbs) libibverbs answers ENOSYS:
  // that is "no devices", said as such.
  if (!devs.ok() && errno != ENOSYS) return device_fault("ibv_get_device_list", errno);
  ibv_device* dev = nullptr;
  std::string names;
  for (int i = 0; devs.ok() && i < devs.size(); ++i) {
    const char* n = ibv_get_device_name(devs[i]);
    names += (names.empty() ? "" : ", ") + std::string(n);
    if (hca.device == n) dev = devs[i];
  }
  if (!dev)
    return Fault{Reason::kDeviceError, "RDMA device '" + hca.device + "' not found (present: " +
                                           (names.empty() ? std::string("none") : names) + ")"};
  Port p;
  p.device = hca.device;
  p.port = hca.port;
  p.gid_index = gid_index;
  p.ctx.reset(ibv_open_device(dev));
  if (!p.ctx) return device_fault("ibv_open_device " + hca.device, errno);
  if (int rc = ibv_query_port(p.ctx.get(), p.port, &p.attr))
    return device_fault("ibv_query_port " + where(p), rc);
  if (p.attr.state != IBV_PORT_ACTIVE)
    return Fault{Reason::kDeviceError, "port " + where(p) + " is " + ibv_port_state_str(p.attr.state) +
                                           ", not ACTIVE"};
  p.ethernet = p.attr.link_layer == IBV_LINK_LAYER_ETHERNET;
  p.rate_gbps = port_rate_gbps(p.attr.active_width, p.attr.active_speed);
  if (gid_index < 0 || gid_index >= p.attr.gid_tbl_len)
    return Fault{Reason::kQpRtrFailed, "GID index " + std::to_string(gid_index) + " is outside the GID table of " +
                                           where(p) + " (0.." + std::to_string(p.attr.gid_tbl_len - 1) + ")"};
  ibv_gid gid{};
  if (int rc = ibv_query_gid(p.ctx.get(), p.port, gid_index, &gid))
    return Fault{Reason::kQpRtrFailed, "GID index " + std::to_string(gid_index) + " of " + where(p) +
                                           " cannot be read (" + std::strerror(rc > 0 ? rc : errno) +
                                           "): an empty slot cannot reach RTR"};
  std::memcpy(p.gid.data(), gid.raw, 16);
  if (p.gid == Gid{})
    return Fault{Reason::kQpRtrFailed, "GID index " + std::to_string(gid_index) + " of " + where(p) +
                                           " is empty: an empty slot cannot reach RTR"};
  return p;
}

Outcome<Link> make_link(const Port& port, uint64_t len, uint32_t send_depth) {
  Link l;
  l.len = len;
  l.pd.reset(ibv_alloc_pd(port.ctx.get()));
  if (!l.pd) return device_fault("ibv_alloc_pd on " + where(port), errno);
  const uint64_t rounded = (len + 4095) / 4096 * 4096;
  l.buf.reset(std::aligned_alloc(4096, rounded));
  if (!l.buf) return Fault{Reason::kDeviceError, "cannot allocate " + std::to_string(rounded) + " bytes"};
  std::memset(l.buf.get(), 0, rounded);
  l.mr.reset(ibv_reg_mr(l.pd.get(), l.buf.get(), len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  if (!l.mr)
    return device_fault("ibv_reg_mr of " + std::to_string(len) + " bytes on " + where(port) +
                            " (RLIMIT_MEMLOCK too low?)",
                        errno);
  l.cq.reset(ibv_create_cq(port.ctx.get(), static_cast<int>(send_depth) + 16, nullptr, nullptr, 0));
  if (!l.cq) return device_fault("ibv_create_cq on " + where(port), errno);

  ibv_qp_init_attr init{};
  init.send_cq = l.cq.get();
  init.recv_cq = l.cq.get();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // the bandwidth loop signals one WRITE in a batch
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  // Inline pings keep a PCIe read off the latency path; not every device
  // offers inline data, so fall back to none.
  init.cap.max_inline_data = 64;
  l.qp.reset(ibv_create_qp(l.pd.get(), &init));
  if (!l.qp) {
    init.cap.max_inline_data = 0;
    l.qp.reset(ibv_create_qp(l.pd.get(), &init));
  }
  if (!l.qp) return device_fault("ibv_create_qp (RC, " + std::to_string(send_depth) + " send WRs) on " + where(port), errno);
  l.max_inline = init.cap.max_inline_data;

  std::random_device rd;
  l.psn = rd() & 0xffffff;

  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = port.port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (int rc = ibv_modify_qp(l.qp.get(), &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
    return Fault{classify_modify_qp(IBV_QPS_INIT, rc),
                 "ibv_modify_qp RESET->INIT on " + where(port) + ": " + std::strerror(rc)};
  return l;
}

Endpoint local_endpoint(const Port& port, const Link& link) {
  Endpoint e;
  e.lid = port.attr.lid;
  e.qpn = link.qp->qp_num;
  e.psn = link.psn;
  e.mtu = mtu_bytes(port.attr.active_mtu);
  e.gid = port.gid;
  e.rkey = link.mr->rkey;
  e.addr = reinterpret_cast<uintptr_t>(link.buf.get());
  e.len = link.len;
  return e;
}

Check connect_link(const Port& port, Link& link, const Endpoint& remote) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = mtu_enum(std::min(mtu_bytes(port.attr.active_mtu), remote.mtu));
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = port.port;
  a.ah_attr.dlid = remote.lid;
  a.ah_attr.sl = 0;
  // RoCE has no LIDs: the GRH is what addresses the peer, and sgid_index
  // picks the GID (hence IPv4/IPv6 and RoCE v1/v2) the packets leave with,
  // which is exactly the choice NCCL_IB_GID_INDEX makes.
  if (port.ethernet || remote.lid == 0) {
    a.ah_attr.is_global = 1;
    std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.grh.traffic_class = 0;
    a.ah_attr.grh.flow_label = 0;
  }
  const std::string peer_gid = gid_text(remote.gid);
  if (int rc = ibv_modify_qp(link.qp.get(), &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return Fault{classify_modify_qp(IBV_QPS_RTR, rc),
                 "ibv_modify_qp INIT->RTR on " + where(port) + " with GID index " + std::to_string(port.gid_index) +
                     " towards " + peer_gid + ": " + std::strerror(rc) +
                     " (usually a GID index whose type or address family does not match the peer's)"};
  ibv_qp_attr s{};
  s.qp_state = IBV_QPS_RTS;
  s.timeout = 14;  // 4.096us * 2^14 = 67 ms per attempt
  // On hardware a dead or lossy path surfaces as RETRY_EXC_ERR after 7
  // retries, about half a second. Soft-RoCE (rxe) takes 7 as "retry
  // forever" (as the spec does only for the RNR count): there the probe
  // fails with its own `timeout` instead. Not 6 for rxe's sake: Debian 12's
  // rxe (6.1) soft-locks a CPU in the retry-exceeded path (seen in the lab's
  // probe-failures with RoCE dropped mid-run).
  s.retry_cnt = 7;
  s.rnr_retry = 7;  // 7: retry forever when the peer has no receive posted yet
  s.sq_psn = link.psn;
  s.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(link.qp.get(), &s,
                             IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC))
    return Fault{classify_modify_qp(IBV_QPS_RTS, rc),
                 "ibv_modify_qp RTR->RTS on " + where(port) + ": " + std::strerror(rc)};
  return std::nullopt;
}

Check post_write(const Link& link, const Endpoint& remote, uint64_t off, uint64_t roff, uint32_t len,
                 uint64_t wr_id, bool signaled) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(link.bytes() + off);
  sge.length = len;
  sge.lkey = link.mr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  if (len <= link.max_inline) wr.send_flags |= IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = remote.addr + roff;
  wr.wr.rdma.rkey = remote.rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(link.qp.get(), &wr, &bad))
    return Fault{Reason::kDeviceError, std::string("ibv_post_send: ") + std::strerror(rc)};
  return std::nullopt;
}

}  // namespace fa::rdma
