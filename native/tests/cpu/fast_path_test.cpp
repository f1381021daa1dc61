// The bookkeeping behind the warm alloc+free paths, where the typed suite's random stress would
// only find a mistake by luck: block indices and slab ids (the strategies' cookies) that must stay
// right when regions and slabs are released and their slots reused, slab's division by a class
// size that is not a power of two, buddy's per-order solo block and candidate stack over several
// pools, the live table's erase at a slot inside long probe runs and its front slot (the entry
// inserted last, outside the hash table), and the allocator lock.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
// White box: caching's free index (a header of the core's strategies, not an installed one).
#include "../../core/strategies/caching_free_index.hpp"
#include "vramscope/address_map.hpp"
#include "vramscope/simulated_backing.hpp"
#include "vramscope/spin_lock.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

struct setup {
  std::unique_ptr<simulated_backing> device;
  std::unique_ptr<allocator> alloc;
  std::map<address_t, std::size_t> live;  // what the test holds: address -> requested bytes
  setup(const std::string& strategy, const params& p) {
    simulated_options o;
    o.capacity = 1 * GiB;
    device = make_simulated_backing(o);
    alloc = make_allocator(strategy, *device, p);
  }
  address_t allocate(std::size_t n) {
    auto a = reinterpret_cast<address_t>(alloc->allocate(n));
    live[a] = n;
    return a;
  }
  void deallocate(address_t a) {
    alloc->deallocate(reinterpret_cast<void*>(a));
    live.erase(a);
  }
  std::string invariants() const { return check_invariants(*alloc, &live); }
  // Frees every held block in a shuffled order, checking the invariants as it goes, and that a
  // second free of each is refused with the state intact: a double free, or an invalid free where
  // the memory has gone back to the device (a released slab is not remembered).
  void free_all_shuffled(std::mt19937_64& rng, bool memory_may_go_back = false) {
    std::vector<address_t> order;
    for (auto& [a, n] : live) order.push_back(a);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t i = 0; i < order.size(); ++i) {
      deallocate(order[i]);
      void* again = reinterpret_cast<void*>(order[i]);
      if (memory_may_go_back) {
        bool typed = false;
        try {
          alloc->deallocate(again);
        } catch (const double_free&) {
          typed = true;
        } catch (const invalid_free&) {
          typed = true;
        }
        CHECK(typed);
      } else {
        CHECK_THROWS_AS(alloc->deallocate(again), double_free);
      }
      if (i % 7 == 0) CHECK_EQ(invariants(), std::string());
    }
  }
};

TEST("block_pool: a trimmed region's slot is reused, and block indices stay right") {
  std::mt19937_64 rng(7);
  setup s("block_pool", {{"block_size", "64KiB"}, {"pool_size", "256KiB"}, {"max_regions", "3"}});
  std::vector<address_t> blocks;
  for (int i = 0; i < 12; ++i) blocks.push_back(s.allocate(64 * KiB));  // three regions
  CHECK_EQ(s.alloc->stats().reserved_live, 768 * KiB);
  // Empty the second region obtained (blocks 4..7: each region hands out its blocks in order).
  for (int i = 4; i < 8; ++i) s.deallocate(blocks[i]);
  s.alloc->trim();
  CHECK_EQ(s.alloc->stats().reserved_live, 512 * KiB);
  CHECK_EQ(s.invariants(), std::string());
  // The pool grows again into the freed slot; every block, old and new, frees correctly.
  for (int i = 0; i < 4; ++i) s.allocate(64 * KiB);
  CHECK_EQ(s.alloc->stats().reserved_live, 768 * KiB);
  CHECK_THROWS_AS(s.allocate(64 * KiB), out_of_memory);
  CHECK_EQ(s.invariants(), std::string());
  s.free_all_shuffled(rng);
  s.alloc->trim();
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);
  CHECK_EQ(s.invariants(), std::string());
}

