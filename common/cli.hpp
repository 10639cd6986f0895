// SPDX-License-Identifier: Apache-2.0
// Command-line options for the subcommands: `--name value`, `--name=value`
// and boolean `--flag`. Unknown options and missing values are errors that
// name the option and list what is accepted.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace fa {

struct OptSpec {
  std::string name;      // without the leading "--"
  bool takes_value;      // false: a boolean flag
};

class Args {
 public:
  static Result<Args> parse(const std::vector<std::string>& argv, std::initializer_list<OptSpec> spec);

  bool has(const std::string& name) const { return opts_.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  const std::vector<std::string>& positional() const { return pos_; }

 private:
  std::map<std::string, std::string> opts_;
  std::vector<std::string> pos_;
};

// A plain decimal number, the whole of `s`: [-]digits[.digits][(e|E)[+-]digits]
// (also ".5"), read in the C locale whatever the process's. No blanks, no
// '+', no hex, inf or nan. What std::from_chars(double) accepts, minus
// inf/nan, without libstdc++'s floating from_chars, which would make the
// binary load libm at every start for fegetround/fesetround.
std::optional<double> parse_decimal(std::string_view s);

}  // namespace fa
