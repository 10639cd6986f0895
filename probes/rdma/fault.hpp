// SPDX-License-Identifier: Apache-2.0
// Inside the probe every failure carries its classified reason from the
// point where it is detected, so the result never has to guess it later
// from a message.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "probes/rdma/classify.hpp"

namespace fa::rdma {

struct Fault {
  Reason reason;
  std::string message;
  bool from_peer = false;  // the other end reported it: do not echo it back
};

// A value or a classified fault.
template <class T>
class [[nodiscard]] Outcome {
 public:
  Outcome(T v) : v_(std::in_place_index<0>, std::move(v)) {}
  Outcome(Fault f) : v_(std::in_place_index<1>, std::move(f)) {}
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }
  Fault&& fault() { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Fault> v_;
};

// nullopt: success.
using Check = std::optional<Fault>;

}  // namespace fa::rdma
