// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <exception>
#include <future>
#include <thread>
#include <utility>

namespace fa {

// A function run on a thread of its own, like std::async(std::launch::async),
// except that get() returns as soon as the function has returned. libstdc++'s
// std::async future joins the thread first, so its get() also waits for the
// thread's exit (glibc giving back its stack, the kernel tearing down the
// task): ~0.3-0.6 ms in the lab's emulated VM, on the caller's path. The
// thread is joined when the Task is destroyed or assigned over. The
// constructor throws std::system_error when no thread can be had.
template <class T>
class Task {
 public:
  Task() = default;
  template <class F>
  explicit Task(F&& f) {
    std::promise<T> done;
    result_ = done.get_future();
    thread_ = std::thread([done = std::move(done), f = std::forward<F>(f)]() mutable {
      try {
        done.set_value(f());
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    });
  }
  Task(Task&&) noexcept = default;
  Task& operator=(Task&& o) noexcept {
    join();
    result_ = std::move(o.result_);
    thread_ = std::move(o.thread_);
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { join(); }

  bool valid() const { return result_.valid(); }
  T get() { return result_.get(); }  // rethrows what the function threw

 private:
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  std::future<T> result_;
  std::thread thread_;
};

}  // namespace fa
