// Eight threads hammer one thread-safe caching allocator, each preset in turn: random sizes, random
// streams, and a shared queue so that most blocks are freed by another thread than the one that
// allocated them (and some on another stream). Every live block is recorded in a host-side shadow
// map with a cookie: a new block must not overlap any live one, and the cookie must be intact when
// the block is freed. A ninth thread walks the layout meanwhile. At the end the shadow map must
// equal the allocator's live blocks (invariants.hpp), and everything must free and trim to zero.
// Bounded by a deadline so that it stays a few seconds, also under ThreadSanitizer.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

constexpr int worker_count = 8;
constexpr std::size_t max_live = 4000;

struct live_record {
  std::size_t size;
  std::uint64_t cookie;
};

// The shadow of what is live: address -> record. Guarded by its own mutex, never the allocator's.
struct shadow_map {
  std::mutex mutex;
  std::map<address_t, live_record> blocks;
  std::vector<std::string> problems;

  void add(address_t a, live_record r) {
    std::lock_guard<std::mutex> lock(mutex);
    auto next = blocks.lower_bound(a);
    if (next != blocks.end() && next->first < a + r.size)
      problems.push_back("block " + format_address(a) + " overlaps live " +
                         format_address(next->first));
    if (next != blocks.begin() && std::prev(next)->first + std::prev(next)->second.size > a)
      problems.push_back("block " + format_address(a) + " overlaps live " +
                         format_address(std::prev(next)->first));
    blocks.emplace(a, r);
  }
  // Called before the block goes back to the allocator, so that a thread that receives the same
  // address next finds it gone.
  void remove(address_t a, std::uint64_t cookie) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = blocks.find(a);
    if (it == blocks.end()) {
      problems.push_back("freeing " + format_address(a) + ", which the shadow map does not hold");
      return;
    }
    if (it->second.cookie != cookie)
      problems.push_back("cookie of " + format_address(a) + " changed");
    blocks.erase(it);
  }
};

struct handoff {
  address_t address;
  std::uint64_t cookie;
  stream_t stream;
};

// Blocks allocated by one thread and freed by whichever takes them.
struct shared_queue {
  std::mutex mutex;
  std::deque<handoff> items;
  void push(handoff h) {
    std::lock_guard<std::mutex> lock(mutex);
    items.push_back(h);
  }
  bool pop(handoff& out, std::mt19937_64& rng) {
    std::lock_guard<std::mutex> lock(mutex);
    if (items.empty()) return false;
    // Mostly the oldest (another thread's, most likely); sometimes any.
    std::size_t i = rng() % 4 == 0 ? rng() % items.size() : 0;
    out = items[i];
    items[i] = items.front();
    items.pop_front();
    return true;
  }
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mutex);
    return items.size();
  }
};

double seconds_per_preset() {
  const char* env = std::getenv("VRAMSCOPE_THREADS_SECONDS");
  return env ? std::atof(env) : 1.5;
}

