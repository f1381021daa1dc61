// replay(events, targets, options, onProgress): the replay engine (core/replay) on the process's
// pool of replay threads (thread_pool.hpp), not libuv's. The event columns are copied on the
// JavaScript thread, the replay runs off it with progress posted back through a thread-safe
// function, and the results come back in a Promise as typed-array columns.
#pragma once

#include <napi.h>

#include <atomic>
#include <memory>

namespace vramscope::binding {

// A replay's cancel flag, shared by the JavaScript object that raises it and every replay that
// reads it, so it lives as long as the longest of them.
using shared_cancel_flag = std::shared_ptr<std::atomic<bool>>;

// replay({ kind, id, size, stream, time }, [{ label, strategy, params, simulated }], options,
//        onProgress?) -> Promise<ReplayResult[]> (native/index.d.ts has the shapes).
Napi::Value replay_js(const Napi::CallbackInfo& info);

// cancelFlag() -> a flag for options.cancelFlag (and recordWorkload's spec.cancelFlag);
// raiseCancelFlag(flag): every replay given it stops at its next check (every few dozen events),
// and every recording at its next step or allocation, whatever the JavaScript thread is doing.
Napi::Value cancel_flag_js(const Napi::CallbackInfo& info);
Napi::Value raise_cancel_flag_js(const Napi::CallbackInfo& info);

// The flag held by `value`, a flag made by cancelFlag(); a TypeError naming `what` for anything
// else. A recording (record_wrap.cpp) reads the same flags as replays do.
shared_cancel_flag cancel_flag_of(const Napi::Value& value, const char* what);

}  // namespace vramscope::binding
