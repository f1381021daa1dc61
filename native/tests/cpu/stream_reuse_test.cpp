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
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

constexpr stream_t stream_a = 0x1000;

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
  auto kept = make_allocator("vmm_growable", *device, params{{"reserve", "256MiB"}, {"unmap_free_granules", "false"}});
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
