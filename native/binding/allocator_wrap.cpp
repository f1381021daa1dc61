// The `Allocator` class of the addon.
#include "allocator_wrap.hpp"

#include "columns.hpp"
#include "convert.hpp"
#include "errors.hpp"
#include "run_ops.hpp"

namespace vramscope::binding {

Napi::Function allocator_wrap::define(Napi::Env env) {
  return DefineClass(
      env, "Allocator",
      {
          InstanceMethod<&allocator_wrap::allocate>("allocate"),
          InstanceMethod<&allocator_wrap::deallocate>("deallocate"),
          InstanceMethod<&allocator_wrap::record_stream>("recordStream"),
          InstanceMethod<&allocator_wrap::process_deferred>("processDeferred"),
          InstanceMethod<&allocator_wrap::synchronize_deferred>("synchronizeDeferred"),
          InstanceMethod<&allocator_wrap::stats>("stats"),
          InstanceMethod<&allocator_wrap::walk>("walk"),
          InstanceMethod<&allocator_wrap::trim>("trim"),
          InstanceMethod<&allocator_wrap::reset>("reset"),
          InstanceMethod<&allocator_wrap::set_time>("setTime"),
          InstanceMethod<&allocator_wrap::set_tracing>("setTracing"),
          InstanceMethod<&allocator_wrap::take_trace>("takeTrace"),
          InstanceMethod<&allocator_wrap::run_ops>("runOps"),
          InstanceMethod<&allocator_wrap::dispose>("dispose"),
          InstanceAccessor<&allocator_wrap::strategy_name>("strategy"),
          InstanceAccessor<&allocator_wrap::backing_name>("backing"),
          InstanceAccessor<&allocator_wrap::supports_reset>("supportsReset"),
          InstanceAccessor<&allocator_wrap::thread_safe>("threadSafe"),
          InstanceAccessor<&allocator_wrap::disposed>("disposed"),
      });
}

// new Allocator(strategy, params, backing, options)
allocator_wrap::allocator_wrap(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<allocator_wrap>(info) {
  Napi::Env env = info.Env();
  guarded(env, [&] {
    strategy_ = to_string(info[0], "strategy");
    params p = to_params(info[1]);
    backing_choice choice = to_backing_choice(info[2], info[3]);
    backing_kind_ = backing_kind_name(choice.kind);
    backing_ = make_backing(choice.kind, choice.simulated, choice.cuda);
    if (choice.kind == backing_kind::simulated)
      simulated_ = static_cast<simulated_backing*>(backing_.get());
    allocator_ = make_allocator(strategy_, *backing_, p);
  });
}

allocator& allocator_wrap::usable(Napi::Env env) {
  if (!allocator_) throw coded_error(env, code_disposed, "this allocator was disposed");
  if (busy_)
    throw coded_error(
        env, code_busy,
        "this allocator is running runOps(); wait for its promise before other calls");
  return *allocator_;
}

allocator& allocator_wrap::lend(Napi::Env env) {
  allocator& a = usable(env);
  busy_ = true;
  return a;
}

// allocate(size, stream = 0) -> bigint address (0n for 0 bytes)
Napi::Value allocator_wrap::allocate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  std::uint64_t size = to_uint64(info[0], "size");
  stream_t stream = static_cast<stream_t>(to_uint64_or(info[1], "stream", 0));
  void* p = guarded(env, [&] { return a.allocate(static_cast<std::size_t>(size), stream); });
  return Napi::BigInt::New(env, static_cast<std::uint64_t>(reinterpret_cast<address_t>(p)));
}

// deallocate(address, stream = 0)
Napi::Value allocator_wrap::deallocate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  address_t address = static_cast<address_t>(to_uint64(info[0], "address"));
  stream_t stream = static_cast<stream_t>(to_uint64_or(info[1], "stream", 0));
  guarded(env, [&] { a.deallocate(reinterpret_cast<void*>(address), stream); });
  return env.Undefined();
}

// recordStream(address, stream)
Napi::Value allocator_wrap::record_stream(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  address_t address = static_cast<address_t>(to_uint64(info[0], "address"));
  stream_t stream = static_cast<stream_t>(to_uint64(info[1], "stream"));
  guarded(env, [&] { a.record_stream(reinterpret_cast<void*>(address), stream); });
  return env.Undefined();
}

