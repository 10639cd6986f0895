// SPDX-License-Identifier: Apache-2.0
// The HTTP API from the first byte a client sends: the input is what
// arrives on one connection, read by Beast's request parser with the
// server's limits (16 KiB of header, 1 MiB of body), each complete request
// (up to eight, pipelined) answered by Api::handle on the same Core, as the
// server does. The parser's refusals end the connection there (the server
// answers them with 400 or 413 and closes). See fuzz/api_fixture.hpp for
// what is checked of each answer.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>

#include <optional>

#include "fuzz/api_fixture.hpp"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fa_fuzz::ApiFixture fixture;
  fixture.begin();
  boost::asio::const_buffer in(data, size);
  for (int n = 0; n < 8 && in.size() > 0; ++n) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(fa::agent::kMaxBody);
    parser.header_limit(16 * 1024);
    parser.eager(true);
    boost::beast::error_code ec;
    while (in.size() > 0 && !parser.is_done()) {
      size_t used = parser.put(in, ec);
      in += used;
      if (ec == http::error::need_more) {
        if (in.size() == 0) break;
        ec = {};
        if (used == 0) break;  // the parser wants more than there is
        continue;
      }
      if (ec) return 0;
    }
    if (!parser.is_done()) {
      // The client closed its side: a request without a length ends here.
      parser.put_eof(ec);
      if (ec || !parser.is_done()) return 0;
    }
    fa::agent::Response res = fixture.serve(parser.release());
    if (!res.keep_alive()) break;
  }
  return 0;
}
