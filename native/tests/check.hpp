// A small test harness for the native suites: TEST registers a case, CHECK* records failures with
// file and line, main runs every case (or those whose name contains argv[1]) and ends with the
// plain line "N passed, N failed" that CI reads.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace check {

struct test_case {
  const char* name;
  std::function<void()> body;
};
inline std::vector<test_case>& registry() {
  static std::vector<test_case> r;
  return r;
}
inline int& failures_in_case() {
  static int f = 0;
  return f;
}
struct registrar {
  registrar(const char* name, std::function<void()> body) {
    registry().push_back({name, std::move(body)});
  }
};
struct fatal {};

inline void report(const char* file, int line, const std::string& what) {
  ++failures_in_case();
  std::fprintf(stderr, "  %s:%d: %s\n", file, line, what.c_str());
}

template <class T>
std::string show(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    std::ostringstream os;
    os << v;
    return os.str();
  }
}

// Run one case for each item, with its name appended: the typed suite over every strategy.
inline int run_all(int argc, char** argv) {
  const char* filter = argc > 1 ? argv[1] : nullptr;
  int passed = 0, failed = 0;
  for (auto& t : registry()) {
    if (filter && !std::strstr(t.name, filter)) continue;
    failures_in_case() = 0;
    auto start = std::chrono::steady_clock::now();
    try {
      t.body();
    } catch (const fatal&) {
    } catch (const std::exception& e) {
      report(t.name, 0, std::string("unexpected exception: ") + e.what());
    } catch (...) {
      report(t.name, 0, "unexpected non-standard exception");
    }
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (failures_in_case() == 0) {
      ++passed;
      std::printf("ok   %s (%.1f ms)\n", t.name, ms);
    } else {
      ++failed;
      std::printf("FAIL %s\n", t.name);
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  if (passed + failed == 0) {
    std::printf("no test matched\n");
    return 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace check

#define CHECK_CAT2(a, b) a##b
#define CHECK_CAT(a, b) CHECK_CAT2(a, b)
#define TEST(name)                                                                                \
  static void CHECK_CAT(test_fn_, __LINE__)();                                                    \
  static ::check::registrar CHECK_CAT(test_reg_, __LINE__)(name, &CHECK_CAT(test_fn_, __LINE__)); \
  static void CHECK_CAT(test_fn_, __LINE__)()

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) ::check::report(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)
#define REQUIRE(cond)                                            \
  do {                                                           \
    if (!(cond)) {                                               \
      ::check::report(__FILE__, __LINE__, "REQUIRE(" #cond ")"); \
      throw ::check::fatal{};                                    \
    }                                                            \
  } while (0)
#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    auto&& check_a_ = (a);                                                     \
    auto&& check_b_ = (b);                                                     \
    if (!(check_a_ == check_b_))                                               \
      ::check::report(__FILE__, __LINE__,                                      \
                      "CHECK_EQ(" #a ", " #b "): " + ::check::show(check_a_) + \
                          " != " + ::check::show(check_b_));                   \
  } while (0)
#define CHECK_THROWS_AS(expr, type)                                                             \
  do {                                                                                          \
    bool check_thrown_ = false;                                                                 \
    try {                                                                                       \
      (void)(expr);                                                                             \
    } catch (const type&) {                                                                     \
      check_thrown_ = true;                                                                     \
    } catch (const std::exception& e) {                                                         \
      ::check::report(__FILE__, __LINE__,                                                       \
                      "CHECK_THROWS_AS(" #expr ", " #type "): threw " + std::string(e.what())); \
      check_thrown_ = true;                                                                     \
    }                                                                                           \
    if (!check_thrown_)                                                                         \
      ::check::report(__FILE__, __LINE__, "CHECK_THROWS_AS(" #expr ", " #type "): no throw");   \
  } while (0)

#define CHECK_MAIN \
  int main(int argc, char** argv) { return ::check::run_all(argc, argv); }
