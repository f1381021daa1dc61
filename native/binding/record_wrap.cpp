// recordWorkload: runs a built-in GPU workload (native/cuda/workloads/) on a worker thread and
// streams what it records to JavaScript in chunks, at most every 50 ms (or 8192 events), so the
// TraceWriter on the other side writes as it goes and a crash loses little. The worker only fills
// plain vectors; the JavaScript thread turns each chunk into typed arrays (columns.hpp). The run
// reads a cancel flag at every step and allocation: the caller's (spec.cancelFlag, made by
// cancelFlag() and raised by raiseCancelFlag(), replay_wrap.hpp) or its own, which a throwing chunk
// callback raises; a raised flag ends the run with stoppedBy "cancelled" and what was recorded kept.
#include "record_wrap.hpp"

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "columns.hpp"
#include "convert.hpp"
#include "errors.hpp"
#include "replay_wrap.hpp"
#include "../cuda/include/vramscope/workloads.hpp"

namespace vramscope::binding {

namespace {

struct chunk {
  std::vector<std::uint8_t> kind;
  std::vector<std::uint32_t> id;
  std::vector<double> size;
  std::vector<std::uint32_t> stream;
  std::vector<double> time;
  std::vector<std::string> marker_names;
  std::vector<std::uint8_t> op;
  std::vector<std::uint64_t> address;
  std::vector<double> layout_size;
  std::vector<double> requested;
  std::vector<std::uint32_t> layout_stream;
  std::vector<double> layout_time;
  std::vector<std::uint32_t> latency;
  std::vector<std::uint32_t> step_index;
  std::vector<double> gpu_ns;
  std::vector<double> host_ns;
  std::size_t events() const { return kind.size() + op.size(); }
};

Napi::Object chunk_object(Napi::Env env, const chunk& c) {
  Napi::Object requests = Napi::Object::New(env);
  requests.Set("kind", typed_array(env, c.kind));
  requests.Set("id", typed_array(env, c.id));
  requests.Set("size", typed_array(env, c.size));
  requests.Set("stream", typed_array(env, c.stream));
  requests.Set("time", typed_array(env, c.time));
  Napi::Array names = Napi::Array::New(env, c.marker_names.size());
  for (std::uint32_t i = 0; i < c.marker_names.size(); ++i) names.Set(i, c.marker_names[i]);
  Napi::Object layout = Napi::Object::New(env);
  layout.Set("op", typed_array(env, c.op));
  layout.Set("address", typed_array(env, c.address));
  layout.Set("size", typed_array(env, c.layout_size));
  layout.Set("requested", typed_array(env, c.requested));
  layout.Set("stream", typed_array(env, c.layout_stream));
  layout.Set("time", typed_array(env, c.layout_time));
  layout.Set("latencyNs", typed_array(env, c.latency));
  Napi::Object steps = Napi::Object::New(env);
  steps.Set("index", typed_array(env, c.step_index));
  steps.Set("gpuNs", typed_array(env, c.gpu_ns));
  steps.Set("hostNs", typed_array(env, c.host_ns));
  Napi::Object o = Napi::Object::New(env);
  o.Set("requests", requests);
  o.Set("markerNames", names);
  o.Set("layout", layout);
  o.Set("steps", steps);
  return o;
}

#ifdef VRAMSCOPE_WITH_CUDA

class chunking_sink final : public workload_sink {
 public:
  using send_fn = std::function<void(chunk&&)>;
  explicit chunking_sink(send_fn send) : send_(std::move(send)) {}

  void request(std::uint8_t kind, std::uint32_t id, std::uint64_t size, std::uint32_t stream,
               double time) override {
    c_.kind.push_back(kind);
    c_.id.push_back(id);
    c_.size.push_back(static_cast<double>(size));
    c_.stream.push_back(stream);
    c_.time.push_back(time);
    maybe_send();
  }
  void layout(const trace_event& e, std::uint32_t stream, double time,
              std::uint32_t latency) override {
    c_.op.push_back(static_cast<std::uint8_t>(e.op));
    c_.address.push_back(e.address);
    c_.layout_size.push_back(static_cast<double>(e.size));
    c_.requested.push_back(static_cast<double>(e.requested));
    c_.layout_stream.push_back(stream);
    c_.layout_time.push_back(time);
    c_.latency.push_back(latency);
    maybe_send();
  }
  void marker(const std::string& name, double time) override {
    c_.kind.push_back(2);
    c_.id.push_back(static_cast<std::uint32_t>(c_.marker_names.size()));
    c_.size.push_back(0);
    c_.stream.push_back(0);
    c_.time.push_back(time);
    c_.marker_names.push_back(name);
    maybe_send();
  }
  void step(std::uint32_t index, double gpu_ns, double host_ns) override {
    c_.step_index.push_back(index);
    c_.gpu_ns.push_back(gpu_ns);
    c_.host_ns.push_back(host_ns);
  }
  void flush() {
    if (c_.events() == 0 && c_.step_index.empty()) return;
    send_(std::move(c_));
    c_ = chunk();
    last_ = std::chrono::steady_clock::now();
  }

 private:
  void maybe_send() {
    if (c_.events() >= 8192 ||
        std::chrono::steady_clock::now() - last_ >= std::chrono::milliseconds(50))
      flush();
  }
  send_fn send_;
  chunk c_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

class record_worker final : public Napi::AsyncProgressQueueWorker<chunk*> {
 public:
  record_worker(Napi::Env env, workload_options options, Napi::Function on_chunk,
                shared_cancel_flag cancel)
      : Napi::AsyncProgressQueueWorker<chunk*>(env, "vramscope.recordWorkload"),
        deferred_(Napi::Promise::Deferred::New(env)),
        options_(std::move(options)),
        on_chunk_(Napi::Persistent(on_chunk)),
        cancel_(cancel ? std::move(cancel) : std::make_shared<std::atomic<bool>>(false)) {}

