// Stream ordering of reuse and unmapping, in the simulated backing's logical time: an event the test
// records on a stream stands for kernels queued there on a block. A block freed on its own stream
// may be reused there at once, but must not reach another stream, nor be unmapped, before that work
// has completed (the GPU run showed both: async_pipeline's corrupted bytes on slab, arena and
// vmm_growable, and vmm_growable's verify kernels reading granules already unmapped).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "check.hpp"
#include "invariants.hpp"  // check_invariants
#include "suite_configs.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

constexpr stream_t stream_a = 0x1000, stream_b = 0x2000;

struct fixture {
  std::unique_ptr<simulated_backing> device;
  std::unique_ptr<allocator> alloc;
  explicit fixture(const testing::suite_config& c) {
    simulated_options o;
    o.capacity = c.capacity;
    device = make_simulated_backing(o);
    alloc = make_allocator(c.strategy, *device, c.parameters);
  }
};

bool overlaps(void* p, void* q, std::size_t bytes) {
  const auto a = reinterpret_cast<address_t>(p), b = reinterpret_cast<address_t>(q);
  return a < b + bytes && b < a + bytes;
}

// Their reuse is ordered by the driver, which the simulated backing does not model: cudaFree
// synchronizes the device, and cudaMallocAsync's pool makes the new stream wait for the old one.
bool ordered_by_driver(const std::string& strategy) {
  return strategy == "cuda_malloc" || strategy == "async_pool";
}

// Calls `check` on every unmap the allocator makes, right after it.
class unmap_watch final : public tracer {
 public:
  explicit unmap_watch(std::function<void()> check) : check_(std::move(check)) {}
  void record(const trace_event& e) override {
    if (e.op == trace_op::unmap) {
      ++unmaps;
      check_();
    }
  }
  int unmaps = 0;

 private:
  std::function<void()> check_;
};

}  // namespace

TEST(
    "every strategy: a block freed on stream A reaches stream B only once A's queued work is "
    "done") {
  for (const auto& c : testing::suite_configs()) {
    if (ordered_by_driver(c.strategy)) {
      std::printf(
          "  %s: skipped (reuse across streams is ordered by the driver, not modelled here)\n",
          c.label.c_str());
      continue;
    }
    const std::size_t bytes = std::min<std::size_t>(c.max_request, 64 * KiB);
    {
      // A allocates, queues work, frees; then B allocates.
      fixture f(c);
      void* p = f.alloc->allocate(bytes, stream_a);
      const event_t work_on_p = f.device->record_event(stream_a);
      f.alloc->deallocate(p, stream_a);
      void* q = f.alloc->allocate(bytes, stream_b);
      if (overlaps(p, q, bytes) && !f.device->event_complete(work_on_p))
        check::report(__FILE__, __LINE__,
                      c.label + ": B got A's block while A's work on it was queued");
      f.alloc->deallocate(q, stream_b);
      CHECK_EQ(testing::check_invariants(*f.alloc, nullptr), std::string());
    }
    {
      // B is already allocating when A frees: B's next allocation must still wait for A.
      fixture f(c);
      void* p = f.alloc->allocate(bytes, stream_a);
      void* r = f.alloc->allocate(bytes, stream_b);
      const event_t work_on_p = f.device->record_event(stream_a);
      f.alloc->deallocate(p, stream_a);
      void* q = f.alloc->allocate(bytes, stream_b);
      if (overlaps(p, q, bytes) && !f.device->event_complete(work_on_p))
        check::report(
            __FILE__, __LINE__,
            c.label + ": B got a block A freed after B's last allocation, A's work queued");
      f.alloc->deallocate(q, stream_b);
      f.alloc->deallocate(r, stream_b);
      CHECK_EQ(testing::check_invariants(*f.alloc, nullptr), std::string());
    }
  }
}

TEST("every strategy: the warm same-stream pair reuses at once and never waits") {
  for (const auto& c : testing::suite_configs()) {
    if (c.strategy == "vmm_growable") continue;  // unmaps the granule at each free (tested below)
    fixture f(c);
    const std::size_t bytes = std::min<std::size_t>(c.max_request, 4 * KiB);
    void* keep = f.alloc->allocate(bytes, stream_a);  // regions stay while the pair runs
    for (int i = 0; i < 100; ++i) f.alloc->deallocate(f.alloc->allocate(bytes, stream_a), stream_a);
    const auto calls = f.alloc->stats().device_calls;
    CHECK_EQ(calls.synchronize, 0u);
    CHECK_EQ(calls.event_record, 0u);
    f.alloc->deallocate(keep, stream_a);
  }
}

