// replay(events, targets, options, onProgress): the replay engine (core/replay) on a worker
// thread. The event columns are copied on the JavaScript thread, the replay runs off it with
// progress posted back, and the results come back in a Promise as typed-array columns.
#pragma once

#include <napi.h>

namespace vramscope::binding {

// replay({ kind, id, size, stream, time }, [{ label, strategy, params, simulated }], options,
//        onProgress?) -> Promise<ReplayResult[]> (native/index.d.ts has the shapes).
Napi::Value replay_js(const Napi::CallbackInfo& info);

}  // namespace vramscope::binding
