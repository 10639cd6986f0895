// SPDX-License-Identifier: Apache-2.0
// `wg show` inside a pod whose wg0 is wireguard-go's. wg talks to a
// userspace interface over /var/run/wireguard/IF.sock, which is the host's
// and invisible in the container. Handing the container that socket would
// also hand it every UAPI operation: `get` answers with the interface's
// private key (the agent's key, kept across rentals) and the peers' preshared
// keys, `set` rewrites keys, peers and endpoints. So the daemon serves a
// socket of its own at that path inside the container's root that answers
// `get` with wireguard-go's reply minus those keys, and every other
// operation with EPERM, as the kernel answers a container without
// CAP_NET_ADMIN.
#include "pods/uapi_proxy.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <thread>

#include "common/fs.hpp"
#include "common/log.hpp"
#include "common/secure.hpp"
#include "pods/login.hpp"

namespace fa::pods {

namespace {

constexpr size_t kMaxRequest = 64 * 1024;
constexpr size_t kMaxReply = 4 * 1024 * 1024;  // a get of some thousand peers

struct Wiped {
  std::string s;
  ~Wiped() { secure_wipe(s.data(), s.size()); }
};

// Reads up to the blank line that ends a UAPI message ("\n\n"); false on
// EOF, timeout or a message larger than `cap`.
bool read_message(int fd, std::string& buf, size_t cap) {
  char chunk[4096];
  while (buf.size() < 2 || buf.compare(buf.size() - 2, 2, "\n\n") != 0) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0 || buf.size() + static_cast<size_t>(n) > cap) {
      secure_wipe(chunk, sizeof chunk);
      return false;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
  secure_wipe(chunk, sizeof chunk);
  return true;
}

Result<Fd> connect_unix(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return Error{"socket path too long: " + path};
  std::copy(path.begin(), path.end(), sa.sun_path);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error::from_errno("socket(AF_UNIX)");
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return Error::from_errno("connect " + path);
  return fd;
}

void set_timeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

std::string filter_uapi_get(std::string_view reply) {
  std::string out;
  size_t pos = 0;
  while (pos < reply.size()) {
    size_t nl = reply.find('\n', pos);
    std::string_view line = reply.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos + 1);
    if (line.rfind("private_key=", 0) != 0 && line.rfind("preshared_key=", 0) != 0) out += line;
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  return out;
}

class UapiProxy::Impl {
 public:
  std::string root, dir, name, upstream;
  Fd listen, stop_r, stop_w;
  std::thread thread;

  void loop() {
    pollfd p[2] = {{listen.get(), POLLIN, 0}, {stop_r.get(), POLLIN, 0}};
    while (true) {
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (p[1].revents) return;
      Fd c(::accept4(listen.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (c.valid()) serve(c.get());
    }
  }

  // One connection, operations one after the other as wg sends them.
  void serve(int c) {
    set_timeout(c, 5);
    while (true) {
      Wiped req;
      if (!read_message(c, req.s, kMaxRequest)) return;
      Wiped reply;
      if (req.s == "get=1\n\n") {
        auto up = connect_unix(upstream);
        if (!up) return;
        set_timeout(up->get(), 5);
        Wiped full;
        if (!send_all(up->get(), req.s, "UAPI get") || !read_message(up->get(), full.s, kMaxReply)) return;
        reply.s = filter_uapi_get(full.s);
      } else {
        // EPERM, negated as wireguard-go writes errno: `wg set` then says
        // "Operation not permitted".
        reply.s = "errno=-1\n\n";
      }
      if (!send_all(c, reply.s, "UAPI reply")) return;
    }
  }
};

Result<std::unique_ptr<UapiProxy>> UapiProxy::start(const std::string& rootfs, const std::string& ifname,
                                                     const std::string& upstream) {
  auto impl = std::make_unique<Impl>();
  impl->root = rootfs;
  impl->dir = "/var/run/wireguard";
  impl->name = ifname + ".sock";
  impl->upstream = upstream;
  Fd root(::open(rootfs.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root.valid()) return Error::from_errno("open the container's root " + rootfs);
  auto d = dir_in_root(root.get(), impl->dir, 0755);
  if (!d) return d.take_error();
  // Bound through the directory's fd: the path is the one resolved inside
  // the root, whatever symlinks the image has on the way (/var/run -> /run).
  const std::string at = "/proc/self/fd/" + std::to_string(d->get()) + "/" + impl->name;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (at.size() >= sizeof sa.sun_path) return Error{"socket path too long: " + at};
  std::copy(at.begin(), at.end(), sa.sun_path);
  ::unlinkat(d->get(), impl->name.c_str(), 0);  // left by a daemon that stopped
  impl->listen = Fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!impl->listen.valid()) return Error::from_errno("socket(AF_UNIX)");
  if (::bind(impl->listen.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return Error::from_errno("bind " + impl->dir + "/" + impl->name + " in the container");
  if (::fchmodat(d->get(), impl->name.c_str(), 0600, 0) != 0 || ::listen(impl->listen.get(), 8) != 0) {
    Error e = Error::from_errno("listen on " + impl->dir + "/" + impl->name + " in the container");
    ::unlinkat(d->get(), impl->name.c_str(), 0);
    return e;
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  impl->stop_r = Fd(p[0]);
  impl->stop_w = Fd(p[1]);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  std::unique_ptr<UapiProxy> px(new UapiProxy());
  px->impl_ = std::move(impl);
  return px;
}

UapiProxy::~UapiProxy() {
  if (!impl_) return;
  (void)write_all(impl_->stop_w.get(), "x", "stop");
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->listen = Fd();
  // The root may be gone with the container; then so is the socket file.
  Fd root(::open(impl_->root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (root.valid())
    if (auto d = dir_in_root(root.get(), impl_->dir, 0755)) ::unlinkat(d->get(), impl_->name.c_str(), 0);
}

}  // namespace fa::pods
