// SPDX-License-Identifier: Apache-2.0
#include "common/cli.hpp"

#include <locale.h>

#include <cerrno>
#include <cstdlib>

namespace fa {

Result<Args> Args::parse(const std::vector<std::string>& argv, std::initializer_list<OptSpec> spec) {
  auto accepted = [&] {
    std::string s;
    for (const auto& o : spec) s += (s.empty() ? "--" : ", --") + o.name;
    return s.empty() ? std::string("none") : s;
  };
  Args a;
  bool only_positional = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (only_positional || arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      if (arg == "--") {
        only_positional = true;
        continue;
      }
      a.pos_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptSpec* found = nullptr;
    for (const auto& o : spec)
      if (o.name == name) found = &o;
    if (!found) return Error{"unknown option '--" + name + "' (accepted: " + accepted() + ")"};
    if (!found->takes_value) {
      if (inline_value) return Error{"option '--" + name + "' takes no value, got '" + *inline_value + "'"};
      a.opts_[name] = "";
      continue;
    }
    if (inline_value) {
      a.opts_[name] = *inline_value;
    } else if (i + 1 < argv.size()) {
      a.opts_[name] = argv[++i];
    } else {
      return Error{"option '--" + name + "' needs a value"};
    }
  }
  return a;
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = opts_.find(name);
  if (it == opts_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  auto v = get(name);
  return v ? *v : fallback;
}

std::optional<double> parse_decimal(std::string_view s) {
  size_t i = 0, digits = 0;
  auto run = [&] {
    size_t n = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++n;
    return n;
  };
  if (i < s.size() && s[i] == '-') ++i;
  digits += run();
  if (i < s.size() && s[i] == '.') {
    ++i;
    digits += run();
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (run() == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  static const locale_t c_locale = ::newlocale(LC_NUMERIC_MASK, "C", nullptr);
  std::string z(s);  // strtod needs the terminator
  char* end = nullptr;
  errno = 0;
  double v = c_locale ? ::strtod_l(z.c_str(), &end, c_locale) : std::strtod(z.c_str(), &end);
  if (end != z.c_str() + z.size() || errno == ERANGE) return std::nullopt;
  return v;
}

}  // namespace fa
