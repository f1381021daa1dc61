// try_allocate, the replay's failure path: a request that does not fit returns nullptr, counted and
// traced as a failure, where allocate throws out_of_memory. For every strategy the two agree on
// which requests fail and on every counter; the caching strategy (the what-if grid's rows) and
// the replay loop refuse without throwing at all, which is what keeps a replay under a limit,
// where most requests may fail, as fast as one where none do. Throws are counted by wrapping the
// C++ runtime's __cxa_throw at link time, so these tests assert on work done, not on time.
#include <atomic>
#include <string>
#include <vector>

#include "check.hpp"
#include "suite_configs.hpp"
#include "vramscope/replay.hpp"
#include "vramscope/simulated_backing.hpp"

namespace {
std::atomic<std::uint64_t> throws{0};
}

// Every throw expression of this program (the core is linked in statically) calls this first: the
// test links with --wrap=__cxa_throw (CMakeLists.txt), which sends each reference to __cxa_throw
// here and __real___cxa_throw to the C++ runtime's own, shared or static.
extern "C" [[noreturn]] void __real___cxa_throw(void* object, void* type,
                                                void (*destructor)(void*));
extern "C" [[noreturn]] void __wrap___cxa_throw(void* object, void* type,
                                                void (*destructor)(void*)) {
  throws.fetch_add(1, std::memory_order_relaxed);
  __real___cxa_throw(object, type, destructor);
}

using namespace vramscope;
using namespace vramscope::testing;

namespace {

constexpr std::uint8_t k_alloc = static_cast<std::uint8_t>(request_kind::alloc);

// One 512-byte block kept on each of `streams` streams: under 8 MiB the caching strategy gives
// the first four streams a 2 MiB segment each and must refuse every later one.
request_column_vectors one_block_per_stream(std::uint32_t streams) {
  request_column_vectors t;
  for (std::uint32_t s = 0; s < streams; ++s) {
    t.kind.push_back(k_alloc);
    t.id.push_back(s);
    t.size.push_back(512);
    t.stream.push_back(s);
    t.time.push_back(1000.0 * s);
  }
  return t;
}

}  // namespace

TEST(
    "try_allocate: a request over the limit returns nullptr, counted, with no exception; "
    "allocate still throws out_of_memory for it") {
  simulated_options o;
  o.capacity = 8 * MiB;
  auto backing = make_simulated_backing(o);
  auto a = make_allocator("caching", *backing, {{"preset", "pytorch"}});
  for (stream_t s = 0; s < 4; ++s) CHECK(a->try_allocate(512, s + 1) != nullptr);
  const std::uint64_t before = throws.load();
  for (stream_t s = 4; s < 1004; ++s) CHECK(a->try_allocate(512, s + 1) == nullptr);
  CHECK_EQ(throws.load() - before, std::uint64_t{0});
  allocator_stats st = a->stats();
  CHECK_EQ(st.failures, std::uint64_t{1000});
  CHECK_EQ(st.live_blocks, std::uint64_t{4});
  CHECK_EQ(st.reserved_live, std::uint64_t{8 * MiB});
  // The count sees the throws there are: allocate's refusal is one at least.
  CHECK_THROWS_AS(a->allocate(512, 2000), out_of_memory);
  CHECK(throws.load() - before >= 1);
  try {
    a->allocate(512, 2001);
  } catch (const out_of_memory& e) {
    CHECK(std::string(e.what()).find("does not fit on the device") != std::string::npos);
    CHECK_EQ(e.requested(), std::size_t{512});
  }
  CHECK_EQ(a->stats().failures, std::uint64_t{1002});
}

TEST(
    "try_allocate and allocate agree on every strategy: the same requests fail, the same "
    "counters after each") {
  for (const suite_config& c : suite_configs()) {
    simulated_options o;
    o.capacity = c.capacity / 4;
    auto quiet_backing = make_simulated_backing(o);
    auto loud_backing = make_simulated_backing(o);
    auto quiet = make_allocator(c.strategy, *quiet_backing, c.parameters);
    auto loud = make_allocator(c.strategy, *loud_backing, c.parameters);
    // Growing requests on two streams, every third one freed: some fit, the largest do not.
    std::vector<void*> quiet_live, loud_live;
    for (std::size_t i = 0; i < 64; ++i) {
      const std::size_t bytes = 256 + (c.max_request - 256) * i / 63;
      const stream_t s = 1 + i % 2;
      void* q = quiet->try_allocate(bytes, s);
      void* l = nullptr;
      bool threw = false;
      try {
        l = loud->allocate(bytes, s);
      } catch (const out_of_memory&) {
        threw = true;
      }
      CHECK_EQ(q == nullptr, threw);
      if (q) quiet_live.push_back(q);
      if (l) loud_live.push_back(l);
      if (i % 3 == 2 && !quiet_live.empty() && !loud_live.empty()) {
        quiet->deallocate(quiet_live.front(), s);
        quiet_live.erase(quiet_live.begin());
        loud->deallocate(loud_live.front(), s);
        loud_live.erase(loud_live.begin());
      }
      const allocator_stats qs = quiet->stats(), ls = loud->stats();
      CHECK_EQ(qs.failures, ls.failures);
      CHECK_EQ(qs.reserved_live, ls.reserved_live);
      CHECK_EQ(qs.rounded_live, ls.rounded_live);
      CHECK_EQ(qs.live_blocks, ls.live_blocks);
    }
    if (check::failures_in_case() != 0) {
      check::report(__FILE__, __LINE__, "in " + c.label);
      return;
    }
  }
}

TEST(
    "replay: 2,000 streams under 8 MiB, every caching row fails 1,996 requests without one "
    "exception") {
  const request_column_vectors t = one_block_per_stream(2000);
  std::vector<replay_target> targets = {
      {"caching", "caching", {{"preset", "pytorch"}}, {}, {}},
      {"expandable", "caching", {{"preset", "pytorch"}, {"expandable_segments", "true"}}, {}, {}},
      {"max_reserved",
       "caching",
       {{"preset", "pytorch"}, {"max_reserved", "8MiB"}, {"garbage_collection_threshold", "0.6"}},
       {},
       {}},
  };
  replay_options o;
  o.capacity = 8 * MiB;
  o.fragmentation = false;
  const std::uint64_t before = throws.load();
  const std::vector<replay_result> results = replay(t.columns(), targets, o);
  CHECK_EQ(throws.load() - before, std::uint64_t{0});
  for (const replay_result& r : results) {
    CHECK_EQ(r.summary.failures, std::uint64_t{1996});
    CHECK_EQ(r.summary.peak_reserved, std::uint64_t{8 * MiB});
  }
}

CHECK_MAIN
