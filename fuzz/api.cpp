// SPDX-License-Identifier: Apache-2.0
// Api::handle on a request of any bytes, Beast's parser not in between: the
// input is read leniently as "METHOD TARGET VERSION" on the first line,
// then "Name: value" lines up to an empty line, then the body, and each
// piece is put into the request as it is (a target or header value with
// bytes a parser would refuse, a method Beast does not know). The http
// harness covers what the parser lets through; this one, what handle()
// does with anything. See fuzz/api_fixture.hpp for what is checked.
#include "fuzz/api_fixture.hpp"

namespace {

std::string_view next_line(std::string_view& in) {
  size_t nl = in.find('\n');
  std::string_view line = in.substr(0, nl);
  in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

boost::beast::string_view bsv(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fa_fuzz::ApiFixture fixture;
  std::string_view in = fa_fuzz::text(data, size);
  std::string_view first = next_line(in);
  size_t sp1 = first.find(' ');
  std::string_view method = first.substr(0, sp1);
  std::string_view rest = sp1 == std::string_view::npos ? std::string_view{} : first.substr(sp1 + 1);
  size_t sp2 = rest.find(' ');
  std::string_view target = rest.substr(0, sp2);
  std::string_view version = sp2 == std::string_view::npos ? std::string_view{} : rest.substr(sp2 + 1);
  if (method.empty()) return 0;  // no request line: Beast never hands that over

  fa::agent::Request req;
  req.method_string(bsv(method));
  req.target(bsv(target));
  req.version(version == "HTTP/1.0" ? 10 : 11);
  for (std::string_view line; !in.empty() && !(line = next_line(in)).empty();) {
    size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (name.empty()) continue;
    // A copy: Beast 1.74's iequals (insert compares a name with the last
    // one of the same field) reads one byte past a name that differs from
    // it only in case. The server's names lie in the parser's buffer, where
    // the ':' that ended them follows; here the name may end the input.
    req.insert(bsv(std::string(name)), bsv(value));
  }
  req.body() = std::string(in);

  fixture.begin();
  fixture.serve(req);
  return 0;
}
