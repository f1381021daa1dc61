// Conversion of the library's typed errors into coded JavaScript errors.
#include "errors.hpp"

#include <cctype>
#include <new>

namespace vramscope::binding {

std::string js_code(error_code code) {
  std::string name = error_code_name(code);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

error_record error_record::capture(const std::exception& e) {
  error_record r;
  r.message = e.what();
  if (auto* oom = dynamic_cast<const out_of_memory*>(&e)) {
    r.has_sizes = true;
    r.requested = oom->requested();
    r.available = oom->available();
  } else if (auto* invalid = dynamic_cast<const invalid_free*>(&e)) {
    r.has_address = true;
    r.address = invalid->address();
  } else if (auto* twice = dynamic_cast<const double_free*>(&e)) {
    r.has_address = true;
    r.address = twice->address();
  }
  if (auto* typed = dynamic_cast<const error*>(&e)) {
    r.code = js_code(typed->code());
  } else if (dynamic_cast<const std::bad_alloc*>(&e)) {
    r.code = "HOST_OUT_OF_MEMORY";
    r.message = "the host ran out of memory";
  } else {
    r.code = code_internal;
  }
  return r;
}

Napi::Error error_record::to_js(Napi::Env env) const {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  if (has_sizes) {
    // Exact below 2^53 bytes (8 PiB).
    error.Set("requested", Napi::Number::New(env, static_cast<double>(requested)));
    error.Set("available", Napi::Number::New(env, static_cast<double>(available)));
  }
  if (has_address) error.Set("address", Napi::BigInt::New(env, address));
  return error;
}

Napi::Error coded_error(Napi::Env env, const char* code, const std::string& message) {
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, code));
  return error;
}

Napi::Error coded_type_error(Napi::Env env, const std::string& message) {
  Napi::Error error = Napi::TypeError::New(env, message);
  error.Set("code", Napi::String::New(env, "INVALID_ARGUMENT"));
  return error;
}

}  // namespace vramscope::binding
