// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "common/task.hpp"

using fa::Task;
using namespace std::chrono_literals;

TEST_CASE("Task: get() returns the function's result before its thread has exited", "[task]") {
  std::atomic<bool> release{false};
  std::atomic<bool> exited{false};
  struct OnExit {  // destroyed when the thread's function object is, on the thread's way out
    std::atomic<bool>* release;
    std::atomic<bool>* exited;
    ~OnExit() {
      if (!release) return;  // a moved-from copy
      // Bounded: were get() to wait for the thread's exit, it would return
      // after 2 s with `exited` set, and the test would fail, not hang.
      for (int i = 0; i < 2000 && !release->load(); ++i) std::this_thread::sleep_for(1ms);
      exited->store(true);
    }
    OnExit(std::atomic<bool>* r, std::atomic<bool>* e) : release(r), exited(e) {}
    OnExit(OnExit&& o) noexcept : release(o.release), exited(o.exited) { o.release = nullptr; }
  };
  {
    Task<int> t([guard = OnExit(&release, &exited)] { return 42; });
    REQUIRE(t.valid());
    // std::async's future would block here until the thread (and the guard
    // it holds) is gone.
    CHECK(t.get() == 42);
    CHECK_FALSE(exited.load());
    release.store(true);
  }  // the destructor joins
  CHECK(exited.load());
}

TEST_CASE("Task: an exception of the function comes out of get()", "[task]") {
  Task<int> t([]() -> int { throw std::runtime_error("boom"); });
  CHECK_THROWS_WITH(t.get(), "boom");
}

TEST_CASE("Task: assigning over a running task joins it first", "[task]") {
  std::atomic<int> done{0};
  Task<int> t([&done] {
    std::this_thread::sleep_for(20ms);
    done.fetch_add(1);
    return 1;
  });
  t = Task<int>([] { return 2; });
  CHECK(done.load() == 1);  // the first thread finished before the second replaced it
  CHECK(t.get() == 2);
  Task<int> empty;
  CHECK_FALSE(empty.valid());
}
