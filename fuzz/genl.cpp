// SPDX-License-Identifier: Apache-2.0
// The kernel backend's read of a WireGuard device: the input is one netlink
// datagram on the dump socket, read by genl_recv_dump (framing, sequence and
// port matching, NLMSG_ERROR/NLMSG_DONE), whose messages genl_parse_device
// decodes. A datagram without NLMSG_DONE ends the read at EAGAIN (the
// socket is non-blocking here; the kernel's is a blocking one that the
// kernel always finishes).
// Checked: a decoded device is shown as `mesh show` shows it, and built back
// into SET_DEVICE messages (split at a small bound) it decodes to the same
// configuration.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netlink/msg.h>

#include <nlohmann/json.hpp>

#include "fuzz/fuzz.hpp"
#include "overlay/internal.hpp"

namespace ov = fa::overlay;

namespace {

constexpr uint32_t kPort = 0x1234;      // the seeds' nlmsg_pid
constexpr uint32_t kSeq = 0x46410000;   // the kernel backend's dump sequence
constexpr uint16_t kFamily = 0x1c;      // any generic netlink family id

struct Pair {
  int reader = -1, writer = -1;
  Pair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) std::abort();
    reader = fds[0];
    writer = fds[1];
    int big = 1 << 20;
    ::setsockopt(writer, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    ::setsockopt(reader, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
};

const Pair& pair() {
  static const Pair p;
  return p;
}

void drain() {
  uint8_t b[16];
  while (::recv(pair().reader, b, sizeof b, MSG_TRUNC) >= 0) {
  }
}

std::vector<std::vector<uint8_t>> bytes_of(const std::vector<ov::WipedMsg>& msgs) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& m : msgs) {
    const nlmsghdr* h = nlmsg_hdr(m.get());
    const auto* b = reinterpret_cast<const uint8_t*>(h);
    out.emplace_back(b, b + h->nlmsg_len);
  }
  return out;
}

// What a SET_DEVICE carries of a device (observed-only fields aside), with
// allowed IPs as networks: the builder sends them so.
void check_same_config(const ov::Device& want, const ov::Device& got) {
  FUZZ_CHECK(got.name == want.name);
  FUZZ_CHECK(got.private_key == want.private_key);
  FUZZ_CHECK(got.listen_port == want.listen_port);
  FUZZ_CHECK(got.fwmark == want.fwmark);
  FUZZ_CHECK(got.replace_peers == want.replace_peers);
  FUZZ_CHECK(got.peers.size() == want.peers.size());
  for (size_t i = 0; i < want.peers.size(); ++i) {
    const ov::Peer& w = want.peers[i];
    const ov::Peer& g = got.peers[i];
    FUZZ_CHECK(g.public_key == w.public_key);
    FUZZ_CHECK(g.remove == w.remove);
    if (w.remove) continue;  // a removed peer is sent as its key and flag only
    FUZZ_CHECK(g.update_only == w.update_only);
    FUZZ_CHECK(g.replace_allowed_ips == w.replace_allowed_ips);
    FUZZ_CHECK(g.endpoint == w.endpoint);
    FUZZ_CHECK(g.persistent_keepalive == w.persistent_keepalive);
    FUZZ_CHECK(g.allowed_ips.size() == w.allowed_ips.size());
    for (size_t j = 0; j < w.allowed_ips.size(); ++j) FUZZ_CHECK(g.allowed_ips[j] == w.allowed_ips[j].network());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  drain();
  if (::send(pair().writer, data, size, 0) != static_cast<ssize_t>(size)) return 0;  // larger than the socket takes
  std::vector<std::vector<uint8_t>> parts;
  int rc = ov::genl_recv_dump(pair().reader, kPort, kSeq, parts);
  drain();
  FUZZ_CHECK(rc <= 0);
  if (rc != 0) return 0;
  for (const auto& p : parts) FUZZ_CHECK(p.size() >= NLMSG_HDRLEN);

  auto d = ov::genl_parse_device(parts);
  if (!d) {
    FUZZ_CHECK(!d.error().message.empty());
    return 0;
  }
  ov::Shown s;
  s.interface = d->name;
  s.device = *d;
  s.device.private_key.reset();
  std::string shown = ov::to_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  FUZZ_CHECK(!shown.empty());

  // A peer the decoder merged (continued across messages) is one peer; one
  // that repeats a key later is a second peer in both the input and the
  // rebuilt messages only while they stay in separate messages, which a
  // rebuild need not keep: compare only devices whose peers have unique keys.
  for (size_t i = 1; i < d->peers.size(); ++i)
    if (d->peers[i].public_key == d->peers[i - 1].public_key) return 0;
  if (d->name.empty()) return 0;  // a SET_DEVICE always names its device
  auto built = ov::genl_build_set(*d, kFamily, 1024);
  if (built.empty()) return 0;  // one peer does not fit the bound
  auto back = ov::genl_parse_device(bytes_of(built));
  FUZZ_CHECK(back.ok());
  check_same_config(*d, *back);
  return 0;
}
