// A small test harness for the C++ test programs: TEST(name) { ... } registers a test, CHECK
// records a failure with its file and line (and goes on), EXPECT_THROW checks the exception type.
// main() runs every test and prints "N passed, M failed"; the exit status is 1 on any failure.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace check {

struct Registry {
  std::vector<std::pair<const char*, std::function<void()>>> tests;
  int passed = 0;
  int failed = 0;
  static Registry& get() {
    static Registry r;
    return r;
  }
};

inline void record(bool ok, const char* file, int line, const std::string& what) {
  Registry& r = Registry::get();
  if (ok) {
    ++r.passed;
  } else {
    ++r.failed;
    std::printf("FAIL %s:%d: %s\n", file, line, what.c_str());
  }
}

struct Add {
  Add(const char* name, std::function<void()> fn) {
    Registry::get().tests.emplace_back(name, std::move(fn));
  }
};

inline int run_all() {
  Registry& r = Registry::get();
  for (auto& [name, fn] : r.tests) {
    try {
      fn();
    } catch (const std::exception& e) {
      record(false, name, 0, std::string("unexpected exception: ") + e.what());
    }
  }
  std::printf("%d passed, %d failed\n", r.passed, r.failed);
  return r.failed ? 1 : 0;
}

}  // namespace check

#define TEST(name)                                          \
  static void test_##name();                                \
  static const check::Add add_##name(#name, test_##name);   \
  static void test_##name()

#define CHECK(cond) check::record(bool(cond), __FILE__, __LINE__, #cond)
#define CHECK_MSG(cond, msg) check::record(bool(cond), __FILE__, __LINE__, (msg))

// Runs `stmt`; passes if it throws `type` (then `on_error(e)` may inspect it).
#define EXPECT_THROW(stmt, type, on_error)                                               \
  do {                                                                                   \
    bool thrown_ = false;                                                                \
    try {                                                                                \
      stmt;                                                                              \
    } catch (const type& caught_) {                                                      \
      thrown_ = true;                                                                    \
      on_error(caught_);                                                                 \
    } catch (const std::exception& other_) {                                             \
      check::record(false, __FILE__, __LINE__, std::string(#stmt " threw another error: ") + \
                                                   other_.what());                       \
      thrown_ = true;                                                                    \
    }                                                                                    \
    check::record(thrown_, __FILE__, __LINE__, #stmt " should throw " #type);            \
  } while (0)

#define CHECK_MAIN \
  int main() { return check::run_all(); }
