// SPDX-License-Identifier: Apache-2.0
// Wakes the agent on rtnetlink link and address events (a port going down, a
// fabric netdev losing its address), so status follows the machine within a
// fraction of a second instead of the refresh interval.
#pragma once

#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>

#include "common/result.hpp"

namespace fa::agent {

class NetlinkWatch {
 public:
  // `on_event` runs on the io_context, debounced: a burst of messages (an
  // interface coming up sends several) gives one call.
  static Result<std::unique_ptr<NetlinkWatch>> start(boost::asio::io_context& ioc, std::function<void()> on_event);
  ~NetlinkWatch();

  struct Impl;

 private:
  explicit NetlinkWatch(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace fa::agent
