// The addon's entry: registers the Allocator class and the module functions, nothing else.
#include <napi.h>

#include "allocator_wrap.hpp"
#include "record_wrap.hpp"
#include "registry.hpp"
#include "replay_wrap.hpp"
#include "run_ops.hpp"

namespace vramscope::binding {

Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("Allocator", allocator_wrap::define(env));
  exports.Set("strategies", Napi::Function::New<list_strategies>(env, "strategies"));
  exports.Set("builtWithCuda", Napi::Function::New<built_with_cuda_js>(env, "builtWithCuda"));
  exports.Set("cudaDeviceAvailable",
              Napi::Function::New<cuda_device_available_js>(env, "cudaDeviceAvailable"));
  exports.Set("traceOpNames", Napi::Function::New<trace_op_names>(env, "traceOpNames"));
  exports.Set("runOpCodes", run_op_codes(env));
  exports.Set("replay", Napi::Function::New<replay_js>(env, "replay"));
  exports.Set("cancelFlag", Napi::Function::New<cancel_flag_js>(env, "cancelFlag"));
  exports.Set("raiseCancelFlag", Napi::Function::New<raise_cancel_flag_js>(env, "raiseCancelFlag"));
  exports.Set("workloads", Napi::Function::New<list_workloads>(env, "workloads"));
  exports.Set("recordWorkload", Napi::Function::New<record_workload_js>(env, "recordWorkload"));
  return exports;
}

}  // namespace vramscope::binding

// NODE_API_MODULE pastes its second argument into a name, so it takes a plain identifier.
static Napi::Object init_vramscope(Napi::Env env, Napi::Object exports) {
  return vramscope::binding::init(env, exports);
}
NODE_API_MODULE(vramscope, init_vramscope)
