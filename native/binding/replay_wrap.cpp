// The replay binding. Arguments are copied into plain C++ values on the JavaScript thread (the
// columns too: the caller may reuse its arrays while the replay runs); the replay then owns them
// and runs on the engine's pool (replay_async). Progress and the end post back through a
// thread-safe function; each report asks the caller's shouldCancel(), and a true answer (or a
// progress callback that throws) stops the replay at its next check, rejecting with CANCELLED (or
// that error). A cancel flag (cancelFlag(), raised by raiseCancelFlag()) is read by the replay's
// threads themselves: it stops a replay within a few dozen events of being raised, and one still
// queued for a thread before it starts, without waiting for a report or the JavaScript thread.
#include "replay_wrap.hpp"

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "columns.hpp"
#include "convert.hpp"
#include "errors.hpp"
#include "vramscope/replay.hpp"

namespace vramscope::binding {

namespace {

template <class T>
std::vector<T> copy_column(Napi::Object events, const char* name, napi_typedarray_type type,
                           const char* type_name) {
  Napi::Value v = events.Get(name);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    throw coded_type_error(events.Env(), std::string("events.") + name + " must be a " + type_name);
  auto array = v.As<Napi::TypedArrayOf<T>>();
  return std::vector<T>(array.Data(), array.Data() + array.ElementLength());
}

request_column_vectors read_events(const Napi::Value& value) {
  Napi::Env env = value.Env();
  if (!value.IsObject()) throw coded_type_error(env, "events must be an object of typed arrays");
  Napi::Object o = value.As<Napi::Object>();
  request_column_vectors e;
  e.kind = copy_column<std::uint8_t>(o, "kind", napi_uint8_array, "Uint8Array");
  e.id = copy_column<std::uint32_t>(o, "id", napi_uint32_array, "Uint32Array");
  e.size = copy_column<double>(o, "size", napi_float64_array, "Float64Array");
  e.stream = copy_column<std::uint32_t>(o, "stream", napi_uint32_array, "Uint32Array");
  e.time = copy_column<double>(o, "time", napi_float64_array, "Float64Array");
  const std::size_t n = e.kind.size();
  if (e.id.size() != n || e.size.size() != n || e.stream.size() != n || e.time.size() != n)
    throw coded_type_error(env, "events.kind, id, size, stream and time must have one length");
  if (!o.Get("pool").IsUndefined()) {
    e.pool = copy_column<std::uint32_t>(o, "pool", napi_uint32_array, "Uint32Array");
    if (e.pool.size() != n)
      throw coded_type_error(env, "events.pool must have one entry per event, as events.kind");
  }
  return e;
}

// A typed array of `type` with `count` entries (count == SIZE_MAX: any, which becomes the count).
template <class T>
const T* initial_column(Napi::Object o, const std::string& at, const char* name,
                        napi_typedarray_type type, const char* type_name, std::size_t& count) {
  Napi::Value v = o.Get(name);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    throw coded_type_error(o.Env(), at + "." + name + " must be a " + type_name);
  auto array = v.As<Napi::TypedArrayOf<T>>();
  if (count == SIZE_MAX) count = array.ElementLength();
  if (array.ElementLength() != count)
    throw coded_type_error(o.Env(), at + "." + name + " must have " + std::to_string(count) +
                                        " entries, as the other columns of its part");
  return array.Data();
}

std::uint64_t whole_bytes(Napi::Env env, double v, const std::string& what) {
  if (!(v >= 0 && v < 9007199254740992.0) ||
      static_cast<double>(static_cast<std::uint64_t>(v)) != v)
    throw coded_type_error(
        env, what + " must be a whole number of bytes below 2^53, got " + std::to_string(v));
  return static_cast<std::uint64_t>(v);
}

// target.initialState (native/index.d.ts, ReplayInitialState): segments and live blocks as columns.
replay_initial_state read_initial_state(Napi::Value value, const std::string& at) {
  Napi::Env env = value.Env();
  replay_initial_state state;
  if (value.IsUndefined() || value.IsNull()) return state;
  if (!value.IsObject()) throw coded_type_error(env, at + " must be an object of typed arrays");
  Napi::Object o = value.As<Napi::Object>();
  std::size_t segments = SIZE_MAX, blocks = SIZE_MAX;
  const auto* s_address = initial_column<std::uint64_t>(
      o, at, "segmentAddress", napi_biguint64_array, "BigUint64Array", segments);
  const auto* s_size =
      initial_column<double>(o, at, "segmentSize", napi_float64_array, "Float64Array", segments);
  const auto* s_stream = initial_column<std::uint32_t>(o, at, "segmentStream", napi_uint32_array,
                                                       "Uint32Array", segments);
  const auto* s_pool = initial_column<std::uint32_t>(o, at, "segmentPool", napi_uint32_array,
                                                     "Uint32Array", segments);
  const auto* s_flags =
      initial_column<std::uint8_t>(o, at, "segmentFlags", napi_uint8_array, "Uint8Array", segments);
  const auto* b_address = initial_column<std::uint64_t>(o, at, "blockAddress", napi_biguint64_array,
                                                        "BigUint64Array", blocks);
  const auto* b_size =
      initial_column<double>(o, at, "blockSize", napi_float64_array, "Float64Array", blocks);
  const auto* b_event =
      initial_column<std::uint32_t>(o, at, "blockEvent", napi_uint32_array, "Uint32Array", blocks);
  state.segments.resize(segments);
  for (std::size_t i = 0; i < segments; ++i) {
    replay_initial_segment& g = state.segments[i];
    g.address = s_address[i];
    g.size = whole_bytes(env, s_size[i], at + ".segmentSize[" + std::to_string(i) + "]");
    g.stream = s_stream[i];
    g.pool = s_pool[i];
    g.small_pool = (s_flags[i] & 1) != 0;
    g.expandable = (s_flags[i] & 2) != 0;
  }
  state.blocks.resize(blocks);
  for (std::size_t i = 0; i < blocks; ++i)
    state.blocks[i] = {b_address[i],
                       whole_bytes(env, b_size[i], at + ".blockSize[" + std::to_string(i) + "]"),
                       b_event[i]};
  return state;
}

std::vector<replay_target> read_targets(const Napi::Value& value) {
  Napi::Env env = value.Env();
  if (!value.IsArray()) throw coded_type_error(env, "targets must be an array");
  Napi::Array array = value.As<Napi::Array>();
  std::vector<replay_target> targets;
  for (std::uint32_t i = 0; i < array.Length(); ++i) {
    const std::string at = "targets[" + std::to_string(i) + "]";
    Napi::Value item = array.Get(i);
    if (!item.IsObject()) throw coded_type_error(env, at + " must be an object");
    Napi::Object t = item.As<Napi::Object>();
    replay_target target;
    target.label = to_string(t.Get("label"), (at + ".label").c_str());
    target.strategy = to_string(t.Get("strategy"), (at + ".strategy").c_str());
    target.parameters = to_params(t.Get("params"));
    Napi::Value simulated = t.Get("simulated");
    target.simulated = to_backing_choice(Napi::String::New(env, "simulated"), simulated).simulated;
    if (simulated.IsObject()) {
      Napi::Value placement = simulated.As<Napi::Object>().Get("regionPlacement");
      if (!placement.IsUndefined()) {
        if (!placement.IsTypedArray() ||
            placement.As<Napi::TypedArray>().TypedArrayType() != napi_biguint64_array)
          throw coded_type_error(env, at + ".simulated.regionPlacement must be a BigUint64Array");
        auto addresses = placement.As<Napi::BigUint64Array>();
        target.simulated.region_placement.assign(addresses.Data(),
                                                 addresses.Data() + addresses.ElementLength());
      }
    }
    target.initial_state = read_initial_state(t.Get("initialState"), at + ".initialState");
    targets.push_back(std::move(target));
  }
  return targets;
}

struct callbacks {
  Napi::Function on_progress;
  Napi::Function should_cancel;
  shared_cancel_flag cancel_flag;
};

}  // namespace

// Tells a cancel flag (cancelFlag()) from any other external.
constexpr napi_type_tag cancel_flag_tag = {0x7672616d73636f70ULL, 0x63616e63656c3031ULL};

shared_cancel_flag cancel_flag_of(const Napi::Value& value, const char* what) {
  if (!value.IsExternal() ||
      !value.As<Napi::External<shared_cancel_flag>>().CheckTypeTag(&cancel_flag_tag))
    throw coded_type_error(value.Env(), std::string(what) + " must be a flag made by cancelFlag()");
  return *value.As<Napi::External<shared_cancel_flag>>().Data();
}

namespace {

replay_options read_options(const Napi::Value& value, callbacks& cb) {
  replay_options o;
  o.threads = 0;  // every hardware thread unless told (replay_options::threads)
  if (value.IsUndefined() || value.IsNull()) return o;
  Napi::Env env = value.Env();
  if (!value.IsObject()) throw coded_type_error(env, "options must be an object");
  Napi::Object v = value.As<Napi::Object>();
  o.capacity = to_uint64_or(v.Get("capacity"), "options.capacity", o.capacity);
  o.buckets = to_uint64_or(v.Get("buckets"), "options.buckets", o.buckets);
  o.walk_budget_per_event = to_uint64_or(v.Get("walkBudgetPerEvent"), "options.walkBudgetPerEvent",
                                         o.walk_budget_per_event);
  o.peak_walk_budget_per_event =
      to_uint64_or(v.Get("peakWalkBudgetPerEvent"), "options.peakWalkBudgetPerEvent",
                   o.peak_walk_budget_per_event);
  o.progress_interval =
      to_uint64_or(v.Get("progressInterval"), "options.progressInterval", o.progress_interval);
  auto flag = [&](const char* name, const char* what, bool fallback) {
    Napi::Value f = v.Get(name);
    return f.IsUndefined() ? fallback : to_bool(f, what);
  };
  o.reset_at_markers = flag("resetAtMarkers", "options.resetAtMarkers", o.reset_at_markers);
  o.full_metrics = flag("fullMetrics", "options.fullMetrics", o.full_metrics);
  o.layout = flag("layout", "options.layout", o.layout);
  o.structure_events = flag("structureEvents", "options.structureEvents", o.structure_events);
  o.threads = to_uint64_or(v.Get("threads"), "options.threads", o.threads);
  o.longest_first = flag("longestFirst", "options.longestFirst", o.longest_first);
  o.fragmentation = flag("fragmentation", "options.fragmentation", o.fragmentation);
  o.stop_at_failure = flag("stopAtFailure", "options.stopAtFailure", o.stop_at_failure);
  // previewAt: a request event, or 'peak' (each target's own reserved peak).
  Napi::Value preview = v.Get("previewAt");
  if (preview.IsString() && preview.As<Napi::String>().Utf8Value() == "peak")
    o.preview_at_peak = true;
  else if (!preview.IsUndefined())
    o.preview_at = to_uint64_or(preview, "options.previewAt", o.preview_at);
  Napi::Value cancel = v.Get("shouldCancel");
  if (!cancel.IsUndefined()) {
    if (!cancel.IsFunction())
      throw coded_type_error(env, "options.shouldCancel must be a function");
    cb.should_cancel = cancel.As<Napi::Function>();
  }
  Napi::Value given_flag = v.Get("cancelFlag");
  if (!given_flag.IsUndefined()) cb.cancel_flag = cancel_flag_of(given_flag, "options.cancelFlag");
  return o;
}

Napi::Object summary_object(Napi::Env env, const replay_summary& s) {
  Napi::Object o = Napi::Object::New(env);
  auto n = [&](const char* name, std::uint64_t value) { o.Set(name, to_number(env, value)); };
  n("events", s.events);
  n("allocs", s.allocs);
  n("frees", s.frees);
  n("markers", s.markers);
  n("recordedFailures", s.recorded_failures);
  n("trims", s.trims);
  n("peakRequested", s.peak_requested);
  n("peakRequestedEvent", s.peak_requested_event);
  n("peakRounded", s.peak_rounded);
  n("peakRoundedEvent", s.peak_rounded_event);
  n("peakReserved", s.peak_reserved);
  n("peakReservedEvent", s.peak_reserved_event);
  n("reservedHighWater", s.reserved_high_water);
  o.Set("externalFragmentationAtPeak", Napi::Number::New(env, s.external_fragmentation_at_peak));
  n("largestFreeBlockAtPeak", s.largest_free_block_at_peak);
  n("freeBytesAtPeak", s.free_bytes_at_peak);
  n("internalWasteAtPeak", s.internal_waste_at_peak);
  o.Set("peakMeasuredByRerun", Napi::Boolean::New(env, s.peak_measured_by_rerun));
  n("failures", s.failures);
  o.Set("firstFailures", typed_array(env, s.first_failures));
  n("failedBytes", s.failed_bytes);
  o.Set("stoppedAtFailure", Napi::Boolean::New(env, s.stopped_at_failure));
  n("deviceCalls", s.device_calls);
  o.Set("deviceCallDetail", device_calls_object(env, s.device_call_detail));
  n("resets", s.resets);
  n("droppedByReset", s.dropped_by_reset);
  n("freesOfDropped", s.frees_of_dropped);
  n("freesOfFailed", s.frees_of_failed);
  n("unknownFrees", s.unknown_frees);
  n("seededSegments", s.seeded_segments);
  n("seededBlocks", s.seeded_blocks);
  n("reusedLiveIds", s.reused_live_ids);
  n("zeroSizeAllocs", s.zero_size_allocs);
  n("fragmentationWalks", s.fragmentation_walks);
  n("walkedBlocks", s.walked_blocks);
  n("finalRequested", s.final_requested);
  n("finalRounded", s.final_rounded);
  n("finalReserved", s.final_reserved);
  n("liveBlocks", s.live_blocks);
  o.Set("wallNs", Napi::Number::New(env, s.wall_ns));
  o.Set("eventsPerSecond", Napi::Number::New(env, s.events_per_second));
  return o;
}

// Converts one result, its C++ columns moving into the arrays (or, where they must be copied,
// let go of as it goes, so that the peak memory is one copy of the largest result, not two of all).
Napi::Object result_object(Napi::Env env, replay_result& r, bool full_metrics) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("label", Napi::String::New(env, r.label));
  o.Set("strategy", Napi::String::New(env, r.strategy));
  Napi::Object params = Napi::Object::New(env);
  for (auto& [k, v] : r.parameters.values()) params.Set(k, Napi::String::New(env, v));
  o.Set("params", params);

