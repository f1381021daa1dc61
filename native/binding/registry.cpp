// Module functions about the library itself: the strategies it has, whether CUDA was built in and
// whether a device can be used here, the names of trace operations.
#include "registry.hpp"

#include "errors.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/tracer.hpp"

namespace vramscope::binding {

// strategies() -> [{ name, description, params: [{ name, kind, default, description }],
//                    needsVmm, needsAsync, supportsReset, needsPlan, cudaBacking }]
Napi::Value list_strategies(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto* all = guarded(env, [] { return &strategies(); });
  Napi::Array result = Napi::Array::New(env, all->size());
  for (std::uint32_t i = 0; i < all->size(); ++i) {
    const strategy_info& s = (*all)[i];
    Napi::Array params = Napi::Array::New(env, s.params.size());
    for (std::uint32_t j = 0; j < s.params.size(); ++j) {
      const param_info& p = s.params[j];
      Napi::Object param = Napi::Object::New(env);
      param.Set("name", p.name);
      param.Set("kind", p.kind);
      param.Set("default", p.default_value);
      param.Set("description", p.description);
      params.Set(j, param);
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", s.name);
    o.Set("description", s.description);
    o.Set("params", params);
    o.Set("needsVmm", s.needs_vmm);
    o.Set("needsAsync", s.needs_async);
    o.Set("supportsReset", s.supports_reset);
    o.Set("needsPlan", s.needs_plan);
    o.Set("cudaBacking", backing_kind_name(s.cuda_backing));
    result.Set(i, o);
  }
  return result;
}

Napi::Value built_with_cuda_js(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), built_with_cuda());
}

// cudaDeviceAvailable() -> { available: true, reason: null } | { available: false, reason }
Napi::Value cuda_device_available_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string reason;
  bool available = cuda_device_available(&reason);
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", available);
  o.Set("reason",
        available ? env.Null() : Napi::String::New(env, reason.empty() ? "unknown" : reason));
  return o;
}

// traceOpNames() -> ['alloc', 'free', ...], indexed by the op column of takeTrace().
Napi::Value trace_op_names(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array names = Napi::Array::New(env);
  for (std::uint32_t op = 0; op < 256; ++op) {
    std::string name = trace_op_name(static_cast<trace_op>(op));
    if (name == "unknown") break;
    names.Set(op, name);
  }
  return names;
}

}  // namespace vramscope::binding
