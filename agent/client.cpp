// SPDX-License-Identifier: Apache-2.0
#include "agent/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <cctype>
#include <charconv>

namespace fa::agent {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<Url> parse_url(const std::string& s) {
  Url u;
  std::string rest;
  if (s.rfind("http://", 0) == 0) rest = s.substr(7);
  else if (s.rfind("https://", 0) == 0) {
    u.tls = true;
    rest = s.substr(8);
  } else {
    return Error{"URL '" + s + "' is not accepted; accepted: http://HOST:PORT or https://HOST:PORT"};
  }
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  std::string port;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return Error{"URL '" + s + "' has no [IPV6]:PORT"};
    u.host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string::npos) return Error{"URL '" + s + "' has no :PORT"};
    u.host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  int p = 0;
  auto [e, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (u.host.empty() || port.empty() || ec != std::errc() || e != port.data() + port.size() || p < 1 || p > 65535)
    return Error{"URL '" + s + "' is not accepted; accepted: http(s)://HOST:PORT with PORT 1..65535"};
  u.port = static_cast<uint16_t>(p);
  u.base = s;
  while (!u.base.empty() && u.base.back() == '/') u.base.pop_back();
  return u;
}

namespace {

// Runs one asynchronous operation to its end. The calls are asynchronous
// only so that the stream's deadline holds: Asio's blocking calls wait in
// poll() without a timeout once a socket timeout (SO_RCVTIMEO) expires, so
// a server that accepts and never answers held `status` forever.
template <class Start>
beast::error_code run_op(asio::io_context& ioc, Start&& start) {
  beast::error_code out = asio::error::would_block;
  start([&out](beast::error_code ec, auto&&...) { out = ec; });
  ioc.restart();
  ioc.run();
  return out;
}

template <class Stream>
Result<HttpReply> exchange(asio::io_context& ioc, Stream& stream, const Url& url, const std::string& method, const std::string& target,
                           const std::string& body, const ClientOptions& opt) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, url.host + ":" + std::to_string(url.port));
  req.set(http::field::user_agent, "fabric-agent/" FA_VERSION);
  if (!opt.token.empty()) req.set(http::field::authorization, "Bearer " + opt.token);
  for (const auto& [k, v] : opt.headers) req.set(k, v);
  if (!body.empty() || method == "PUT" || method == "POST") {
    if (!req.count(http::field::content_type)) req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.keep_alive(false);
  req.prepare_payload();
  beast::error_code ec = run_op(ioc, [&](auto h) { http::async_write(stream, req, std::move(h)); });
  if (ec) return Error{url.base + ": write: " + ec.message()};
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  ec = run_op(ioc, [&](auto h) { http::async_read(stream, buf, parser, std::move(h)); });
  if (ec) return Error{url.base + ": read: " + ec.message()};
  auto res = parser.release();
  HttpReply out;
  out.status = res.result_int();
  out.body = std::move(res.body());
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(f.value());
  }
  return out;
}

}  // namespace

Result<HttpReply> http_request(const Url& url, const std::string& method, const std::string& target,
                               const std::string& body, const ClientOptions& opt) {
  asio::io_context ioc;
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) return Error{url.base + ": resolve: " + ec.message()};
  if (results.empty()) return Error{url.base + ": resolve: no address"};
  // One deadline for the whole exchange, connect to last byte: the stream
  // closes the socket when it passes and the pending operation fails.
  beast::tcp_stream sock(ioc);
  sock.expires_after(opt.timeout);
  ec = run_op(ioc, [&](auto h) { sock.async_connect(results, std::move(h)); });
  if (ec) return Error{url.base + ": connect: " + ec.message()};
  if (!url.tls) return exchange(ioc, sock, url, method, target, body, opt);

  // The server is always verified: against --ca-file when given, else the
  // system's trust store; and the certificate must be for the host in the
  // URL (its DNS name or IP address). The token goes out only after that.
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  try {
    if (!opt.ca_file.empty()) ctx.load_verify_file(opt.ca_file);
    else ctx.set_default_verify_paths();
    ctx.set_verify_mode(asio::ssl::verify_peer);
    if (!opt.cert_file.empty()) {
      ctx.use_certificate_chain_file(opt.cert_file);
      ctx.use_private_key_file(opt.key_file, asio::ssl::context::pem);
    }
  } catch (const boost::system::system_error& e) {
    return Error{url.base + ": tls setup: " + e.what()};
  }
  beast::ssl_stream<beast::tcp_stream> stream(std::move(sock), ctx);
  SSL* ssl = stream.native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  beast::error_code not_ip;
  asio::ip::make_address(url.host, not_ip);
  if (!not_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str());
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), url.host.size());
    SSL_set_tlsext_host_name(ssl, url.host.c_str());  // SNI carries names only (RFC 6066 3)
  }
  ec = run_op(ioc, [&](auto h) { stream.async_handshake(asio::ssl::stream_base::client, std::move(h)); });
  if (ec) {
    const long v = SSL_get_verify_result(ssl);
    std::string why = ec.message();
    if (v != X509_V_OK)
      why += " (" + std::string(X509_verify_cert_error_string(v)) +
             (opt.ca_file.empty() ? "; verified against the system trust store: give --ca-file" : "; CA file " + opt.ca_file) +
             ")";
    return Error{url.base + ": tls handshake: " + why};
  }
  auto r = exchange(ioc, stream, url, method, target, body, opt);
  // The server may already be gone; nothing to report.
  (void)run_op(ioc, [&](auto h) { stream.async_shutdown(std::move(h)); });
  return r;
}

}  // namespace fa::agent