  auto take = [&](Napi::Object into, const char* name, auto& column) {
    into.Set(name, moved_typed_array(env, column));
  };
  Napi::Object layout = Napi::Object::New(env);
  take(layout, "op", r.layout.op);
  take(layout, "address", r.layout.address);
  take(layout, "size", r.layout.size);
  take(layout, "requested", r.layout.requested);
  take(layout, "stream", r.layout.stream);
  take(layout, "aux", r.layout.aux);
  take(layout, "event", r.layout.event);
  o.Set("layout", layout);
  if (r.preview.event != replay_no_preview) {
    Napi::Object preview = Napi::Object::New(env);
    preview.Set("event", to_number(env, r.preview.event));
    take(preview, "kept", r.preview.kept);
    take(preview, "goneStart", r.preview.gone_start);
    take(preview, "goneEnd", r.preview.gone_end);
    o.Set("preview", preview);
  }

  replay_buckets& b = r.buckets;
  Napi::Object buckets = Napi::Object::New(env);
  take(buckets, "end", b.end);
  take(buckets, "time", b.time);
  take(buckets, "requestedMin", b.requested_min);
  take(buckets, "requestedMax", b.requested_max);
  take(buckets, "requestedLast", b.requested_last);
  take(buckets, "roundedMin", b.rounded_min);
  take(buckets, "roundedMax", b.rounded_max);
  take(buckets, "roundedLast", b.rounded_last);
  take(buckets, "reservedMin", b.reserved_min);
  take(buckets, "reservedMax", b.reserved_max);
  take(buckets, "reservedLast", b.reserved_last);
  take(buckets, "deviceCalls", b.device_calls);
  take(buckets, "externalFragmentation", b.external_fragmentation);
  take(buckets, "largestFreeBlock", b.largest_free_block);
  take(buckets, "freeBytes", b.free_bytes);
  o.Set("buckets", buckets);

