// SPDX-License-Identifier: Apache-2.0
// The verbs seam: one move-only owner per libibverbs handle, and the few
// operations the probe needs (open a port, build an RC QP on a registered
// buffer, walk it INIT -> RTR -> RTS). libibverbs reports failures as
// NULL+errno or as a returned errno; both are turned into a classified Fault
// here, where they enter our code.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "probes/rdma/fault.hpp"
#include "probes/rdma/probe.hpp"
#include "probes/rdma/wire.hpp"

namespace fa::rdma {

template <class T, int (*Destroy)(T*)>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p) Destroy(p);
  }
};

using ContextPtr = std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>>;
using MrPtr = std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>>;
using CqPtr = std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp>>;
using CompChannelPtr =
    std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_comp_channel, ibv_destroy_comp_channel>>;

// ibv_get_device_list / ibv_free_device_list.
class DeviceList {
 public:
  DeviceList();
  ~DeviceList();
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  bool ok() const { return list_ != nullptr; }
  int size() const { return n_; }
  ibv_device* operator[](int i) const { return list_[i]; }

 private:
  ibv_device** list_ = nullptr;
  int n_ = 0;
};

// Page-aligned heap memory for registration, freed after its MR (owners
// declare it before the MR, so it is destroyed after it).
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using BufferPtr = std::unique_ptr<void, AlignedFree>;

// An opened port with its chosen GID.
struct Port {
  ContextPtr ctx;
  std::string device;
  uint8_t port = 1;
  int gid_index = 0;
  Gid gid{};
  ibv_port_attr attr{};
  bool ethernet = false;  // RoCE: the GRH is mandatory
  double rate_gbps = 0;
};

// Opens dev:port, checks it is ACTIVE and reads the GID at gid_index. An
// empty or unreadable GID slot is classified qp_rtr_failed: it is the wrong
// GID index case, found before the QP gets there.
Outcome<Port> open_port(const HcaPort& hca, int gid_index);

// Everything one probe run registers, owned in destruction order: QP before
// CQ, MR before its buffer, all before the PD.
struct Link {
  PdPtr pd;
  BufferPtr buf;
  uint64_t len = 0;
  MrPtr mr;
  CqPtr cq;
  QpPtr qp;
  uint32_t psn = 0;
  uint32_t max_inline = 0;
  uint8_t* bytes() const { return static_cast<uint8_t*>(buf.get()); }
};

// Allocates and registers `len` bytes (zeroed), creates a CQ and an RC QP
// able to hold `send_depth` outstanding sends, and moves the QP to INIT with
// remote write access.
Outcome<Link> make_link(const Port& port, uint64_t len, uint32_t send_depth);

// What the peer needs to address this link.
Endpoint local_endpoint(const Port& port, const Link& link);

// INIT -> RTR -> RTS towards `remote`. The path MTU is the smaller of both
// ports' active MTUs; on RoCE the address carries the GRH with the chosen
// sgid_index.
Check connect_link(const Port& port, Link& link, const Endpoint& remote);

// Posts one RDMA WRITE of `len` bytes from local offset `off` to the
// remote's address + `roff`.
Check post_write(const Link& link, const Endpoint& remote, uint64_t off, uint64_t roff, uint32_t len,
                 uint64_t wr_id, bool signaled);

}  // namespace fa::rdma
