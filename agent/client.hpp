// SPDX-License-Identifier: Apache-2.0
// A small synchronous HTTP(S) client on Beast for the operator commands
// (`status`, `cluster form`) and the tests: one request per connection,
// bearer token, optional CA file and client certificate, a deadline. Over
// https the server's certificate is always verified, host name included.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "common/result.hpp"

namespace fa::agent {

struct Url {
  bool tls = false;
  std::string host;  // without brackets
  uint16_t port = 0;
  std::string base;  // "http://host:port", for messages
};

// "http://HOST:PORT" or "https://HOST:PORT" (a trailing "/" is accepted).
Result<Url> parse_url(const std::string& s);

struct ClientOptions {
  std::string token;      // sent as "Authorization: Bearer <token>" when set
  std::string ca_file;    // https: verify the server against this CA (else: the system's trust store)
  std::string cert_file;  // https: client certificate (mutual TLS)
  std::string key_file;
  std::chrono::milliseconds timeout{10000};
  std::map<std::string, std::string> headers;  // extra request headers
};

struct HttpReply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

Result<HttpReply> http_request(const Url& url, const std::string& method, const std::string& target,
                               const std::string& body, const ClientOptions& opt);

}  // namespace fa::agent
