// SPDX-License-Identifier: Apache-2.0
#include "common/random.hpp"

#include <string.h>
#include <sys/random.h>

#include <cerrno>
#include <vector>

#include "common/secure.hpp"

namespace fa {

Status random_bytes(unsigned char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("getrandom");
    }
    got += static_cast<size_t>(r);
  }
  return {};
}

std::string to_hex(const unsigned char* data, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    s += kHex[data[i] >> 4];
    s += kHex[data[i] & 15];
  }
  return s;
}

Result<std::string> random_hex(size_t nbytes) {
  std::vector<unsigned char> raw(nbytes);
  Status r = random_bytes(raw.data(), raw.size());
  std::string out = r ? to_hex(raw.data(), raw.size()) : std::string();
  secure_wipe(raw.data(), raw.size());
  if (!r) return r.take_error();
  return out;
}

}  // namespace fa
