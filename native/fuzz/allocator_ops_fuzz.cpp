// libFuzzer target: a byte stream decoded into a sequence of allocator operations (allocate, free
// on the same or another stream, record_stream, invalid and double frees, trim, reset, time
// passing) on one strategy configuration of the typed suite, simulated backing. After every
// operation the invariant checker must pass and the allocator's own counters must agree with the
// fuzzer's model; every failed call must throw its typed error and leave the state exactly as it
// was. Anything else aborts, which libFuzzer reports as a crash with the input that caused it.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "checks.hpp"
#include "suite_configs.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

// Bounds one input's cost: the invariant walk after each operation is linear in the blocks.
constexpr std::size_t max_operations = 2000;
constexpr stream_t stream_count = 3;

enum class op : int {
  allocate,
  allocate_large,  // sizes up to twice the device: out-of-memory paths
  free_own_stream,
  free_other_stream,
  record_stream,
  invalid_free,
  double_free,
  trim,
  reset,
  advance_time,
  synchronize,
  last = synchronize
};

[[noreturn]] void broken(const suite_config& c, std::size_t step, const std::string& what) {
  std::fprintf(stderr, "allocator_ops_fuzz: %s, operation %zu: %s\n", c.label.c_str(), step,
               what.c_str());
  std::abort();
}

struct model {
  const suite_config& config;
  std::unique_ptr<simulated_backing> backing;
  std::unique_ptr<allocator> alloc;
  std::map<address_t, std::size_t> live;  // address -> requested bytes
  std::vector<address_t> order;           // live addresses, for picking one by index
  std::vector<address_t> freed;           // recently freed addresses, for double frees
  std::size_t step = 0;
  std::uint64_t failures = 0;  // out-of-memory errors so far

  explicit model(const suite_config& c) : config(c) {
    simulated_options o;
    o.capacity = c.capacity;
    backing = make_simulated_backing(o);
    alloc = make_allocator(c.strategy, *backing, c.parameters);
  }

  void fail(const std::string& what) const { broken(config, step, what); }

  void check() const {
    std::string what = fuzz::invariants(*alloc, live);
    if (!what.empty()) fail(what);
  }

  // Runs a call that must throw E and change nothing but the failure count.
  template <class E, class E2 = E, class Call>
  void expect_rejected(const char* what, Call call) {
    auto before = fuzz::freeze(*alloc);
    try {
      call();
      fail(std::string(what) + " did not throw");
    } catch (const E&) {
    } catch (const E2&) {
    } catch (const std::exception& e) {
      fail(std::string(what) + " threw the wrong error: " + e.what());
    }
    std::string changed = fuzz::changes_since(*before, *alloc);
    if (!changed.empty()) fail(std::string(what) + " changed:" + changed);
    failures = alloc->stats().failures;
  }

  void allocate(std::size_t bytes, stream_t stream) {
    // Counters, not stats(): no walk per call. The walk after the call (check) proves the live
    // blocks are still exactly the model's.
    allocator::counters before = alloc->live_counters();
    void* p;
    try {
      p = alloc->allocate(bytes, stream);
    } catch (const out_of_memory& e) {
      if (e.requested() != bytes)
        fail("out_of_memory names " + std::to_string(e.requested()) + " bytes, not " +
             std::to_string(bytes));
      // On the way to a failure an allocator may complete deferred frees (it waits for them before
      // giving up) and release cached memory no block uses (the driver's pool trims on
      // out-of-memory; PyTorch frees cached blocks): what the caller holds must stay exactly as it
      // was, and the failed call may not keep any memory it obtained.
      allocator::counters after = alloc->live_counters();
      if (before.requested_live != after.requested_live ||
          before.rounded_live != after.rounded_live || before.live_blocks != after.live_blocks)
        fail("a failed allocate changed the live blocks");
      if (after.reserved_live > before.reserved_live)
        fail("a failed allocate kept " +
             std::to_string(after.reserved_live - before.reserved_live) + " bytes it obtained");
      if (alloc->stats().failures != ++failures)
        fail("a failed allocate was not counted as a failure");
      return;
    } catch (const std::exception& e) {
      fail("allocate(" + std::to_string(bytes) +
           ") threw something other than out_of_memory: " + e.what());
    }
    address_t a = reinterpret_cast<address_t>(p);
    if (a == 0) fail("allocate returned nullptr for " + std::to_string(bytes) + " bytes");
    if (live.count(a)) fail("allocate returned a live address " + format_address(a));
    if (alloc->requested_size(p) != bytes) fail("requested_size differs from the request");
    live[a] = bytes;
    order.push_back(a);
  }

