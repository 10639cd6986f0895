// SPDX-License-Identifier: Apache-2.0
// genl_recv_dump, the kernel backend's reader of a GET_DEVICE dump, fed
// hand-made netlink datagrams through a unix datagram socket pair: the
// answers the kernel gives only in rare cases (the link gone between the
// lookup and the dump, a dump torn by a concurrent change, a dump that
// fails midway, a datagram larger than the buffer) on demand.
#include <linux/netlink.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "overlay/internal.hpp"

using namespace fa::overlay;
using Bytes = std::vector<uint8_t>;

namespace {

constexpr uint32_t kPort = 4242, kSeq = 77;

Bytes message(uint16_t type, uint16_t flags, const Bytes& payload, uint32_t seq = kSeq,
              uint32_t port = kPort) {
  Bytes m(NLMSG_ALIGN(NLMSG_LENGTH(payload.size())));
  nlmsghdr h{};
  h.nlmsg_len = static_cast<uint32_t>(NLMSG_LENGTH(payload.size()));
  h.nlmsg_type = type;
  h.nlmsg_flags = flags;
  h.nlmsg_seq = seq;
  h.nlmsg_pid = port;
  std::memcpy(m.data(), &h, sizeof h);
  if (!payload.empty()) std::memcpy(m.data() + NLMSG_HDRLEN, payload.data(), payload.size());
  return m;
}

Bytes int_payload(int v) {
  Bytes b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

Bytes error_payload(int err) {
  nlmsgerr e{};
  e.error = err;
  Bytes b(sizeof e);
  std::memcpy(b.data(), &e, sizeof e);
  return b;
}

Bytes part(uint8_t fill, size_t n = 24, uint16_t flags = NLM_F_MULTI) {
  return message(0x20, flags, Bytes(n, fill));  // a family's message: any type >= NLMSG_MIN_TYPE
}

Bytes done(int err = 0) { return message(NLMSG_DONE, NLM_F_MULTI, int_payload(err)); }

// One datagram holding the given messages back to back.
Bytes datagram(std::initializer_list<Bytes> msgs) {
  Bytes d;
  for (const auto& m : msgs) d.insert(d.end(), m.begin(), m.end());
  return d;
}

// The message as genl_recv_dump copies it: nlmsg_len bytes, no padding.
Bytes unpadded(const Bytes& m) {
  nlmsghdr h;
  std::memcpy(&h, m.data(), sizeof h);
  return Bytes(m.begin(), m.begin() + h.nlmsg_len);
}

struct Pair {
  int reader = -1, writer = -1;
  Pair() {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, fds) == 0);
    reader = fds[0];
    writer = fds[1];
  }
  ~Pair() {
    ::close(reader);
    ::close(writer);
  }
  void send(const Bytes& d) const {
    REQUIRE(::send(writer, d.data(), d.size(), 0) == static_cast<ssize_t>(d.size()));
  }
  // What is still queued: one marker datagram sent after the dump must be next.
  bool marker_next() const {
    const Bytes marker{'m', 'k'};
    send(marker);
    Bytes got(16);
    ssize_t n = ::recv(reader, got.data(), got.size(), MSG_DONTWAIT);
    return n == 2 && got[0] == 'm' && got[1] == 'k';
  }
};

}  // namespace

TEST_CASE("genl dump reader: every message of this request in order, until NLMSG_DONE", "[genl]") {
  Pair p;
  const Bytes a = part(0xa1), b = part(0xb2, 30),
              foreign_seq = message(0x20, NLM_F_MULTI, Bytes(8, 1), kSeq + 1),
              foreign_port = message(0x20, NLM_F_MULTI, Bytes(8, 2), kSeq, kPort + 1);
  p.send(datagram({a, foreign_seq, b}));
  p.send(datagram({foreign_port, message(NLMSG_NOOP, 0, {}), done()}));
  std::vector<Bytes> parts;
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == 0);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == unpadded(a));
  CHECK(parts[1] == unpadded(b));
  CHECK(p.marker_next());  // nothing read past NLMSG_DONE, nothing left before it
}

TEST_CASE("genl dump reader: an error instead of the dump is returned as libnl's code", "[genl]") {
  Pair p;
  // What the kernel answers when the link vanished between the rtnetlink
  // lookup and the dump.
  p.send(datagram({message(NLMSG_ERROR, 0, error_payload(-ENODEV))}));
  std::vector<Bytes> parts;
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -nl_syserr2nlerr(ENODEV));
  CHECK(parts.empty());
  // An error for another request is not this one's.
  p.send(datagram({message(NLMSG_ERROR, 0, error_payload(-EPERM), kSeq + 9), part(1), done()}));
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == 0);
  CHECK(parts.size() == 1);
}

TEST_CASE("genl dump reader: a dump that fails midway says so in NLMSG_DONE", "[genl]") {
  Pair p;
  p.send(datagram({part(1), part(2)}));
  p.send(datagram({done(-EMSGSIZE)}));
  std::vector<Bytes> parts;
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -nl_syserr2nlerr(EMSGSIZE));
  CHECK(p.marker_next());
}

TEST_CASE("genl dump reader: an error code that is no errno is a failure, not an overflow", "[genl]") {
  // -INT_MIN overflowed (UBSan ends the ASan tree's run there).
  std::vector<Bytes> parts;
  for (const Bytes& d : {datagram({message(NLMSG_ERROR, 0, error_payload(INT_MIN))}),
                         datagram({part(1), done(INT_MIN)}), datagram({done(-4096)})}) {
    Pair p;
    p.send(d);
    CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -NLE_FAILURE);
  }
}

TEST_CASE("genl dump reader: a dump flagged as torn is read to its end and reported", "[genl]") {
  Pair p;
  p.send(datagram({part(1), part(2, 24, NLM_F_MULTI | NLM_F_DUMP_INTR)}));
  p.send(datagram({part(3), done()}));
  std::vector<Bytes> parts;
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -NLE_DUMP_INTR);
  CHECK(parts.size() == 3);
  CHECK(p.marker_next());  // the next attempt starts on a clean socket
}

TEST_CASE("genl dump reader: a datagram above the kernel's 32 KiB dump size arrives whole", "[genl]") {
  Pair p;
  Bytes big(40000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  const Bytes m = message(0x20, NLM_F_MULTI, big);
  p.send(datagram({m}));
  p.send(datagram({part(9), done()}));
  std::vector<Bytes> parts;
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == 0);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0] == unpadded(m));
  CHECK(parts[1] == unpadded(part(9)));
}

TEST_CASE("genl dump reader: a datagram beyond its buffer is refused, not read cut", "[genl]") {
  Pair p;
  Bytes huge(70000, 0x5a);
  p.send(datagram({message(0x20, NLM_F_MULTI, huge)}));
  std::vector<Bytes> parts;
  CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -NLE_MSG_TRUNC);
  CHECK(parts.empty());
}

TEST_CASE("genl dump reader: an empty datagram or a cut error message is refused", "[genl]") {
  std::vector<Bytes> parts;
  {
    Pair p;
    p.send(Bytes{});
    CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -NLE_MSG_TRUNC);
  }
  {
    Pair p;
    Bytes cut = message(NLMSG_ERROR, 0, Bytes(2, 0));  // shorter than struct nlmsgerr
    p.send(cut);
    CHECK(genl_recv_dump(p.reader, kPort, kSeq, parts) == -NLE_MSG_TRUNC);
  }
}
