// Module-level functions of the addon (see registry.cpp).
#pragma once

#include <napi.h>

namespace vramscope::binding {

Napi::Value list_strategies(const Napi::CallbackInfo& info);
Napi::Value built_with_cuda_js(const Napi::CallbackInfo& info);
Napi::Value cuda_device_available_js(const Napi::CallbackInfo& info);
Napi::Value trace_op_names(const Napi::CallbackInfo& info);

}  // namespace vramscope::binding