void stress(const std::string& preset) {
  simulated_options o;
  o.capacity = 4 * GiB;
  o.completion_delay_ns =
      0;  // cross-stream frees complete at the next allocation: no clock to share
  auto device = make_simulated_backing(o);
  auto alloc = make_allocator("caching", *device, {{"preset", preset}});
  REQUIRE(alloc->thread_safe());

  shadow_map shadow;
  shared_queue queue;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> allocations{0}, frees{0}, cross_thread{0}, ooms{0};
  std::atomic<std::uint64_t> observer_walks{0};
  std::mutex observer_problems_mutex;
  std::vector<std::string> observer_problems;

  auto worker = [&](int id) {
    std::mt19937_64 rng(0xcafe + static_cast<unsigned>(id));
    const double log_max = std::log(static_cast<double>(16 * MiB));
    std::uint64_t mine = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      bool do_alloc = queue.size() < max_live && rng() % 100 < 55;
      if (do_alloc) {
        std::size_t n = static_cast<std::size_t>(
            std::exp(std::uniform_real_distribution<double>(0, log_max)(rng)));
        stream_t s = 1 + rng() % 3;
        void* p;
        try {
          p = alloc->allocate(n, s);
        } catch (const out_of_memory&) {
          ++ooms;
          continue;
        }
        std::uint64_t cookie = (static_cast<std::uint64_t>(id) << 56) | ++mine;
        shadow.add(reinterpret_cast<address_t>(p), {n, cookie});
        queue.push({reinterpret_cast<address_t>(p), cookie, s});
        ++allocations;
      } else {
        handoff h;
        if (!queue.pop(h, rng)) continue;
        if (static_cast<int>(h.cookie >> 56) != id) ++cross_thread;
        shadow.remove(h.address, h.cookie);
        // Usually on its own stream; one in eight on another, which defers it.
        stream_t s = rng() % 8 == 0 ? h.stream % 3 + 1 : h.stream;
        alloc->deallocate(reinterpret_cast<void*>(h.address), s);
        ++frees;
      }
    }
  };

  auto observer = [&] {
    while (!stop.load(std::memory_order_relaxed)) {
      layout_snapshot s = snapshot(*alloc);  // one locked walk: must be consistent in itself
      std::sort(s.blocks.begin(), s.blocks.end(),
                [](const block_info& a, const block_info& b) { return a.address < b.address; });
      std::uint64_t in_regions = 0, in_blocks = 0;
      for (auto& r : s.regions) in_regions += r.size;
      for (std::size_t i = 0; i < s.blocks.size(); ++i) {
        in_blocks += s.blocks[i].size;
        if (i > 0 && s.blocks[i - 1].address + s.blocks[i - 1].size > s.blocks[i].address) {
          std::lock_guard<std::mutex> lock(observer_problems_mutex);
          observer_problems.push_back("walk shows overlapping blocks at " +
                                      format_address(s.blocks[i].address));
        }
      }
      if (in_blocks != in_regions) {
        std::lock_guard<std::mutex> lock(observer_problems_mutex);
        observer_problems.push_back("walk's blocks do not tile its regions");
      }
      (void)alloc->stats();
      ++observer_walks;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };

  std::vector<std::thread> threads;
  for (int i = 0; i < worker_count; ++i) threads.emplace_back(worker, i);
  threads.emplace_back(observer);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds_per_preset()));
  stop = true;
  for (auto& t : threads) t.join();

  for (auto& p : shadow.problems) ::check::report(__FILE__, __LINE__, preset + ": " + p);
  for (auto& p : observer_problems) ::check::report(__FILE__, __LINE__, preset + ": " + p);
  CHECK(allocations.load() > 1000);
  CHECK(cross_thread.load() > 0);
  CHECK(observer_walks.load() > 0);

  // What the shadow holds is exactly what the allocator has live.
  alloc->synchronize_deferred();
  std::map<address_t, std::size_t> live;
  for (auto& [a, r] : shadow.blocks) live[a] = r.size;
  std::string broken = check_invariants(*alloc, &live);
  if (!broken.empty()) ::check::report(__FILE__, __LINE__, broken);
  auto s = alloc->stats();
  CHECK_EQ(s.allocations, allocations.load());
  CHECK_EQ(s.deallocations, frees.load());
  CHECK_EQ(s.live_blocks, shadow.blocks.size());

  // Everything frees, and the cache trims to nothing.
  for (auto& [a, r] : shadow.blocks) alloc->deallocate(reinterpret_cast<void*>(a), 0);
  alloc->synchronize_deferred();
  alloc->trim();
  s = alloc->stats();
  CHECK_EQ(s.live_blocks, 0u);
  CHECK_EQ(s.pending_blocks, 0u);
  CHECK_EQ(s.reserved_live, 0u);
  CHECK_EQ(s.requested_live, 0u);
  CHECK(check_invariants(*alloc, nullptr).empty());
  std::fprintf(stderr,
               "  %s: %llu allocations, %llu frees (%llu by another thread), %llu out-of-memory, "
               "%llu walks, peak reserved %s\n",
               preset.c_str(), (unsigned long long)allocations.load(),
               (unsigned long long)frees.load(), (unsigned long long)cross_thread.load(),
               (unsigned long long)ooms.load(), (unsigned long long)observer_walks.load(),
               format_bytes(s.reserved_peak).c_str());
}

TEST(
    "8 threads, cross-thread and cross-stream frees: no overlap, cookies intact, stats exact "
    "(pow2)") {
  stress("pow2");
}

TEST(
    "8 threads, cross-thread and cross-stream frees: no overlap, cookies intact, stats exact "
    "(pytorch)") {
  stress("pytorch");
}

}  // namespace

CHECK_MAIN