TEST("stream switches wait once per freeing stream, not once per allocation") {
  testing::suite_config slab{"slab", "slab", {{"slab_size", "1MiB"}}, 64 * KiB, 64 * MiB};
  fixture f(slab);
  for (int round = 0; round < 4; ++round) {
    const stream_t s = round % 2 ? stream_b : stream_a;
    for (int i = 0; i < 10; ++i) f.alloc->deallocate(f.alloc->allocate(1000, s), s);
  }
  // Rounds 2, 3 and 4 each start on the other stream after frees on the previous one.
  CHECK_EQ(f.alloc->stats().device_calls.synchronize, 3u);
  // A switch with no frees since the last one waits for nothing.
  void* p = f.alloc->allocate(1000, stream_a);
  void* q = f.alloc->allocate(1000, stream_b);
  CHECK_EQ(f.alloc->stats().device_calls.synchronize, 4u);  // stream_b's frees of round 4
  void* r = f.alloc->allocate(1000, stream_a);
  CHECK_EQ(f.alloc->stats().device_calls.synchronize, 4u);
  for (void* x : {p, r}) f.alloc->deallocate(x, stream_a);
  f.alloc->deallocate(q, stream_b);
}

TEST(
    "a block freed on another stream, once complete, waits for its own stream before another "
    "reuses it") {
  testing::suite_config slab{"slab", "slab", {{"slab_size", "1MiB"}}, 64 * KiB, 64 * MiB};
  fixture f(slab);
  void* p = f.alloc->allocate(1000, stream_a);
  f.alloc->deallocate(p, stream_b);  // pending on B's event
  f.device->set_time(f.device->time() + 1000000);
  const event_t later_on_a = f.device->record_event(stream_a);  // A's queue, still running
  CHECK_EQ(f.alloc->process_deferred(), 1u);
  void* q = f.alloc->allocate(1000, stream_b);
  if (overlaps(p, q, 1000)) CHECK(f.device->event_complete(later_on_a));
  f.alloc->deallocate(q, stream_b);
}

TEST("vmm_growable: a granule is unmapped only once the work queued before the free is done") {
  simulated_options o;
  auto device = make_simulated_backing(o);
  auto alloc = make_allocator("vmm_growable", *device, params{{"reserve", "256MiB"}});
  event_t work = 0;
  unmap_watch watch([&] { CHECK(device->event_complete(work)); });
  alloc->set_tracer(&watch);
  void* p = alloc->allocate(3 * MiB, stream_a);
  work = device->record_event(stream_a);  // a verify kernel on p
  alloc->deallocate(p, stream_a);
  CHECK_EQ(watch.unmaps, 1);
  // The same through trim(), with the granules kept mapped at the free.
  auto kept = make_allocator("vmm_growable", *device,
                             params{{"reserve", "256MiB"}, {"unmap_free_granules", "false"}});
  kept->set_tracer(&watch);
  void* r = kept->allocate(3 * MiB, stream_a);
  work = device->record_event(stream_a);
  kept->deallocate(r, stream_a);
  CHECK_EQ(watch.unmaps, 1);
  kept->trim();
  CHECK_EQ(watch.unmaps, 2);
  alloc->set_tracer(nullptr);
  kept->set_tracer(nullptr);
}

TEST("arena: trim() unmaps only once the work queued on the freed blocks is done") {
  simulated_options o;
  auto device = make_simulated_backing(o);
  auto alloc = make_allocator("arena", *device, params{{"reserve", "256MiB"}});
  event_t work = 0;
  unmap_watch watch([&] { CHECK(device->event_complete(work)); });
  alloc->set_tracer(&watch);
  void* p = alloc->allocate(5 * MiB, stream_a);
  work = device->record_event(stream_a);
  alloc->deallocate(p, stream_a);  // the top block: the pointer pops back
  alloc->trim();
  CHECK_EQ(watch.unmaps, 1);
  alloc->set_tracer(nullptr);
}

CHECK_MAIN