  if (full_metrics) {
    Napi::Object full = Napi::Object::New(env);
    take(full, "requested", r.full.requested);
    take(full, "rounded", r.full.rounded);
    take(full, "reserved", r.full.reserved);
    take(full, "deviceCalls", r.full.device_calls);
    o.Set("full", full);
  }
  o.Set("summary", summary_object(env, r.summary));
  return o;
}

// What a replay's threads post to the JavaScript thread: a progress report, or the end.
struct replay_message {
  bool end = false;
  replay_progress progress{};
  std::vector<replay_result> results;
  bool failed = false;
  error_record failure;
};

// The JavaScript side of one replay: its promise and callbacks, touched on the JavaScript thread
// only, and freed there when the channel closes.
struct replay_js_side {
  Napi::Promise::Deferred deferred;
  Napi::FunctionReference on_progress;
  Napi::FunctionReference should_cancel;
  Napi::ObjectReference callback_error;
  shared_cancel_flag cancel;
  bool full_metrics = false;
};

void deliver(Napi::Env env, Napi::Function, replay_js_side* js, replay_message* message);
using channel_fn = Napi::TypedThreadSafeFunction<replay_js_side, replay_message, deliver>;

// The way back to the JavaScript thread, shut when the environment goes (a worker thread ended,
// the process exiting) while the replay still runs: its threads then post nothing more, and the
// raised cancel flag stops them at their next check.
struct replay_channel {
  std::mutex mutex;
  bool open = true;
  channel_fn fn;