TEST("slab: ids of released slabs are reused, and frees find their slab and slot") {
  std::mt19937_64 rng(11);
  // Classes that are not powers of two: the slot index is an exact division by multiplication.
  setup s("slab",
          {{"classes", "768,1280,3328"}, {"slab_size", "16KiB"}, {"release_empty_slabs", "true"}});
  std::uniform_int_distribution<std::size_t> size(1, 3328);
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 200; ++i) s.allocate(size(rng));
    CHECK_EQ(s.invariants(), std::string());
    // Free about half, so that some slabs empty (and go back) while others stay partial.
    std::vector<address_t> held;
    for (auto& [a, n] : s.live) held.push_back(a);
    std::shuffle(held.begin(), held.end(), rng);
    for (std::size_t i = 0; i < held.size() / 2; ++i) s.deallocate(held[i]);
    CHECK_EQ(s.invariants(), std::string());
  }
  s.free_all_shuffled(rng, true);
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);  // every slab went back as it emptied
  CHECK_EQ(s.invariants(), std::string());
}

TEST("buddy: per-order solo blocks and candidate stacks agree over several pools") {
  std::mt19937_64 rng(13);
  setup s("buddy", {{"pool_size", "1MiB"}, {"min_block", "256"}, {"max_pools", "3"}});
  std::uniform_int_distribution<int> shift(8, 18);  // 256 B .. 256 KiB, then jittered
  std::vector<address_t> held;
  for (int op = 0; op < 20000; ++op) {
    if (held.empty() || rng() % 5 < 3) {
      const std::size_t n = (std::size_t{1} << shift(rng)) - rng() % 200;
      try {
        held.push_back(s.allocate(n));
      } catch (const out_of_memory&) {
        CHECK_EQ(s.invariants(), std::string());  // unchanged by the failure
      }
    } else {
      // Mostly the block allocated last (LIFO, the cascades), sometimes any.
      const std::size_t i = rng() % 4 == 0 ? rng() % held.size() : held.size() - 1;
      s.deallocate(held[i]);
      held[i] = held.back();
      held.pop_back();
    }
    if (op % 250 == 0) CHECK_EQ(s.invariants(), std::string());
  }
  s.free_all_shuffled(rng);
  s.alloc->trim();
  CHECK_EQ(s.alloc->stats().reserved_live, 0u);
}

// Runs `ops` random operations on `table` and on a std::map, checking after each that they agree.
// Keys come from [1, key_range] × 256: few distinct keys give long probe runs that wrap around.
// Besides the live table's own calls (locate, insert_new, value_at, erase_at) it mixes in the
// others (insert over an existing key, erase by key, find, size, a full walk, clear) and, for
// the front slot, frees of the key inserted last (the LIFO case it serves), so that entries move
// between the slot and the table at every kind of step, growth included.
template <class Table>
void probe_against_std_map(Table& table, std::uint64_t seed, int ops, std::uint64_t key_range,
                           int clear_every) {
  std::mt19937_64 rng(seed);
  std::map<address_t, std::uint64_t> reference;
  std::uniform_int_distribution<std::uint64_t> key(1, key_range);
  std::uniform_int_distribution<int> kind(0, 99);
  address_t last_inserted = 0;
  auto same_contents = [&] {
    std::size_t seen = 0;
    table.for_each([&](address_t k, std::uint64_t v) {
      ++seen;
      CHECK(reference.count(k) == 1 && reference.at(k) == v);
    });
    CHECK_EQ(seen, reference.size());
  };
  for (int op = 0; op < ops; ++op) {
    const int what = kind(rng);
    const std::uint64_t value = static_cast<std::uint64_t>(op) * 7 + 1;
    if (clear_every > 0 && op % clear_every == clear_every - 1) {
      table.clear();
      reference.clear();
    } else if (what < 15 && last_inserted != 0 && reference.count(last_inserted) == 1) {
      // The LIFO free: the entry inserted last, found by locate and erased at its position.
      const std::size_t at = table.locate(last_inserted);
      REQUIRE(at != table.npos);
      CHECK_EQ(table.value_at(at), reference.at(last_inserted));
      table.erase_at(at);
      reference.erase(last_inserted);
    } else if (what < 20) {
      const address_t k = key(rng) * 256;
      table.insert(k, value);  // overwrites where present
      reference[k] = value;
      last_inserted = k;
    } else if (what < 25) {
      const address_t k = key(rng) * 256;
      CHECK_EQ(table.erase(k), reference.erase(k) == 1);
    } else if (what < 30) {
      const address_t k = key(rng) * 256;
      const auto* found = table.find(k);
      CHECK_EQ(found != nullptr, reference.count(k) == 1);
      if (found != nullptr) CHECK_EQ(*found, reference.at(k));
    } else if (what < 31) {
      same_contents();
    } else {
      const address_t k = key(rng) * 256;
      const std::size_t at = table.locate(k);
      CHECK_EQ(at != table.npos, reference.count(k) == 1);
      if (at == table.npos) {
        table.insert_new(k, value);
        reference[k] = value;
        last_inserted = k;
      } else {
        CHECK_EQ(table.value_at(at), reference.at(k));
        table.erase_at(at);
        reference.erase(k);
      }
    }
    CHECK_EQ(table.size(), reference.size());
    CHECK_EQ(table.empty(), reference.empty());
  }
  same_contents();
}

