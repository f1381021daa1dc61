// The tracers' buffers: the ring tracer's staging buffer moves every event into the ring in order,
// wrapping at its end and counting laps, whatever the staging and ring sizes; the vector tracer
// keeps every event as it grows.
#include <cstdint>

#include "check.hpp"
#include "vramscope/tracer.hpp"

using namespace vramscope;

namespace {

void append_numbered(tracer& t, std::uint64_t i) {
  t.append(trace_op::alloc, static_cast<std::uint32_t>(i), 0, 0x1000 + i * 256, i, i);
}

}  // namespace

TEST("the ring tracer keeps the newest events in order, whatever its staging and ring sizes") {
  for (std::size_t capacity : {1u, 7u, 64u, 1000u}) {
    for (std::size_t staging : {1u, 3u, 64u, 512u, 5000u}) {
      for (std::uint64_t n : {0ull, 1ull, 6ull, 63ull, 64ull, 65ull, 999ull, 4321ull}) {
        ring_tracer t(capacity, staging);
        for (std::uint64_t i = 0; i < n; ++i) append_numbered(t, i);
        t.flush();
        CHECK_EQ(t.total(), n);
        CHECK_EQ(t.laps(), n / capacity);
        const std::uint64_t kept = n < capacity ? n : capacity;
        for (std::uint64_t k = 0; k < kept; ++k) {
          const trace_event& e = t.recent(static_cast<std::size_t>(k));
          const std::uint64_t i = n - 1 - k;
          CHECK_EQ(e.size, i);
          CHECK_EQ(e.address, 0x1000 + i * 256);
          CHECK_EQ(e.aux, static_cast<std::uint32_t>(i));
        }
      }
    }
  }
}

TEST("the vector tracer keeps every event as it grows") {
  vector_tracer t(2);
  for (std::uint64_t i = 0; i < 1000; ++i) append_numbered(t, i);
  REQUIRE(t.size() == 1000);
  for (std::uint64_t i = 0; i < 1000; ++i) CHECK_EQ(t[i].size, i);
}

CHECK_MAIN