  Napi::Promise promise() const { return deferred_.Promise(); }

 private:
  void Execute(const ExecutionProgress& progress) override {
    // Chunks cross as pointers (the queue copies its elements); OnProgress takes ownership.
    chunking_sink sink([&progress](chunk&& c) {
      chunk* owned = new chunk(std::move(c));
      progress.Send(&owned, 1);
    });
    try {
      result_ = run_workload(options_, sink, cancel_.get());
      sink.flush();
    } catch (const std::exception& e) {
      sink.flush();
      failed_ = true;
      failure_ = error_record::capture(e);
    }
  }

  void OnProgress(chunk* const* data, std::size_t count) override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    for (std::size_t i = 0; i < count; ++i) {
      std::unique_ptr<chunk> c(data[i]);
      if (!callback_error_.IsEmpty()) continue;
      try {
        on_chunk_.Call({chunk_object(env, *c)});
      } catch (const Napi::Error& e) {
        callback_error_ = Napi::Persistent(e.Value());
        *cancel_ = true;
      }
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (!callback_error_.IsEmpty()) return deferred_.Reject(callback_error_.Value());
    if (failed_) return deferred_.Reject(failure_.to_js(env).Value());
    Napi::Object o = Napi::Object::New(env);
    o.Set("strategy", result_.strategy);
    o.Set("backing", result_.backing);
    o.Set("device", result_.device);
    o.Set("allocations", to_number(env, result_.allocations));
    o.Set("frees", to_number(env, result_.frees));
    o.Set("steps", to_number(env, result_.steps));
    o.Set("verifiedBytes", to_number(env, result_.verified_bytes));
    o.Set("corruptedBytes", to_number(env, result_.corrupted_bytes));
    o.Set("outOfMemory", result_.out_of_memory);
    o.Set("stoppedBy", result_.stopped_by);
    deferred_.Resolve(o);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

  Napi::Promise::Deferred deferred_;
  workload_options options_;
  Napi::FunctionReference on_chunk_;
  Napi::ObjectReference callback_error_;
  // The caller's flag (spec.cancelFlag) where it gave one, else the worker's own; shared with the
  // JavaScript flag, which may be raised after this worker is gone.
  shared_cancel_flag cancel_;
  workload_result result_;
  bool failed_ = false;
  error_record failure_;
};

#endif

params string_params(const Napi::Value& value, const char* what) {
  params p;
  if (value.IsUndefined() || value.IsNull()) return p;
  if (!value.IsObject())
    throw coded_type_error(value.Env(), std::string(what) + " must be an object");
  Napi::Object o = value.As<Napi::Object>();
  Napi::Array keys = o.GetPropertyNames();
  for (std::uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string key = keys.Get(i).ToString();
    p.set(key, o.Get(key).ToString());
  }
  return p;
}

}  // namespace

Napi::Value list_workloads(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const auto& all = workloads();
  Napi::Array result = Napi::Array::New(env, all.size());
  for (std::uint32_t i = 0; i < all.size(); ++i) {
    const workload_info& w = all[i];
    Napi::Array params = Napi::Array::New(env, w.params.size());
    for (std::uint32_t j = 0; j < w.params.size(); ++j) {
      Napi::Object p = Napi::Object::New(env);
      p.Set("name", w.params[j].name);
      p.Set("kind", w.params[j].kind);
      p.Set("default", w.params[j].default_value);
      p.Set("description", w.params[j].description);
      params.Set(j, p);
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("name", w.name);
    o.Set("description", w.description);
    o.Set("params", params);
    o.Set("multiStream", w.multi_stream);
    o.Set("fixedStrategy", w.fixed_strategy);
    result.Set(i, o);
  }
  return result;
}

Napi::Value record_workload_js(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guarded(env, [&]() -> Napi::Value {
    if (!info[0].IsObject()) throw coded_type_error(env, "spec must be an object");
    if (!info[1].IsFunction()) throw coded_type_error(env, "onChunk must be a function");
    Napi::Object spec = info[0].As<Napi::Object>();
    workload_options o;
    o.workload = to_string(spec.Get("workload"), "spec.workload");
    o.strategy = to_string(spec.Get("strategy"), "spec.strategy");
    o.strategy_params = to_params(spec.Get("strategyParams"));
    o.workload_params = string_params(spec.Get("workloadParams"), "spec.workloadParams");
    o.device = static_cast<int>(to_uint64_or(spec.Get("device"), "spec.device", 0));
    o.capacity = to_uint64_or(spec.Get("capacity"), "spec.capacity", 0);
    shared_cancel_flag cancel;
    Napi::Value given_flag = spec.Get("cancelFlag");
    if (!given_flag.IsUndefined()) cancel = cancel_flag_of(given_flag, "spec.cancelFlag");
#ifdef VRAMSCOPE_WITH_CUDA
    auto* worker =
        new record_worker(env, std::move(o), info[1].As<Napi::Function>(), std::move(cancel));
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
#else
    (void)chunk_object;
    (void)cancel;
    throw unsupported("recordWorkload: this build of vramscope has no CUDA (rebuild where nvcc is found)");
#endif
  });
}

}  // namespace vramscope::binding