TEST("address_map: locate, erase_at and insert_new agree with std::map inside long probe runs") {
  address_map<std::uint64_t> table;
  probe_against_std_map(table, 17, 200000, 3000, 0);
}

TEST(
    "address_map with a front slot: agrees with std::map through inserts, LIFO and other frees, "
    "walks, clears and growth") {
  {
    address_map<std::uint64_t, true> table;
    probe_against_std_map(table, 17, 200000, 3000, 0);
  }
  {
    // Clears now and then, so that the table grows again from a fuller state with the slot in use.
    address_map<std::uint64_t, true> table;
    probe_against_std_map(table, 5, 200000, 3000, 20011);
  }
  {
    // Growth one insert at a time: every insert_new moves the previous entry from the slot into the
    // table, and the growths happen with the slot holding an entry.
    address_map<std::uint64_t, true> table;
    std::map<address_t, std::uint64_t> reference;
    for (std::uint64_t i = 1; i <= 5000; ++i) {
      table.insert_new(i * 256, i);
      reference[i * 256] = i;
      CHECK_EQ(table.size(), reference.size());
      if (i % 977 == 0) {
        std::size_t seen = 0;
        table.for_each([&](address_t k, std::uint64_t v) {
          ++seen;
          CHECK_EQ(reference.at(k), v);
        });
        CHECK_EQ(seen, reference.size());
      }
    }
    for (std::uint64_t i = 1; i <= 5000; ++i) CHECK_EQ(*table.find(i * 256), i);
    // The slot's entry is found, erased and gone like any other, and an absent key is absent.
    CHECK(table.erase(5000 * 256));
    CHECK(table.find(5000 * 256) == nullptr);
    CHECK(!table.erase(5000 * 256));
    CHECK_EQ(table.locate(5001 * 256), table.npos);
    CHECK_EQ(table.size(), 4999u);
    table.clear();
    CHECK(table.empty());
    CHECK(table.find(1 * 256) == nullptr);
  }
  {
    // A probe that misses calls the caller's handler (which throws, as reject_free does), also
    // when the slot is empty or holds another key; a hit in the slot or the table does not.
    address_map<std::uint64_t, true> table;
    auto missing = [] { throw std::out_of_range("not in the map"); };
    table.insert_new(256, 1);
    CHECK_EQ(table.value_at(table.locate_or(256, missing)), 1u);
    table.insert_new(512, 2);  // 256 moves into the table
    CHECK_EQ(table.value_at(table.locate_or(256, missing)), 1u);
    CHECK_EQ(table.value_at(table.locate_or(512, missing)), 2u);
    CHECK_THROWS_AS(table.locate_or(768, missing), std::out_of_range);
    table.erase_at(table.locate(512));  // empties the slot
    CHECK_THROWS_AS(table.locate_or(512, missing), std::out_of_range);
    CHECK_EQ(table.size(), 1u);
  }
}

