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

}  // namespace vramscope::binding
