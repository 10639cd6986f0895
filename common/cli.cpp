// SPDX-License-Identifier: Apache-2.0
#include "common/cli.hpp"

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

}  // namespace fa