Napi::Value allocator_wrap::process_deferred(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  return to_number(env, guarded(env, [&] { return a.process_deferred(); }));
}

Napi::Value allocator_wrap::synchronize_deferred(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  guarded(env, [&] { a.synchronize_deferred(); });
  return env.Undefined();
}

Napi::Value allocator_wrap::stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  allocator_stats s = guarded(env, [&] { return a.stats(); });
  Napi::Object o = Napi::Object::New(env);
  o.Set("requestedLive", to_number(env, s.requested_live));
  o.Set("requestedPeak", to_number(env, s.requested_peak));
  o.Set("roundedLive", to_number(env, s.rounded_live));
  o.Set("roundedPeak", to_number(env, s.rounded_peak));
  o.Set("reservedLive", to_number(env, s.reserved_live));
  o.Set("reservedPeak", to_number(env, s.reserved_peak));
  o.Set("addressSpace", to_number(env, s.address_space));
  o.Set("pendingBytes", to_number(env, s.pending_bytes));
  o.Set("freeBytes", to_number(env, s.free_bytes));
  o.Set("unusableBytes", to_number(env, s.unusable_bytes));
  o.Set("largestFreeBlock", to_number(env, s.largest_free_block));
  o.Set("externalFragmentation", Napi::Number::New(env, s.external_fragmentation));
  o.Set("internalWaste", to_number(env, s.internal_waste()));
  o.Set("liveBlocks", to_number(env, s.live_blocks));
  o.Set("pendingBlocks", to_number(env, s.pending_blocks));
  o.Set("allocations", to_number(env, s.allocations));
  o.Set("deallocations", to_number(env, s.deallocations));
  o.Set("failures", to_number(env, s.failures));
  o.Set("deviceCalls", device_calls_object(env, s.device_calls));
  return o;
}

Napi::Value allocator_wrap::walk(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  return guarded(env, [&] { return layout_columns(env, a); });
}

Napi::Value allocator_wrap::trim(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  guarded(env, [&] { a.trim(); });
  return env.Undefined();
}

Napi::Value allocator_wrap::reset(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  guarded(env, [&] { a.reset(); });
  return env.Undefined();
}

// setTime(ns): the simulated backing's logical clock, which completes stream events.
Napi::Value allocator_wrap::set_time(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  usable(env);
  std::uint64_t ns = to_uint64(info[0], "ns");
  if (simulated_ == nullptr)
    throw coded_error(env, "UNSUPPORTED",
                      "setTime() drives the simulated backing's clock; this allocator runs on '" +
                          backing_kind_ + "', where real events complete on their own");
  simulated_->set_time(ns);
  return env.Undefined();
}

// setTracing(on): records every event the strategy reports until takeTrace() collects them.
Napi::Value allocator_wrap::set_tracing(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  allocator& a = usable(env);
  bool on = to_bool(info[0], "on");
  if (on && !tracer_) tracer_ = std::make_unique<vector_tracer>();
  a.set_tracer(on ? tracer_.get() : nullptr);
  return env.Undefined();
}

// takeTrace(): the events recorded since the last call, as columns; tracing stays as it was.
Napi::Value allocator_wrap::take_trace(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  usable(env);
  std::vector<trace_event> events;
  if (tracer_) {
    events = tracer_->events();
    tracer_->clear();
  }
  return trace_columns(env, events);
}

Napi::Value allocator_wrap::run_ops(const Napi::CallbackInfo& info) {
  return start_run_ops(info, *this);
}

// dispose(): gives the memory back now rather than when the garbage collector gets to it.
Napi::Value allocator_wrap::dispose(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (busy_) usable(env);  // throws BUSY
  allocator_.reset();
  tracer_.reset();
  simulated_ = nullptr;
  backing_.reset();
  return env.Undefined();
}

Napi::Value allocator_wrap::strategy_name(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), strategy_);
}
Napi::Value allocator_wrap::backing_name(const Napi::CallbackInfo& info) {
  return Napi::String::New(info.Env(), backing_kind_);
}
Napi::Value allocator_wrap::supports_reset(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), allocator_ && allocator_->supports_reset());
}
Napi::Value allocator_wrap::thread_safe(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), allocator_ && allocator_->thread_safe());
}
Napi::Value allocator_wrap::disposed(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), !allocator_);
}

}  // namespace vramscope::binding
