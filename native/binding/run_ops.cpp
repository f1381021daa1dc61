// The runOps worker. The operation columns are copied on the JavaScript thread; the worker then owns
// plain vectors and the allocator, which the wrapper refuses to other calls until it is done.
#include "run_ops.hpp"

#include <chrono>
#include <string>
#include <vector>

#include "allocator_wrap.hpp"
#include "columns.hpp"
#include "errors.hpp"

namespace vramscope::binding {

namespace {

template <class T>
std::vector<T> copy_column(Napi::Object ops, const char* name, napi_typedarray_type type,
                           const char* type_name) {
  Napi::Value v = ops.Get(name);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    throw coded_type_error(ops.Env(), std::string("ops.") + name + " must be a " + type_name);
  auto array = v.As<Napi::TypedArrayOf<T>>();
  return std::vector<T>(array.Data(), array.Data() + array.ElementLength());
}

struct op_columns {
  std::vector<std::uint8_t> kind;
  std::vector<double> size;
  std::vector<std::uint32_t> stream;
  std::vector<std::uint32_t> target;
};

class run_ops_worker final : public Napi::AsyncWorker {
 public:
  run_ops_worker(Napi::Env env, Napi::Object owner, allocator_wrap& wrap, allocator& lent,
                 op_columns ops)
      : Napi::AsyncWorker(env, "vramscope.runOps"),
        deferred_(Napi::Promise::Deferred::New(env)),
        owner_(Napi::Persistent(owner)),
        wrap_(wrap),
        allocator_(lent),
        simulated_(wrap.simulated()),
        ops_(std::move(ops)),
        address_(ops_.kind.size(), 0),
        status_(ops_.kind.size(), static_cast<std::uint8_t>(run_op_status::ok)) {}

  Napi::Promise promise() const { return deferred_.Promise(); }

 private:
  void Execute() override {
    auto start = std::chrono::steady_clock::now();
    try {
      for (std::size_t i = 0; i < ops_.kind.size(); ++i) apply(i);
    } catch (const std::exception& e) {
      // Not a per-op outcome (unsupported, a device error): the run stops here.
      failed_ = true;
      failure_ = error_record::capture(e);
      failure_.message += " (at op " + std::to_string(failed_at_) + ")";
    }
    elapsed_ns_ =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  }

  void apply(std::size_t i) {
    failed_at_ = i;
    const stream_t stream = ops_.stream[i];
    switch (static_cast<run_op_kind>(ops_.kind[i])) {
      case run_op_kind::alloc:
        try {
          address_[i] = reinterpret_cast<address_t>(
              allocator_.allocate(static_cast<std::size_t>(ops_.size[i]), stream));
        } catch (const out_of_memory&) {
          fail(i, run_op_status::out_of_memory);
        }
        break;
      case run_op_kind::free: {
        const std::uint32_t t = ops_.target[i];
        if (status_[t] != static_cast<std::uint8_t>(run_op_status::ok)) {
          status_[i] = static_cast<std::uint8_t>(run_op_status::skipped);
          break;
        }
        address_[i] = address_[t];
        try {
          allocator_.deallocate(reinterpret_cast<void*>(address_[i]), stream);
        } catch (const double_free&) {
          fail(i, run_op_status::double_free);
        } catch (const invalid_free&) {
          fail(i, run_op_status::invalid_free);
        }
        break;
      }
      case run_op_kind::set_time:
        if (simulated_ == nullptr)
          throw unsupported("runOps: setTime ops need the simulated backing");
        simulated_->set_time(static_cast<std::uint64_t>(ops_.size[i]));
        break;
    }
  }

  void fail(std::size_t i, run_op_status status) {
    status_[i] = static_cast<std::uint8_t>(status);
    ++failures_;
  }

  void OnOK() override {
    Napi::Env env = Env();
    wrap_.give_back();
    if (failed_) {
      deferred_.Reject(failure_.to_js(env).Value());
      return;
    }
    Napi::Object result = Napi::Object::New(env);
    result.Set("address", typed_array(env, address_));
    result.Set("status", typed_array(env, status_));
    result.Set("failures", Napi::Number::New(env, static_cast<double>(failures_)));
    result.Set("elapsedNs", Napi::Number::New(env, elapsed_ns_));
    deferred_.Resolve(result);
  }

