// decodeSnapshot(bytes, maxDepth, device): the native snapshot decoder (core/snapshot_pickle.cpp)
// on a pickle held in memory, on the calling thread: the importer only calls it on files small
// enough to take no longer than one step of the JavaScript fast path (src-main/services/import/
// pytorch.ts says which). Its result crosses as typed arrays; null where the decoder gives up.
#pragma once

#include <napi.h>

namespace vramscope::binding {

// decodeSnapshot(bytes: Uint8Array, maxDepth: number, device: number) -> NativeSnapshot | null
// (native/index.d.ts has the shape).
Napi::Value decode_snapshot_js(const Napi::CallbackInfo& info);

}  // namespace vramscope::binding
