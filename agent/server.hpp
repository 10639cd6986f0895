// SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 server on Boost.Beast (advanced server shape): one listener,
// sessions that own their socket and run on their own strand, every resource
// bounded (1 MiB body -> 413, 16 KiB of headers, a whole-request read timeout
// against clients that dribble bytes, an idle timeout on kept-alive
// connections, a cap on connections in which clients without a token give
// way to the control plane), one fail() reporting point.
// TLS (and mutual TLS) through asio::ssl on OpenSSL.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "agent/api.hpp"
#include "common/config.hpp"
#include "common/result.hpp"

namespace boost::asio::ssl {
class context;
}

namespace fa::agent {

// The server's TLS context from tls.cert, tls.key and tls.client_ca, each
// file loaded and checked (the key is the certificate's; the CA file holds
// certificates). The error names the setting and the file. `run` calls it
// right after reading the config, before anything else is touched.
Result<std::shared_ptr<boost::asio::ssl::context>> load_tls_context(const TlsConfig& tls);

struct ServerOptions {
  std::string listen = "127.0.0.1:0";
  bool allow_plain_http_on_non_loopback = false;
  TlsConfig tls;
  ApiConfig api;
  std::shared_ptr<boost::asio::ssl::context> tls_context;  // from load_tls_context; null: loaded by start()
  static ServerOptions from(const Config& c) {
    return ServerOptions{c.listen, c.allow_plain_http_on_non_loopback, c.tls, c.api, nullptr};
  }
};

class Server {
 public:
  // `worker` runs Deferred outcomes (one thread: mesh operations serialised).
  // `ioc` may be run by several threads: each connection, the long-poll
  // wake queue and the stop run on strands of their own.
  Server(boost::asio::io_context& ioc, boost::asio::thread_pool& worker, Core& core, ServerOptions opt);
  ~Server();

  // Binds and starts accepting. Returns the bound port (useful with port 0).
  Result<uint16_t> start();
  // Stops accepting and answers every waiting long-poll at once with the
  // status as it is (200 or 304) and `Connection: close`; `drained` runs on
  // an I/O thread when those answers are written and their connections
  // closed, or after `grace`, whichever comes first (then stop the loop).
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000), std::function<void()> drained = {});

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace fa::agent
