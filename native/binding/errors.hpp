// Native errors become JavaScript errors with a stable `code` ('OUT_OF_MEMORY', 'INVALID_FREE'...)
// and, where the library knows them, `requested`/`available` (out of memory) or `address` (frees).
// An error caught on a worker thread is kept as plain data and turned into a JS error later, on the
// JavaScript thread.
#pragma once

#include <napi.h>

#include <cstdint>
#include <exception>
#include <string>

#include "vramscope/errors.hpp"

namespace vramscope::binding {

// Codes the binding adds to the library's own.
constexpr const char* code_busy = "BUSY";          // runOps is still working on this allocator
constexpr const char* code_disposed = "DISPOSED";  // the allocator was disposed
constexpr const char* code_internal = "INTERNAL";  // anything the library did not type

// out_of_memory -> "OUT_OF_MEMORY"
std::string js_code(error_code code);

struct error_record {
  std::string code;
  std::string message;
  bool has_sizes = false;  // out of memory: requested, available
  std::uint64_t requested = 0;
  std::uint64_t available = 0;
  bool has_address = false;  // invalid or double free
  std::uint64_t address = 0;

  static error_record capture(const std::exception& e);
  Napi::Error to_js(Napi::Env env) const;
};

Napi::Error coded_error(Napi::Env env, const char* code, const std::string& message);
Napi::Error coded_type_error(Napi::Env env, const std::string& message);  // INVALID_ARGUMENT

// Runs `body`, turning library exceptions into coded JS errors (Napi::Error passes through).
template <class Body>
auto guarded(Napi::Env env, Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Napi::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw error_record::capture(e).to_js(env);
  }
}

}  // namespace vramscope::binding
