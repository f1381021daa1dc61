// The tracers themselves: ring_tracer (streaming stores into a ring, what a long recording keeps)
// must hold exactly the events vector_tracer sees for the same calls, in order, before and after
// its ring wraps, and from another thread once the writer has published.
#include <memory>
#include <thread>
#include <vector>

#include "check.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"
#include "vramscope/tracer.hpp"

using namespace vramscope;

namespace {

bool same(const trace_event& a, const trace_event& b) {
  return a.op == b.op && a.aux == b.aux && a.stream == b.stream && a.address == b.address &&
         a.size == b.size && a.requested == b.requested;
}

// The same calls on two allocators of one strategy, one traced by each tracer.
template <class Tracer>
void drive(Tracer& t, const char* strategy) {
  auto device = make_simulated_backing({});
  auto a = make_allocator(strategy, *device, {});
  a->set_tracer(&t);
  std::vector<void*> held;
  for (int i = 0; i < 300; ++i) {
    held.push_back(a->allocate(256 + 512 * static_cast<std::size_t>(i % 7), i % 3 == 0 ? 0 : 1));
    if (i % 4 == 3) {
      a->deallocate(held[held.size() / 2]);
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(held.size() / 2));
    }
  }
  for (void* p : held) a->deallocate(p);
  a->set_tracer(nullptr);
}

}  // namespace

TEST("ring_tracer holds what vector_tracer sees, in order, before its ring wraps") {
  for (const char* strategy : {"block_pool", "caching", "buddy"}) {
    vector_tracer all;
    ring_tracer ring(1 << 14);
    drive(all, strategy);
    drive(ring, strategy);
    const std::vector<trace_event> kept = ring.events();
    REQUIRE(ring.laps() == 0);
    CHECK_EQ(kept.size(), all.size());
    for (std::size_t i = 0; i < kept.size() && i < all.size(); ++i) REQUIRE(same(kept[i], all[i]));
  }
}

TEST("after wrapping, ring_tracer keeps the last `capacity` events, oldest first") {
  vector_tracer all;
  ring_tracer ring(37);  // not a divisor of the event count: the ring wraps mid-way
  drive(all, "caching");
  drive(ring, "caching");
  REQUIRE(all.size() > 3 * 37);
  CHECK(ring.laps() >= 3);
  const std::vector<trace_event> kept = ring.events();
  CHECK_EQ(kept.size(), std::size_t{37});
  for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(same(kept[i], all[all.size() - kept.size() + i]));
}

TEST("another thread reads the ring after the writer publishes") {
  vector_tracer all;
  drive(all, "slab");
  ring_tracer ring(1 << 14);
  std::thread writer([&] {
    drive(ring, "slab");
    tracer::publish();
  });
  writer.join();  // the join orders too; publish() is what a live reader would rely on
  const std::vector<trace_event> kept = ring.events();
  CHECK_EQ(kept.size(), all.size());
  for (std::size_t i = 0; i < kept.size() && i < all.size(); ++i) REQUIRE(same(kept[i], all[i]));
}

CHECK_MAIN