TEST(
    "caching free index: take_exact, insert, erase, lower_bound and ascending agree with an "
    "ordered (size, address) set, the front slot included") {
  using caching_detail::free_index;
  using caching_detail::no_block;
  std::mt19937_64 rng(23);
  free_index index;
  // The set PyTorch's BlockPool keeps: (size, address) in order, each with its node.
  std::map<std::pair<std::uint64_t, address_t>, std::uint32_t> reference;
  std::map<std::uint32_t, std::uint32_t> hint_of;  // node -> the hint insert returned
  std::uniform_int_distribution<std::uint64_t> size_steps(1, 120);  // sizes come and go
  std::uniform_int_distribution<int> kind(0, 99);
  std::set<address_t> used_addresses;
  std::uint32_t next_node = 0;
  auto check_contents = [&] {
    std::vector<free_index::entry> listed;
    index.ascending(listed);
    REQUIRE(listed.size() == reference.size());
    std::size_t i = 0;
    std::uint64_t bytes = 0;
    for (auto& [key, node] : reference) {
      CHECK_EQ(listed[i].size, key.first);
      CHECK_EQ(listed[i].address, key.second);
      CHECK_EQ(listed[i].node, node);
      bytes += key.first;
      ++i;
    }
    CHECK_EQ(index.count(), reference.size());
    CHECK_EQ(index.bytes(), bytes);
  };
  using reference_entry = std::map<std::pair<std::uint64_t, address_t>, std::uint32_t>::iterator;
  auto remove_reference = [&](reference_entry it) {
    hint_of.erase(it->second);
    reference.erase(it);
  };
  std::uint32_t last_inserted = no_block;
  std::pair<std::uint64_t, address_t> last_key{};
  for (int op = 0; op < 300000; ++op) {
    const int what = kind(rng);
    const std::uint64_t size = size_steps(rng) * 512;
    if (what < 35 || reference.empty()) {
      const std::uint32_t node = next_node++;
      // Random, so that the slot's block is sometimes above, sometimes below a bucket's of its size.
      address_t address;
      do address = (rng() % 4000000 + 1) << 20;
      while (!used_addresses.insert(address).second);
      // A hint: none, or another node's (stale or not: a hint only saves a lookup).
      const std::uint32_t hint =
          what % 3 == 0 || hint_of.empty() ? free_index::no_bucket : hint_of.begin()->second;
      hint_of[node] = index.insert(size, address, node, hint);
      reference[{size, address}] = node;
      last_inserted = node;
      last_key = {size, address};
    } else if (what < 50 && last_inserted != no_block && reference.count(last_key) == 1) {
      // The split/merge round trip: the block inserted last leaves again at once.
      const auto it = reference.find(last_key);
      if (what % 2 == 0) {
        index.erase(last_key.first, last_key.second, hint_of[it->second]);
      } else {
        free_index::found f;
        REQUIRE(index.lower_bound(last_key.first, f));
        const auto expected = reference.lower_bound({last_key.first, 0});
        CHECK_EQ(f.block.node, expected->second);
        index.take(f);
        remove_reference(expected);
        continue;
      }
      remove_reference(it);
    } else if (what < 65) {
      // Exact sizes that exist half of the time: pick one of a held block.
      auto it = reference.begin();
      std::advance(it, static_cast<long>(rng() % reference.size()));
      const std::uint64_t wanted = what % 2 == 0 ? it->first.first : size;
      const std::uint32_t taken = index.take_exact(wanted);
      const auto expected = reference.lower_bound({wanted, 0});
      if (expected == reference.end() || expected->first.first != wanted) {
        CHECK_EQ(taken, no_block);
      } else {
        CHECK_EQ(taken, expected->second);
        remove_reference(expected);
      }
    } else if (what < 80) {
      free_index::found f;
      const bool found = index.lower_bound(size, f);
      const auto expected = reference.lower_bound({size, 0});
      CHECK_EQ(found, expected != reference.end());
      if (found && expected != reference.end()) {
        CHECK_EQ(f.block.node, expected->second);
        CHECK_EQ(f.block.size, expected->first.first);
        CHECK_EQ(f.block.address, expected->first.second);
        index.take(f);
        remove_reference(expected);
      }
    } else if (what < 98) {
      auto it = reference.begin();
      std::advance(it, static_cast<long>(rng() % reference.size()));
      index.erase(it->first.first, it->first.second,
                  what % 2 == 0 ? hint_of[it->second] : free_index::no_bucket);
      remove_reference(it);
    } else {
      check_contents();
    }
  }
  check_contents();
}

