// Recording built-in GPU workloads from JavaScript (see record_wrap.cpp).
#pragma once

#include <napi.h>

namespace vramscope::binding {

// workloads() -> [{ name, description, params, multiStream, fixedStrategy }]
Napi::Value list_workloads(const Napi::CallbackInfo& info);
// recordWorkload(spec, onChunk) -> Promise<result>; chunks stream to onChunk as the run goes.
Napi::Value record_workload_js(const Napi::CallbackInfo& info);

}  // namespace vramscope::binding