  void post(std::unique_ptr<replay_message> m) {
    std::lock_guard<std::mutex> lock(mutex);
    if (open && fn.NonBlockingCall(m.get()) == napi_ok) m.release();
  }
  void end(std::unique_ptr<replay_message> m) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!open) return;
    if (fn.NonBlockingCall(m.get()) == napi_ok) m.release();
    fn.Release();
    open = false;
  }
};

// The native side: the inputs, owned by the replay until it is done (the caller may reuse its
// arrays at once), and the channel.
struct replay_native_side {
  request_column_vectors events;
  request_columns columns;
  std::vector<replay_target> targets;
  replay_options options;
  shared_cancel_flag cancel;
  replay_progress_callback report;
  std::shared_ptr<replay_channel> channel;
};

void deliver(Napi::Env env, Napi::Function, replay_js_side* js, replay_message* message) {
  std::unique_ptr<replay_message> m(message);
  if (env == nullptr || js == nullptr || m == nullptr) return;  // the environment is going
  Napi::HandleScope scope(env);
  if (!m->end) {
    if (js->cancel->load()) return;
    const replay_progress& p = m->progress;
    try {
      if (!js->on_progress.IsEmpty()) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("target", to_number(env, p.target));
        o.Set("targets", to_number(env, p.targets));
        o.Set("eventsDone", to_number(env, p.events_done));
        o.Set("eventsTotal", to_number(env, p.events_total));
        js->on_progress.Call({o});
      }
      if (!js->should_cancel.IsEmpty() && js->should_cancel.Call({}).ToBoolean().Value())
        *js->cancel = true;
    } catch (const Napi::Error& e) {
      // A callback that throws stops the replay; the promise rejects with what it threw.
      if (js->callback_error.IsEmpty()) js->callback_error = Napi::Persistent(e.Value());
      *js->cancel = true;
    }
    return;
  }
  if (!js->callback_error.IsEmpty()) {
    js->deferred.Reject(js->callback_error.Value());
    return;
  }
  if (m->failed) {
    js->deferred.Reject(m->failure.to_js(env).Value());
    return;
  }
  try {
    Napi::Array out = Napi::Array::New(env, m->results.size());
    for (std::size_t i = 0; i < m->results.size(); ++i)
      out.Set(static_cast<std::uint32_t>(i), result_object(env, m->results[i], js->full_metrics));
    m->results.clear();
    js->deferred.Resolve(out);
  } catch (const Napi::Error& e) {
    js->deferred.Reject(e.Value());
  }
}

