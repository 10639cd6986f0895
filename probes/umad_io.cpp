// SPDX-License-Identifier: Apache-2.0
#include "probes/umad_io.hpp"

#include <infiniband/umad.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/fs.hpp"

namespace fa::probes {
namespace {

// libibumad returns negative errno from most calls; normalise once here.
Error umad_error(const std::string& what, int rc) {
  int e = rc < 0 ? -rc : (errno ? errno : EIO);
  return Error::from_errno(what, e);
}

// Owns a umad port fd; closing it also unregisters its agents.
class UmadPort {
 public:
  explicit UmadPort(int fd) : fd_(fd) {}
  UmadPort(const UmadPort&) = delete;
  UmadPort& operator=(const UmadPort&) = delete;
  ~UmadPort() {
    if (fd_ >= 0) umad_close_port(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A transaction id unique enough to match our reply among others.
uint64_t new_tid() {
  static uint32_t seq = 0;
  auto now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return (now + ++seq) & 0xffffffffull;
}

// One request and its reply on an open port: the reply's bytes (a reply
// reassembled from RMPP segments by the kernel may exceed one MAD).
Result<std::vector<uint8_t>> transact(int fd, int agent, const std::string& where, uint32_t dlid, int dqp,
                                      uint32_t qkey, std::span<const uint8_t> mad, uint64_t tid,
                                      int timeout_ms, int retries) {
  std::vector<uint8_t> buf(umad_size() + smp::kMadSize);
  std::memcpy(umad_get_mad(buf.data()), mad.data(), mad.size());
  if (int rc = umad_set_addr(buf.data(), static_cast<int>(dlid), dqp, 0, static_cast<int>(qkey)); rc < 0)
    return umad_error(where + ": umad_set_addr", rc);
  if (int rc = umad_send(fd, agent, buf.data(), static_cast<int>(mad.size()), timeout_ms, retries); rc < 0)
    return umad_error(where + ": umad_send to LID " + std::to_string(dlid), rc);

  int total_ms = timeout_ms * (retries + 1) + 100;
  constexpr int kMaxReply = 64 * 1024;  // an SA table of ~2000 SMInfoRecords
  for (;;) {
    std::vector<uint8_t> rbuf(umad_size() + kMaxReply);
    int len = kMaxReply;
    int rc = umad_recv(fd, rbuf.data(), &len, total_ms);
    if (rc < 0) return umad_error(where + ": umad_recv from LID " + std::to_string(dlid), rc);
    if (int st = umad_status(rbuf.data()); st != 0)
      return Error::from_errno(where + ": no reply from LID " + std::to_string(dlid), st);
    auto* m = static_cast<const uint8_t*>(umad_get_mad(rbuf.data()));
    std::span<const uint8_t> reply(m, static_cast<size_t>(std::clamp(len, 0, kMaxReply)));
    if (reply.size() >= 16 && smp::get_be(reply, 12, 4) != (tid & 0xffffffffull)) continue;  // not our reply
    return std::vector<uint8_t>(reply.begin(), reply.end());
  }
}

Result<smp::SmInfo> sminfo_on(int fd, const std::string& where, uint32_t sm_lid, int timeout_ms,
                              int retries) {
  int agent = umad_register(fd, smp::kClassSubnLidRouted, smp::kClassVersion, 0, nullptr);
  if (agent < 0) return umad_error("SMInfo via " + where + ": umad_register(SMI class)", agent);
  uint64_t tid = new_tid();
  auto req = smp::encode_sminfo_get(tid);
  auto rep = transact(fd, agent, "SMInfo via " + where, sm_lid, 0, 0, req, tid, timeout_ms, retries);
  if (!rep) return rep.take_error();
  auto r = smp::decode_sminfo_response(*rep, tid);
  if (!r) return Error{"SMInfo via " + where + ": " + r.error().message};
  return r;
}

Result<std::vector<smp::SmInfoRecord>> records_on(int fd, const std::string& where, uint32_t sm_lid,
                                                  int timeout_ms, int retries) {
  // RMPP version 1: the kernel reassembles a table longer than one MAD.
  int agent = umad_register(fd, smp::kClassSubnAdm, smp::kSaClassVersion, 1, nullptr);
  if (agent < 0) return umad_error("SMInfoRecord via " + where + ": umad_register(SA class)", agent);
  uint64_t tid = new_tid();
  auto req = smp::encode_sminfo_record_gettable(tid);
  auto rep = transact(fd, agent, "SMInfoRecord via " + where, sm_lid, 1, smp::kGsiQkey, req, tid, timeout_ms,
                      retries);
  if (!rep) return rep.take_error();
  auto r = smp::decode_sminfo_records(*rep, tid);
  if (!r) return Error{"SMInfoRecord via " + where + ": " + r.error().message};
  return r;
}

Result<int> open_port(const std::string& ca, int port, const std::string& where) {
  if (auto ok = umad_available(); !ok) return Error{where + ": " + ok.error().message, ok.error().sys_errno};
  int fd = umad_open_port(ca.c_str(), port);
  if (fd < 0)
    return umad_error(where + ": umad_open_port (is ib_umad loaded and /dev/infiniband/umad* accessible?)",
                      fd);
  return fd;
}

}  // namespace

Status umad_available() {
  // libibumad prints its own complaint to stderr when ib_umad is missing;
  // check first and say it once, in our words.
  if (auto abi = read_text_file("/sys/class/infiniband_mad/abi_version"); !abi)
    return Error{"libibumad unavailable (" + abi.error().message + "); is the ib_umad module loaded?",
                 abi.error().sys_errno};
  if (umad_init() < 0) return Error{"libibumad unavailable: umad_init failed", EIO};
  return {};
}

Result<smp::SmInfo> query_sminfo(const std::string& ca, int port, uint32_t sm_lid, int timeout_ms,
                                 int retries) {
  std::string where = ca + ":" + std::to_string(port);
  auto fd = open_port(ca, port, "SMInfo via " + where);
  if (!fd) return fd.take_error();
  UmadPort p(*fd);
  return sminfo_on(p.get(), where, sm_lid, timeout_ms, retries);
}

SmQuery query_subnet_managers(const std::string& ca, int port, uint32_t sm_lid, int timeout_ms, int retries) {
  std::string where = ca + ":" + std::to_string(port);
  SmQuery q;
  auto fd = open_port(ca, port, "SMInfo via " + where);
  if (!fd) {
    q.master = fd.error();
    q.records = fd.error();
    return q;
  }
  UmadPort p(*fd);
  q.master = sminfo_on(p.get(), where, sm_lid, timeout_ms, retries);
  q.records = records_on(p.get(), where, sm_lid, timeout_ms, retries);
  return q;
}

}  // namespace fa::probes
