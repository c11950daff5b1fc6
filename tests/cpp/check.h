// A small test harness for the C++ test programs (no GoogleTest: the project's own files must be
// able to build the tests on a fresh machine with nothing beyond PyPI and a compiler).
//
//   TEST(name) { ... }              registers a test; main() is RUN_ALL_TESTS's
//   CHECK(cond) << "context";       counts a check; a failure prints file:line and goes on
//   CHECK_EQ(a, b) << "context";    the same, printing both values
//   REQUIRE(cond); REQUIRE_EQ(a, b) a failure also ends the current test (later code needs it)
//   check::thrown<E>([&] { ... })   the E the code threw, or nothing (other exceptions escape)
//
// What is streamed into a check is evaluated even when the check passes: guard what could be
// invalid then (`<< (loss ? loss->what() : "")`). Any exception escaping a test fails it.
// The program prints "N passed, M failed" (checks) and exits non-zero on any failure. An
// argument runs only the tests whose names contain it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace check {

struct Test {
  const char* name;
  void (*run)();
};

inline std::vector<Test>& registry() {
  static std::vector<Test> tests;
  return tests;
}

struct State {
  int passed = 0;
  int failed = 0;
  const char* test = "";
  int failed_in_test = 0;  // only the first few failures of a test are printed
};

inline State& state() {
  static State s;
  return s;
}

struct Register {
  Register(const char* name, void (*run)()) { registry().push_back({name, run}); }
};

// Thrown by REQUIRE to end the current test.
struct Abort {};

// A printable form of a value for failure messages.
inline std::string show(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  out += s.size() > 64 ? "\"... (" + std::to_string(s.size()) + " bytes)" : "\"";
  return out;
}
inline std::string show(const char* s) { return show(std::string(s)); }
inline std::string show(bool b) { return b ? "true" : "false"; }
template <typename T>
std::string show(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<long long>(v));
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (std::is_same_v<T, std::vector<uint8_t>>) {
    return show(std::string(v.begin(), v.end()));
  } else {
    std::ostringstream out;
    out << "[";
    size_t i = 0;
    for (const auto& item : v) {
      if (i) out << ", ";
      if (i++ == 16) {
        out << "... (" << v.size() << " items)";
        break;
      }
      out << show(item);
    }
    out << "]";
    return out.str();
  }
}

// One check: counted when made, reported (with whatever was streamed into it) when it ends.
class Result {
 public:
  Result(bool ok, const char* file, int line, const char* expr, std::string values, bool fatal)
      : ok_(ok), file_(file), line_(line), expr_(expr), values_(std::move(values)), fatal_(fatal) {}
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;

  template <typename T>
  Result& operator<<(const T& context) {
    if (!ok_) context_ << context;
    return *this;
  }

  ~Result() noexcept(false) {
    State& s = state();
    if (ok_) {
      ++s.passed;
      return;
    }
    ++s.failed;
    if (++s.failed_in_test <= 10) {
      std::printf("%s:%d: [%s] FAILED %s", file_, line_, s.test, expr_);
      if (!values_.empty()) std::printf(": %s", values_.c_str());
      const std::string context = context_.str();
      if (!context.empty()) std::printf(" (%s)", context.c_str());
      std::printf("\n");
    }
    if (fatal_ && std::uncaught_exceptions() == 0) throw Abort{};
  }

 private:
  bool ok_;
  const char* file_;
  int line_;
  const char* expr_;
  std::string values_;
  bool fatal_;
  std::ostringstream context_;
};

// a == b, also for integers of mixed signedness (-1 is not SIZE_MAX here).
template <typename A, typename B>
bool equal(const A& a, const B& b) {
  constexpr bool integers = std::is_integral_v<A> && std::is_integral_v<B> &&
                            !std::is_same_v<A, bool> && !std::is_same_v<B, bool>;
  if constexpr (integers && std::is_signed_v<A> && std::is_unsigned_v<B>) {
    return a >= 0 && std::make_unsigned_t<A>(a) == b;
  } else if constexpr (integers && std::is_unsigned_v<A> && std::is_signed_v<B>) {
    return b >= 0 && a == std::make_unsigned_t<B>(b);
  } else {
    return a == b;
  }
}

template <typename A, typename B>
Result compare(const A& a, const B& b, const char* file, int line, const char* expr, bool fatal) {
  const bool ok = equal(a, b);
  return Result(ok, file, line, expr, ok ? std::string() : show(a) + " vs " + show(b), fatal);
}

// The exception of type E that `code` threw, or nothing if it returned normally.
template <typename E, typename F>
std::optional<E> thrown(F&& code) {
  try {
    code();
  } catch (const E& e) {
    return e;
  }
  return std::nullopt;
}

inline int run_all(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : "";
  State& s = state();
  int tests = 0;
  for (const Test& t : registry()) {
    if (std::string(t.name).find(filter) == std::string::npos) continue;
    ++tests;
    std::printf("%s\n", t.name);
    std::fflush(stdout);  // a crash then names the test it happened in
    s.test = t.name;
    s.failed_in_test = 0;
    try {
      t.run();
    } catch (const Abort&) {
    } catch (const std::exception& e) {
      ++s.failed;
      std::printf("[%s] FAILED: unexpected exception: %s\n", t.name, e.what());
    } catch (...) {
      ++s.failed;
      std::printf("[%s] FAILED: unexpected exception\n", t.name);
    }
    if (s.failed_in_test > 10) {
      std::printf("[%s] ... %d failures in all\n", t.name, s.failed_in_test);
    }
  }
  std::printf("%d tests; %d passed, %d failed\n", tests, s.passed, s.failed);
  return s.failed == 0 && tests > 0 ? 0 : 1;
}

}  // namespace check

#define CHECK_CONCAT_(a, b) a##b
#define CHECK_CONCAT(a, b) CHECK_CONCAT_(a, b)

#define TEST(name)                                                                                \
  static void CHECK_CONCAT(test_, name)();                                                        \
  static const ::check::Register CHECK_CONCAT(register_, name)(#name, CHECK_CONCAT(test_, name)); \
  static void CHECK_CONCAT(test_, name)()

#define CHECK(cond) ::check::Result(bool(cond), __FILE__, __LINE__, #cond, "", false)
#define REQUIRE(cond) ::check::Result(bool(cond), __FILE__, __LINE__, #cond, "", true)
#define CHECK_EQ(a, b) ::check::compare((a), (b), __FILE__, __LINE__, #a " == " #b, false)
#define REQUIRE_EQ(a, b) ::check::compare((a), (b), __FILE__, __LINE__, #a " == " #b, true)

#define RUN_ALL_TESTS() \
  int main(int argc, char** argv) { return ::check::run_all(argc, argv); }
