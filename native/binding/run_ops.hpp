// runOps: a whole sequence of alloc/free operations applied on a worker thread, so that long
// sequences never hold up the JavaScript thread. The result comes back in a Promise.
#pragma once

#include <napi.h>

#include <cstdint>

namespace vramscope::binding {

class allocator_wrap;

// Mirrored by src-main/services/replay/allocators.ts (RunOpKind, RunOpStatus); a test checks they agree.
enum class run_op_kind : std::uint8_t {
  alloc = 0,     // size bytes on stream
  free = 1,      // the block of the alloc op at index `target`, on stream
  set_time = 2,  // the simulated backing's clock to `size` ns
};
enum class run_op_status : std::uint8_t {
  ok = 0,
  out_of_memory = 1,
  invalid_free = 2,
  double_free = 3,
  skipped = 4,  // a free whose alloc op failed
};

// runOps({ kind: Uint8Array, size: Float64Array, stream: Uint32Array, target: Uint32Array })
//   -> Promise<{ address: BigUint64Array, status: Uint8Array, failures: number, elapsedNs: number }>
Napi::Value start_run_ops(const Napi::CallbackInfo& info, allocator_wrap& wrap);

// { kinds: { alloc: 0, ... }, statuses: { ok: 0, ... } }, exported for the agreement test.
Napi::Object run_op_codes(Napi::Env env);

}  // namespace vramscope::binding
