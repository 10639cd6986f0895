// SPDX-License-Identifier: Apache-2.0
#include "agent/netlink_watch.hpp"

#include <linux/rtnetlink.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>

#include "common/netlink.hpp"

namespace fa::agent {

namespace asio = boost::asio;

struct NetlinkWatch::Impl : std::enable_shared_from_this<NetlinkWatch::Impl> {
  // The descriptor and the timer on one strand: their handlers never overlap.
  Impl(asio::io_context& ioc, std::function<void()> fn)
      : sd(asio::make_strand(ioc)), debounce(sd.get_executor()), on_event(std::move(fn)) {}
  NlSock sk;
  asio::posix::stream_descriptor sd;
  asio::steady_timer debounce;
  std::function<void()> on_event;
  bool pending = false;
  bool stopped = false;

  static int on_msg(nl_msg*, void* arg) {
    static_cast<Impl*>(arg)->pending = true;
    return NL_OK;
  }

  void wait() {
    sd.async_wait(asio::posix::stream_descriptor::wait_read, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->stopped) return;
      // Drain everything queued. An overrun (ENOBUFS) means events were lost:
      // treat it as an event, the refresh re-reads everything anyway.
      for (;;) {
        int r = nl_recvmsgs_default(self->sk.get());
        if (r < 0) {
          if (r != -NLE_AGAIN) self->pending = true;
          break;
        }
      }
      if (self->pending) {
        self->pending = false;
        self->debounce.expires_after(std::chrono::milliseconds(200));
        self->debounce.async_wait([self](boost::system::error_code tec) {
          if (!tec && !self->stopped) self->on_event();
        });
      }
      self->wait();
    });
  }
};

Result<std::unique_ptr<NetlinkWatch>> NetlinkWatch::start(asio::io_context& ioc, std::function<void()> on_event) {
  auto impl = std::make_shared<Impl>(ioc, std::move(on_event));
  impl->sk.reset(nl_socket_alloc());
  if (!impl->sk) return Error{"netlink: nl_socket_alloc failed"};
  // Multicast events carry no sequence numbers of ours.
  nl_socket_disable_seq_check(impl->sk.get());
  nl_socket_modify_cb(impl->sk.get(), NL_CB_VALID, NL_CB_CUSTOM, &Impl::on_msg, impl.get());
  if (int r = nl_connect(impl->sk.get(), NETLINK_ROUTE); r < 0) return Error{std::string("netlink connect: ") + nl_geterror(r)};
  if (int r = nl_socket_add_memberships(impl->sk.get(), RTNLGRP_LINK, RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR, 0); r < 0)
    return Error{std::string("netlink memberships: ") + nl_geterror(r)};
  nl_socket_set_nonblocking(impl->sk.get());
  // The descriptor stays owned by the nl_sock; asio gets a duplicate.
  int fd = ::fcntl(nl_socket_get_fd(impl->sk.get()), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Error::from_errno("netlink: dup");
  impl->sd.assign(fd);
  impl->wait();
  return std::unique_ptr<NetlinkWatch>(new NetlinkWatch(std::move(impl)));
}

NetlinkWatch::~NetlinkWatch() {
  // On the watch's strand: a handler of it may be running on another thread.
  asio::post(impl_->sd.get_executor(), [impl = impl_] {
    impl->stopped = true;
    boost::system::error_code ec;
    impl->debounce.cancel();
    impl->sd.cancel(ec);
  });
}

}  // namespace fa::agent