  void deallocate(std::size_t index, stream_t stream) {
    address_t a = order[index];
    try {
      alloc->deallocate(reinterpret_cast<void*>(a), stream);
    } catch (const std::exception& e) {
      fail("freeing live block " + format_address(a) + " threw: " + e.what());
    }
    live.erase(a);
    order[index] = order.back();
    order.pop_back();
    if (freed.size() == 16) freed.erase(freed.begin());
    freed.push_back(a);
  }
};

void run(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  static const std::vector<suite_config> configs = suite_configs();
  const suite_config& config =
      configs[in.ConsumeIntegralInRange<std::size_t>(0, configs.size() - 1)];
  model m(config);
  const unsigned max_shift = 64 - __builtin_clzll(config.max_request);
  const unsigned device_shift = 65 - __builtin_clzll(config.capacity);
  for (; m.step < max_operations && in.remaining_bytes() > 0; ++m.step) {
    switch (static_cast<op>(in.ConsumeIntegralInRange<int>(0, static_cast<int>(op::last)))) {
      case op::allocate: {
        std::size_t n = std::size_t{1} << in.ConsumeIntegralInRange<unsigned>(0, max_shift);
        n = in.ConsumeIntegralInRange<std::size_t>(n / 2 + 1, n);
        m.allocate(std::min(n, config.max_request),
                   in.ConsumeIntegralInRange<stream_t>(1, stream_count));
        break;
      }
      case op::allocate_large: {
        std::size_t n = std::size_t{1}
                        << in.ConsumeIntegralInRange<unsigned>(max_shift, device_shift);
        m.allocate(in.ConsumeIntegralInRange<std::size_t>(n / 2 + 1, n), 1);
        break;
      }
      case op::free_own_stream:
      case op::free_other_stream: {
        if (m.order.empty()) break;
        std::size_t i = in.ConsumeIntegralInRange<std::size_t>(0, m.order.size() - 1);
        // A block's own stream is not known to the model: stream 1 is the usual one.
        m.deallocate(i, in.ConsumeIntegralInRange<stream_t>(1, stream_count));
        break;
      }
      case op::record_stream: {
        if (m.order.empty()) break;
        std::size_t i = in.ConsumeIntegralInRange<std::size_t>(0, m.order.size() - 1);
        m.alloc->record_stream(reinterpret_cast<void*>(m.order[i]),
                               in.ConsumeIntegralInRange<stream_t>(1, stream_count));
        break;
      }
      case op::invalid_free: {
        // Inside a live block, or well away from any: never the start of a block we hold.
        address_t a = m.order.empty()
                          ? address_t{0x1000} << in.ConsumeIntegralInRange<unsigned>(0, 30)
                          : m.order[in.ConsumeIntegralInRange<std::size_t>(0, m.order.size() - 1)] +
                                in.ConsumeIntegralInRange<std::uint64_t>(1, 4096);
        if (m.live.count(a)) break;
        // The start of a block freed earlier is a double free, which is just as typed.
        m.expect_rejected<invalid_free, double_free>("freeing an address never handed out", [&] {
          m.alloc->deallocate(reinterpret_cast<void*>(a), 1);
        });
        break;
      }
      case op::double_free: {
        if (m.freed.empty()) break;
        address_t a = m.freed[in.ConsumeIntegralInRange<std::size_t>(0, m.freed.size() - 1)];
        if (m.live.count(a)) break;  // handed out again since
        m.expect_rejected<double_free, invalid_free>(
            "a double free", [&] { m.alloc->deallocate(reinterpret_cast<void*>(a), 1); });
        break;
      }
      case op::trim:
        m.alloc->trim();
        break;
      case op::reset:
        if (m.alloc->supports_reset()) {
          m.alloc->reset();
          m.live.clear();
          m.order.clear();
          m.freed.clear();
          m.failures = m.alloc->stats().failures;
        } else {
          m.expect_rejected<unsupported>("reset where unsupported", [&] { m.alloc->reset(); });
        }
        break;
      case op::advance_time:
        m.backing->set_time(m.backing->time() +
                            in.ConsumeIntegralInRange<std::uint64_t>(1, 100000));
        m.alloc->process_deferred();
        break;
      case op::synchronize:
        m.alloc->synchronize_deferred();
        if (m.alloc->stats().pending_blocks != 0)
          m.fail("pending blocks left after synchronize_deferred");
        break;
    }
    m.check();
  }
  // Everything freed and synchronized: nothing live, nothing pending.
  while (!m.order.empty()) m.deallocate(m.order.size() - 1, 1);
  m.alloc->synchronize_deferred();
  m.check();
  allocator_stats end = m.alloc->stats();
  if (end.rounded_live != 0 || end.requested_live != 0 || end.pending_bytes != 0)
    m.fail("bytes still live after freeing everything");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run(data, size);
  return 0;
}
