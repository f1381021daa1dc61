// Large results cross to JavaScript as typed-array columns, never as arrays of objects: the layout
// of an allocator (regions and blocks) and the events its tracer recorded.
#pragma once

#include <napi.h>

#include <vector>

#include "vramscope/allocator.hpp"
#include "vramscope/tracer.hpp"

namespace vramscope::binding {

// { regions: { address, size, mapped, kind }, blocks: { address, size, state, aux } }
Napi::Object layout_columns(Napi::Env env, const allocator& alloc);

// { op, address, size, requested, stream, aux }
Napi::Object trace_columns(Napi::Env env, const std::vector<trace_event>& events);

// Typed arrays filled from a vector (a copy: the vector's storage does not outlive the call).
template <class T>
Napi::TypedArrayOf<T> typed_array(Napi::Env env, const std::vector<T>& values) {
  auto array = Napi::TypedArrayOf<T>::New(env, values.size());
  std::copy(values.begin(), values.end(), array.Data());
  return array;
}

// A typed array over the vector's own storage, which moves into it (the vector is left empty) and
// is freed when the array is collected: a replay's layout columns, tens of megabytes, cross to
// JavaScript without a copy into fresh pages (4 ms a megabyte on a VM whose first touch of a page
// costs ~17 µs). Where the runtime allows no external buffers (Electron's V8 sandbox), a copy.
template <class T>
Napi::TypedArrayOf<T> moved_typed_array(Napi::Env env, std::vector<T>& values) {
  if (!values.empty()) {
    auto* held = new std::vector<T>(std::move(values));
    napi_value buffer = nullptr;
    const napi_status status = napi_create_external_arraybuffer(
        env, held->data(), held->size() * sizeof(T),
        [](napi_env, void*, void* hint) { delete static_cast<std::vector<T>*>(hint); }, held,
        &buffer);
    if (status == napi_ok)
      return Napi::TypedArrayOf<T>::New(env, held->size(), Napi::ArrayBuffer(env, buffer), 0);
    values = std::move(*held);
    delete held;
    // 22: napi_no_external_buffers_allowed (a runtime whose V8 keeps array buffers in its cage).
    if (status != 22) NAPI_THROW_IF_FAILED(env, status, Napi::TypedArrayOf<T>());
  }
  auto array = typed_array(env, values);
  std::vector<T>().swap(values);
  return array;
}

}  // namespace vramscope::binding
