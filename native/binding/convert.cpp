// Argument conversion for the binding, and the result objects more than one call returns.
#include "convert.hpp"

#include <cmath>

#include "errors.hpp"

namespace vramscope::binding {

namespace {
constexpr double max_safe_integer = 9007199254740991.0;
}

std::uint64_t to_uint64(const Napi::Value& value, const char* name) {
  Napi::Env env = value.Env();
  if (value.IsBigInt()) {
    bool lossless = false;
    std::uint64_t n = value.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless)
      throw coded_type_error(env, std::string(name) + " must be a bigint from 0 to 2^64 - 1");
    return n;
  }
  if (value.IsNumber()) {
    double d = value.As<Napi::Number>().DoubleValue();
    if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d > max_safe_integer)
      throw coded_type_error(env, std::string(name) + " must be a non-negative safe integer");
    return static_cast<std::uint64_t>(d);
  }
  throw coded_type_error(env, std::string(name) + " must be a number or a bigint");
}

std::uint64_t to_uint64_or(const Napi::Value& value, const char* name, std::uint64_t fallback) {
  return value.IsUndefined() ? fallback : to_uint64(value, name);
}

std::string to_string(const Napi::Value& value, const char* name) {
  if (!value.IsString())
    throw coded_type_error(value.Env(), std::string(name) + " must be a string");
  return value.As<Napi::String>().Utf8Value();
}

bool to_bool(const Napi::Value& value, const char* name) {
  if (!value.IsBoolean())
    throw coded_type_error(value.Env(), std::string(name) + " must be a boolean");
  return value.As<Napi::Boolean>().Value();
}

params to_params(const Napi::Value& value) {
  params p;
  if (value.IsUndefined() || value.IsNull()) return p;
  if (!value.IsObject()) throw coded_type_error(value.Env(), "params must be an object");
  Napi::Object object = value.As<Napi::Object>();
  Napi::Array keys = object.GetPropertyNames();
  for (std::uint32_t i = 0; i < keys.Length(); ++i) {
    std::string key = keys.Get(i).As<Napi::String>().Utf8Value();
    Napi::Value v = object.Get(key);
    if (v.IsString()) {
      p.set(key, v.As<Napi::String>().Utf8Value());
    } else if (v.IsBoolean()) {
      p.set(key, v.As<Napi::Boolean>().Value() ? "true" : "false");
    } else if (v.IsNumber()) {
      // JavaScript's own text of the number ("1048576", "0.5"): what the library's parsers read.
      p.set(key, v.ToString().Utf8Value());
    } else {
      throw coded_type_error(value.Env(), "params." + key + " must be a string, number or boolean");
    }
  }
  return p;
}

backing_choice to_backing_choice(const Napi::Value& kind, const Napi::Value& options) {
  backing_choice c;
  c.kind = parse_backing_kind(to_string(kind, "backing"));
  if (options.IsUndefined() || options.IsNull()) return c;
  if (!options.IsObject()) throw coded_type_error(options.Env(), "options must be an object");
  Napi::Object o = options.As<Napi::Object>();
  c.simulated.capacity = to_uint64_or(o.Get("capacity"), "options.capacity", c.simulated.capacity);
  c.simulated.granularity =
      to_uint64_or(o.Get("granularity"), "options.granularity", c.simulated.granularity);
  c.simulated.completion_delay_ns = to_uint64_or(
      o.Get("completionDelayNs"), "options.completionDelayNs", c.simulated.completion_delay_ns);
  c.simulated.async_release_threshold = to_uint64_or(
      o.Get("releaseThreshold"), "options.releaseThreshold", c.simulated.async_release_threshold);
  c.cuda.device = static_cast<int>(to_uint64_or(o.Get("device"), "options.device", 0));
  // On a CUDA backing a capacity caps what the allocator may take (0: the device's free memory).
  c.cuda.capacity = o.Get("capacity").IsUndefined() ? 0 : c.simulated.capacity;
  c.cuda.async_release_threshold = c.simulated.async_release_threshold;
  return c;
}

Napi::Object device_calls_object(Napi::Env env, const device_call_counts& c) {
  Napi::Object calls = Napi::Object::New(env);
  calls.Set("regionAlloc", to_number(env, c.region_alloc));
  calls.Set("regionFree", to_number(env, c.region_free));
  calls.Set("vaReserve", to_number(env, c.va_reserve));
  calls.Set("vaRelease", to_number(env, c.va_release));
  calls.Set("map", to_number(env, c.map));
  calls.Set("unmap", to_number(env, c.unmap));
  calls.Set("asyncAlloc", to_number(env, c.async_alloc));
  calls.Set("asyncFree", to_number(env, c.async_free));
  calls.Set("eventRecord", to_number(env, c.event_record));
  calls.Set("synchronize", to_number(env, c.synchronize));
  calls.Set("total", to_number(env, c.total()));
  return calls;
}

}  // namespace vramscope::binding