// The caller holds `lock`: another thread's lock() waits until the caller gives it back.
void check_other_thread_waits(spin_lock& lock) {
  std::atomic<bool> entered{false};
  std::thread other([&] {
    lock.lock();
    entered = true;
    lock.unlock();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(!entered.load());
  lock.unlock();
  other.join();
  CHECK(entered.load());
}

// Plain increments under the lock from `threads` new threads (and the caller too, when asked):
// none is lost.
void check_no_increment_lost(spin_lock& lock, int threads, bool caller_too) {
  constexpr int each = 30000;
  std::uint64_t counter = 0;
  auto work = [&] {
    for (int i = 0; i < each; ++i) {
      lock.lock();
      ++counter;
      lock.unlock();
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(work);
  if (caller_too) work();
  for (auto& w : workers) w.join();
  CHECK_EQ(counter, static_cast<std::uint64_t>(each) *
                        static_cast<std::uint64_t>(threads + (caller_too ? 1 : 0)));
}

TEST("spin_lock: excludes across threads, and a thread started while it is held waits") {
  spin_lock lock;
  lock.lock();
  check_other_thread_waits(lock);
  check_no_increment_lost(lock, 4, false);
}

// The biased lock (spin_lock.hpp): once other threads exist, the first thread to take the lock
// owns it and takes it with plain stores; another thread's first lock revokes that for good.
TEST(
    "spin_lock: biased to its first user; another thread's lock waits for the owner, then "
    "revokes") {
  std::thread([] {}).join();  // the process has had a second thread: no single-thread shortcut
  spin_lock lock;
  CHECK(lock.bias() == spin_lock::bias_state::none);
  lock.lock();
  lock.unlock();
  if (!spin_lock::biasing_available()) {
    std::printf(
        "  (no bias in this build or process: membarrier(2) unavailable, or ThreadSanitizer)\n");
    CHECK(lock.bias() != spin_lock::bias_state::biased);
  } else {
    CHECK(lock.bias() == spin_lock::bias_state::biased);
  }
  lock.lock();  // the owner's plain-store path where biased
  check_other_thread_waits(lock);
  if (spin_lock::biasing_available()) CHECK(lock.bias() == spin_lock::bias_state::revoked);
  else CHECK(lock.bias() != spin_lock::bias_state::biased);
  // After the revocation the owner and the others share one lock.
  check_no_increment_lost(lock, 3, true);
}

TEST("spin_lock: a revocation racing the owner's locks and unlocks loses no update (400 races)") {
  std::mt19937 rng(7);
  std::uint64_t biased_races = 0;
  for (int round = 0; round < 400; ++round) {
    spin_lock lock;
    std::uint64_t counter = 0;
    volatile bool inside = false;
    std::atomic<int> overlaps{0};
    std::atomic<bool> owner_ready{false}, stop{false};
    std::atomic<std::uint64_t> owner_ops{0};
    std::atomic<bool> biased_first{false};
    const unsigned delay = rng() % 4000;
    const int contenders = 1 + static_cast<int>(rng() % 2);
    auto once = [&] {
      lock.lock();
      if (inside) overlaps.fetch_add(1, std::memory_order_relaxed);
      inside = true;
      ++counter;
      inside = false;
      lock.unlock();
    };
    // The contenders wait for the owner, then start after a random delay, so that their first lock
    // (the revocation) lands at a different point of the owner's loop each round.
    std::vector<std::thread> others;
    for (int c = 0; c < contenders; ++c)
      others.emplace_back([&, c] {
        while (!owner_ready.load()) std::this_thread::yield();
        for (unsigned spin = 0; spin < delay * static_cast<unsigned>(c + 1); ++spin)
          std::atomic_signal_fence(std::memory_order_seq_cst);
        for (int i = 0; i < 2000; ++i) once();
      });
    std::thread owner([&] {
      once();  // becomes the owner (where biasing is available)
      biased_first = lock.bias() == spin_lock::bias_state::biased;  // nobody else has locked yet
      owner_ready = true;
      std::uint64_t n = 1;
      while (!stop.load(std::memory_order_relaxed)) {
        once();
        ++n;
      }
      owner_ops = n;
    });
    for (auto& o : others) o.join();
    stop = true;
    owner.join();
    if (biased_first.load()) ++biased_races;
    CHECK_EQ(overlaps.load(), 0);
    CHECK_EQ(counter, owner_ops.load() + 2000u * static_cast<unsigned>(contenders));
    CHECK(lock.bias() != spin_lock::bias_state::biased);
  }
  if (spin_lock::biasing_available()) CHECK_EQ(biased_races, 400u);
}

}  // namespace

CHECK_MAIN
