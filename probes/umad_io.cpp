// SPDX-License-Identifier: Apache-2.0
#include "probes/umad_io.hpp"

#include <infiniband/umad.h>

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
  if (auto ok = umad_available(); !ok)
    return Error{"SMInfo via " + where + ": " + ok.error().message, ok.error().sys_errno};
  int fd = umad_open_port(ca.c_str(), port);
  if (fd < 0)
    return umad_error("SMInfo via " + where +
                          ": umad_open_port (is ib_umad loaded and /dev/infiniband/umad* "
                          "accessible?)",
                      fd);
  UmadPort p(fd);
  int agent = umad_register(p.get(), smp::kClassSubnLidRouted, smp::kClassVersion, 0, nullptr);
  if (agent < 0) return umad_error("SMInfo via " + where + ": umad_register(SMI class)", agent);

  // A transaction id unique enough to match our reply among others.
  uint64_t tid =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) & 0xffffffffull;
  auto mad = smp::encode_sminfo_get(tid);
  std::vector<uint8_t> buf(umad_size() + smp::kMadSize);
  std::memcpy(umad_get_mad(buf.data()), mad.data(), mad.size());
  if (int rc = umad_set_addr(buf.data(), static_cast<int>(sm_lid), 0, 0, 0); rc < 0)
    return umad_error("SMInfo via " + where + ": umad_set_addr", rc);
  if (int rc = umad_send(p.get(), agent, buf.data(), static_cast<int>(smp::kMadSize), timeout_ms, retries);
      rc < 0)
    return umad_error("SMInfo via " + where + ": umad_send to SM LID " + std::to_string(sm_lid), rc);

  int total_ms = timeout_ms * (retries + 1) + 100;
  for (;;) {
    std::vector<uint8_t> rbuf(umad_size() + smp::kMadSize);
    int len = static_cast<int>(smp::kMadSize);
    int rc = umad_recv(p.get(), rbuf.data(), &len, total_ms);
    if (rc < 0)
      return umad_error("SMInfo via " + where + ": umad_recv from SM LID " + std::to_string(sm_lid), rc);
    if (int st = umad_status(rbuf.data()); st != 0)
      return Error::from_errno("SMInfo via " + where + ": no reply from SM LID " + std::to_string(sm_lid),
                               st);
    auto* m = static_cast<const uint8_t*>(umad_get_mad(rbuf.data()));
    std::span<const uint8_t> reply(m, static_cast<size_t>(len > 0 ? len : 0));
    if (reply.size() >= 16 && smp::get_be(reply, 12, 4) != (tid & 0xffffffffull)) continue;  // not our reply
    auto r = smp::decode_sminfo_response(reply, tid);
    if (!r) return Error{"SMInfo via " + where + ": " + r.error().message};
    return r;
  }
}

}  // namespace fa::probes
