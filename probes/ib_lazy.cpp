// SPDX-License-Identifier: Apache-2.0
// libibverbs and libibumad loaded on first use, not at process start.
//
// Only the RDMA link probe (verbs) and the SMInfo query of an InfiniBand
// port (umad) call them; `inspect` on a RoCE or IB-less host, `mesh`, the
// OCI hook and the daemon's start never do, yet every process paid for
// mapping and relocating both (~0.15 ms per start here). Same pattern as
// common/openssl_lazy.cpp: each function the agent calls is defined here
// with the prototype of rdma-core's own header (the compiler checks it) and
// forwards to the real one, which the first call loads by soname (the
// package Depends on libibverbs1 and libibumad3). verbs.h defines
// ibv_query_port and ibv_reg_mr as macros over inline wrappers that call
// the exported functions; those macros are undone here so that the
// exported names can be defined.
#include <infiniband/umad.h>
#include <infiniband/verbs.h>

#include "common/dl.hpp"

#undef ibv_query_port
#undef ibv_reg_mr

namespace fa::probes {
namespace {

enum Lib { kVerbs, kUmad };

// Each library is loaded once, on the first call of one of its functions.
// dlsym gives a symbol's default version, the one the linker would bind
// (IBVERBS_1.1 for the verbs that also have a 1.0 compat version).
void* symbol(Lib lib, const char* name) {
  if (lib == kVerbs) {
    static void* const verbs = dl_load_or_die("libibverbs.so.1", "libibverbs1");
    return dl_symbol_or_die(verbs, "libibverbs.so.1", name);
  }
  static void* const umad = dl_load_or_die("libibumad.so.3", "libibumad3");
  return dl_symbol_or_die(umad, "libibumad.so.3", name);
}

}  // namespace
}  // namespace fa::probes

#define FA_IB(lib, ret, name, params, args)                                                                 \
  extern "C" ret name params {                                                                              \
    static const auto real = reinterpret_cast<decltype(&name)>(fa::probes::symbol(fa::probes::lib, #name)); \
    return real args;                                                                                       \
  }

FA_IB(kVerbs, struct ibv_device**, ibv_get_device_list, (int* num_devices), (num_devices))
FA_IB(kVerbs, void, ibv_free_device_list, (struct ibv_device * *list), (list))
FA_IB(kVerbs, const char*, ibv_get_device_name, (struct ibv_device * device), (device))
FA_IB(kVerbs, struct ibv_context*, ibv_open_device, (struct ibv_device * device), (device))
FA_IB(kVerbs, int, ibv_close_device, (struct ibv_context * context), (context))
FA_IB(kVerbs, int, ibv_query_port,
      (struct ibv_context * context, uint8_t port_num, struct _compat_ibv_port_attr* port_attr),
      (context, port_num, port_attr))
FA_IB(kVerbs, int, ibv_query_gid,
      (struct ibv_context * context, uint8_t port_num, int index, union ibv_gid* gid),
      (context, port_num, index, gid))
FA_IB(kVerbs, struct ibv_pd*, ibv_alloc_pd, (struct ibv_context * context), (context))
FA_IB(kVerbs, int, ibv_dealloc_pd, (struct ibv_pd * pd), (pd))
FA_IB(kVerbs, struct ibv_mr*, ibv_reg_mr, (struct ibv_pd * pd, void* addr, size_t length, int access),
      (pd, addr, length, access))
// At -O0 the inline ibv_reg_mr cannot prove its access flags constant and
// calls this one instead.
FA_IB(kVerbs, struct ibv_mr*, ibv_reg_mr_iova2,
      (struct ibv_pd * pd, void* addr, size_t length, uint64_t iova, unsigned int access),
      (pd, addr, length, iova, access))
FA_IB(kVerbs, int, ibv_dereg_mr, (struct ibv_mr * mr), (mr))
FA_IB(kVerbs, struct ibv_cq*, ibv_create_cq,
      (struct ibv_context * context, int cqe, void* cq_context, struct ibv_comp_channel* channel,
       int comp_vector),
      (context, cqe, cq_context, channel, comp_vector))
FA_IB(kVerbs, int, ibv_destroy_cq, (struct ibv_cq * cq), (cq))
FA_IB(kVerbs, struct ibv_qp*, ibv_create_qp, (struct ibv_pd * pd, struct ibv_qp_init_attr* qp_init_attr),
      (pd, qp_init_attr))
FA_IB(kVerbs, int, ibv_modify_qp, (struct ibv_qp * qp, struct ibv_qp_attr* attr, int attr_mask),
      (qp, attr, attr_mask))
FA_IB(kVerbs, int, ibv_destroy_qp, (struct ibv_qp * qp), (qp))
FA_IB(kVerbs, const char*, ibv_port_state_str, (enum ibv_port_state port_state), (port_state))
FA_IB(kVerbs, const char*, ibv_wc_status_str, (enum ibv_wc_status status), (status))

FA_IB(kUmad, int, umad_init, (void), ())
FA_IB(kUmad, int, umad_open_port, (const char* ca_name, int portnum), (ca_name, portnum))
FA_IB(kUmad, int, umad_close_port, (int portid), (portid))
FA_IB(kUmad, int, umad_register,
      (int portid, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
       long method_mask[16 / sizeof(long)]),
      (portid, mgmt_class, mgmt_version, rmpp_version, method_mask))
FA_IB(kUmad, size_t, umad_size, (void), ())
FA_IB(kUmad, void*, umad_get_mad, (void* umad), (umad))
FA_IB(kUmad, int, umad_set_addr, (void* umad, int dlid, int dqp, int sl, int qkey),
      (umad, dlid, dqp, sl, qkey))
FA_IB(kUmad, int, umad_send, (int portid, int agentid, void* umad, int length, int timeout_ms, int retries),
      (portid, agentid, umad, length, timeout_ms, retries))
FA_IB(kUmad, int, umad_recv, (int portid, void* umad, int* length, int timeout_ms),
      (portid, umad, length, timeout_ms))
FA_IB(kUmad, int, umad_status, (void* umad), (umad))
