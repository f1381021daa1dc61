// The JavaScript `Allocator` class: one strategy on one backing, owned together. Each method copies
// its arguments into plain values, calls the library and converts the result back.
#pragma once

#include <napi.h>

#include <memory>

#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

namespace vramscope::binding {

class allocator_wrap : public Napi::ObjectWrap<allocator_wrap> {
 public:
  static Napi::Function define(Napi::Env env);
  explicit allocator_wrap(const Napi::CallbackInfo& info);

  // For runOps: the allocator is lent to a worker thread, and every other call is refused (BUSY)
  // until the worker hands it back.
  allocator& lend(Napi::Env env);
  void give_back() noexcept { busy_ = false; }
  simulated_backing* simulated() const noexcept { return simulated_; }

 private:
  allocator& usable(Napi::Env env);

  Napi::Value allocate(const Napi::CallbackInfo& info);
  Napi::Value deallocate(const Napi::CallbackInfo& info);
  Napi::Value record_stream(const Napi::CallbackInfo& info);
  Napi::Value process_deferred(const Napi::CallbackInfo& info);
  Napi::Value synchronize_deferred(const Napi::CallbackInfo& info);
  Napi::Value stats(const Napi::CallbackInfo& info);
  Napi::Value walk(const Napi::CallbackInfo& info);
  Napi::Value trim(const Napi::CallbackInfo& info);
  Napi::Value reset(const Napi::CallbackInfo& info);
  Napi::Value set_time(const Napi::CallbackInfo& info);
  Napi::Value set_tracing(const Napi::CallbackInfo& info);
  Napi::Value take_trace(const Napi::CallbackInfo& info);
  Napi::Value run_ops(const Napi::CallbackInfo& info);
  Napi::Value dispose(const Napi::CallbackInfo& info);
  Napi::Value strategy_name(const Napi::CallbackInfo& info);
  Napi::Value backing_name(const Napi::CallbackInfo& info);
  Napi::Value supports_reset(const Napi::CallbackInfo& info);
  Napi::Value thread_safe(const Napi::CallbackInfo& info);
  Napi::Value disposed(const Napi::CallbackInfo& info);

  // Declaration order is destruction order reversed: the allocator goes before its tracer and
  // the backing it returns memory to.
  std::unique_ptr<backing> backing_;
  std::unique_ptr<vector_tracer> tracer_;
  std::unique_ptr<allocator> allocator_;
  simulated_backing* simulated_ = nullptr;  // backing_ when it is the simulated one
  std::string strategy_;
  std::string backing_kind_;
  bool busy_ = false;
};

}  // namespace vramscope::binding