// Starts the replay on the engine's pool (replay_async) and returns its promise.
Napi::Promise start_replay(Napi::Env env, request_column_vectors events,
                           std::vector<replay_target> targets, replay_options options,
                           const callbacks& cb) {
  auto* js = new replay_js_side{Napi::Promise::Deferred::New(env)};
  js->cancel = cb.cancel_flag ? cb.cancel_flag : std::make_shared<std::atomic<bool>>(false);
  js->full_metrics = options.full_metrics;
  if (!cb.on_progress.IsEmpty()) js->on_progress = Napi::Persistent(cb.on_progress);
  if (!cb.should_cancel.IsEmpty()) js->should_cancel = Napi::Persistent(cb.should_cancel);
  Napi::Promise promise = js->deferred.Promise();

  auto native = std::make_shared<replay_native_side>();
  native->events = std::move(events);
  native->columns = native->events.columns();
  native->targets = std::move(targets);
  native->options = options;
  native->cancel = js->cancel;
  native->channel = std::make_shared<replay_channel>();
  // Closed (a normal end, or the environment going): the replay is told to stop, the JavaScript
  // side freed, and the channel shut for any thread still running.
  auto* held = new std::shared_ptr<replay_channel>(native->channel);
  native->channel->fn = channel_fn::New(
      env, "vramscope.replay", 0, 1, js,
      [](Napi::Env, std::shared_ptr<replay_channel>* held, replay_js_side* js) {
        *js->cancel = true;
        {
          std::lock_guard<std::mutex> lock((*held)->mutex);
          (*held)->open = false;
        }
        delete held;
        delete js;
      },
      held);
  if (!js->on_progress.IsEmpty() || !js->should_cancel.IsEmpty()) {
    replay_channel* ch = native->channel.get();
    native->report = [ch](const replay_progress& p) {
      auto m = std::make_unique<replay_message>();
      m->progress = p;
      ch->post(std::move(m));
    };
  }
  try {
    replay_async(native->columns, native->targets, native->options, native->report,
                 native->cancel.get(),
                 [native](std::vector<replay_result>&& results, std::exception_ptr error) {
                   auto m = std::make_unique<replay_message>();
                   m->end = true;
                   if (error) {
                     m->failed = true;
                     try {
                       std::rethrow_exception(error);
                     } catch (const std::exception& e) {
                       m->failure = error_record::capture(e);
                     } catch (...) {
                       m->failure = error_record::capture(std::runtime_error("replay failed"));
                     }
                   } else {
                     m->results = std::move(results);
                   }
                   native->channel->end(std::move(m));
                 });
  } catch (const std::exception& e) {
    // Not one thread to be had: the promise rejects with why.
    js->deferred.Reject(error_record::capture(e).to_js(env).Value());
    native->channel->end(nullptr);
  }
  return promise;
}

}  // namespace

Napi::Value replay_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    request_column_vectors events = read_events(info[0]);
    std::vector<replay_target> targets = read_targets(info[1]);
    callbacks cb;
    replay_options options = read_options(info[2], cb);
    if (!info[3].IsUndefined() && !info[3].IsNull()) {
      if (!info[3].IsFunction()) throw coded_type_error(env, "onProgress must be a function");
      cb.on_progress = info[3].As<Napi::Function>();
    }
    return start_replay(env, std::move(events), std::move(targets), options, cb);
  });
}

Napi::Value cancel_flag_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    auto flag = Napi::External<shared_cancel_flag>::New(
        env, new shared_cancel_flag(std::make_shared<std::atomic<bool>>(false)),
        [](Napi::Env, shared_cancel_flag* held) { delete held; });
    flag.TypeTag(&cancel_flag_tag);
    return flag;
  });
}

Napi::Value raise_cancel_flag_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    cancel_flag_of(info[0], "flag")->store(true);
    return env.Undefined();
  });
}

}  // namespace vramscope::binding
