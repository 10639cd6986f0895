// SPDX-License-Identifier: Apache-2.0
// The HTTP API as a pure function request -> outcome (Beast advanced server
// shape): no sockets here, so every route, error and auth rule is unit-tested
// on plain request objects. The server only moves bytes and runs outcomes:
//   Response  answer now (on the I/O thread: cheap routes)
//   Deferred  run `work` on the serialised worker, answer with its result
//   LongPoll  wait until the generation moves or `wait` passes, then call
//             handle() again with long-polling disabled
// Routes, errors and auth: docs/api.md.
#pragma once

#include <boost/beast/http.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <variant>

#include "agent/core.hpp"

namespace fa::agent {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

inline constexpr size_t kMaxBody = 1 << 20;  // 1 MiB: larger bodies get 413

struct RequestContext {
  bool client_cert_verified = false;  // mutual TLS: a cert signed by tls.client_ca
  bool allow_long_poll = true;        // false on the second pass after a wait
};

struct Deferred {
  std::function<Response()> work;
  // Seconds-long work (an RDMA probe run) goes to its own lane, so mesh
  // operations and refreshes do not queue behind it.
  bool long_running = false;
};

struct LongPoll {
  uint64_t generation = 0;  // wake when the generation is no longer this
  std::chrono::seconds wait{0};
};

using Outcome = std::variant<Response, Deferred, LongPoll>;

class Api {
 public:
  explicit Api(Core& core) : core_(core) {}

  Outcome handle(const Request& req, const RequestContext& ctx) const;

  // Route label for metrics and logs: one of the fixed paths, or "other".
  static std::string_view route_of(std::string_view target);

  // {error: {code, message, field}} with the right status and headers.
  static Response error(int status, const std::string& code, const std::string& message, const std::string& field,
                        unsigned version, bool keep_alive);

 private:
  Core& core_;
};

}  // namespace fa::agent