  void OnError(const Napi::Error& e) override {
    wrap_.give_back();
    deferred_.Reject(e.Value());
  }

  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference owner_;  // keeps the Allocator (and its memory) alive while we work
  allocator_wrap& wrap_;
  allocator& allocator_;
  simulated_backing* simulated_;
  op_columns ops_;
  std::vector<std::uint64_t> address_;
  std::vector<std::uint8_t> status_;
  std::uint64_t failures_ = 0;
  double elapsed_ns_ = 0;
  std::size_t failed_at_ = 0;
  bool failed_ = false;
  error_record failure_;
};

op_columns read_ops(const Napi::Value& value) {
  Napi::Env env = value.Env();
  if (!value.IsObject()) throw coded_type_error(env, "ops must be an object of typed arrays");
  Napi::Object o = value.As<Napi::Object>();
  op_columns ops;
  ops.kind = copy_column<std::uint8_t>(o, "kind", napi_uint8_array, "Uint8Array");
  ops.size = copy_column<double>(o, "size", napi_float64_array, "Float64Array");
  ops.stream = copy_column<std::uint32_t>(o, "stream", napi_uint32_array, "Uint32Array");
  ops.target = copy_column<std::uint32_t>(o, "target", napi_uint32_array, "Uint32Array");
  const std::size_t n = ops.kind.size();
  if (ops.size.size() != n || ops.stream.size() != n || ops.target.size() != n)
    throw coded_type_error(env,
                           "ops.kind, ops.size, ops.stream and ops.target must have one length");
  // The worker trusts these: a free names an earlier alloc op, sizes are whole byte counts.
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = " (op " + std::to_string(i) + ")";
    const double size = ops.size[i];
    switch (static_cast<run_op_kind>(ops.kind[i])) {
      case run_op_kind::alloc:
      case run_op_kind::set_time:
        if (!(size >= 0 && size <= 9007199254740991.0) ||
            size != static_cast<double>(static_cast<std::uint64_t>(size)))
          throw coded_type_error(env, "ops.size must hold non-negative safe integers" + at);
        break;
      case run_op_kind::free:
        if (ops.target[i] >= i ||
            ops.kind[ops.target[i]] != static_cast<std::uint8_t>(run_op_kind::alloc))
          throw coded_type_error(
              env, "ops.target of a free must be the index of an earlier alloc op" + at);
        break;
      default:
        throw coded_type_error(env, "ops.kind must be 0 (alloc), 1 (free) or 2 (setTime)" + at);
    }
  }
  return ops;
}

}  // namespace

Napi::Value start_run_ops(const Napi::CallbackInfo& info, allocator_wrap& wrap) {
  Napi::Env env = info.Env();
  op_columns ops = read_ops(info[0]);
  allocator& lent = wrap.lend(env);
  run_ops_worker* worker;
  try {
    worker = new run_ops_worker(env, info.This().As<Napi::Object>(), wrap, lent, std::move(ops));
  } catch (...) {
    wrap.give_back();
    throw;
  }
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

Napi::Object run_op_codes(Napi::Env env) {
  Napi::Object kinds = Napi::Object::New(env);
  kinds.Set("alloc", static_cast<double>(run_op_kind::alloc));
  kinds.Set("free", static_cast<double>(run_op_kind::free));
  kinds.Set("setTime", static_cast<double>(run_op_kind::set_time));
  Napi::Object statuses = Napi::Object::New(env);
  statuses.Set("ok", static_cast<double>(run_op_status::ok));
  statuses.Set("outOfMemory", static_cast<double>(run_op_status::out_of_memory));
  statuses.Set("invalidFree", static_cast<double>(run_op_status::invalid_free));
  statuses.Set("doubleFree", static_cast<double>(run_op_status::double_free));
  statuses.Set("skipped", static_cast<double>(run_op_status::skipped));
  Napi::Object codes = Napi::Object::New(env);
  codes.Set("kinds", kinds);
  codes.Set("statuses", statuses);
  return codes;
}

}  // namespace vramscope::binding
