// SPDX-License-Identifier: Apache-2.0
#include "agent/client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
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

template <class Stream>
Result<HttpReply> exchange(Stream& stream, const Url& url, const std::string& method, const std::string& target,
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
  beast::error_code ec;
  http::write(stream, req, ec);
  if (ec) return Error{url.base + ": write: " + ec.message()};
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  http::read(stream, buf, parser, ec);
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
  // Blocking calls with kernel socket timeouts (Linux applies SO_SNDTIMEO to
  // connect too): one request at a time needs no event loop.
  tcp::socket sock(ioc);
  const tcp::endpoint ep = *results.begin();
  sock.open(ep.protocol(), ec);
  if (ec) return Error{url.base + ": socket: " + ec.message()};
  struct timeval tv {};
  tv.tv_sec = static_cast<long>(opt.timeout.count() / 1000);
  tv.tv_usec = static_cast<long>((opt.timeout.count() % 1000) * 1000);
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sock.connect(ep, ec);
  if (ec) return Error{url.base + ": connect: " + ec.message()};
  if (!url.tls) return exchange(sock, url, method, target, body, opt);

  asio::ssl::context ctx(asio::ssl::context::tls_client);
  try {
    if (!opt.ca_file.empty()) {
      ctx.load_verify_file(opt.ca_file);
      ctx.set_verify_mode(asio::ssl::verify_peer);
    } else {
      ctx.set_verify_mode(asio::ssl::verify_none);
    }
    if (!opt.cert_file.empty()) {
      ctx.use_certificate_chain_file(opt.cert_file);
      ctx.use_private_key_file(opt.key_file, asio::ssl::context::pem);
    }
  } catch (const boost::system::system_error& e) {
    return Error{url.base + ": tls setup: " + e.what()};
  }
  beast::ssl_stream<tcp::socket> stream(std::move(sock), ctx);
  SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str());
  stream.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return Error{url.base + ": tls handshake: " + ec.message()};
  auto r = exchange(stream, url, method, target, body, opt);
  stream.shutdown(ec);  // the server may already be gone; nothing to report
  return r;
}

}  // namespace fa::agent
