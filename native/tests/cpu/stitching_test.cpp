// stitching's own policy on the simulated backing: a request no free block fits is served by
// moving free chunks of several segments into one new range, with no physical memory obtained
// where the free chunks suffice (where caching with PyTorch's policy grows); only the shortfall
// is mapped where they do not; small requests, requests under fragment_limit, stitch_limit 0 and
// other streams' chunks never stitch; the map shows the holes and the stitched range; a refused
// device gets every free chunk back before the last try; a request that may be stitched maps only
// its own chunks where PyTorch's segment no longer fits; and random load under several settings.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "check.hpp"
#include "invariants.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;
using namespace vramscope::testing;

namespace {

struct setup {
  std::unique_ptr<simulated_backing> device;
  vector_tracer events;
  std::unique_ptr<allocator> alloc;
  std::map<address_t, std::size_t> live;
  setup(const std::string& strategy, const params& p, std::size_t capacity = 1 * GiB) {
    simulated_options o;
    o.capacity = capacity;
    device = make_simulated_backing(o);
    alloc = make_allocator(strategy, *device, p);
    alloc->set_tracer(&events);
  }
  address_t allocate(std::size_t n, stream_t s = 0) {
    address_t a = reinterpret_cast<address_t>(alloc->allocate(n, s));
    live[a] = n;
    return a;
  }
  void deallocate(address_t a, stream_t s = 0) {
    alloc->deallocate(reinterpret_cast<void*>(a), s);
    live.erase(a);
  }
  std::uint64_t reserved() const { return alloc->stats().reserved_live; }
  std::string invariants() const { return check_invariants(*alloc, &live); }
  std::size_t count(trace_op op) const {
    std::size_t n = 0;
    for (const trace_event& e : events)
      if (e.op == op) ++n;
    return n;
  }
};

#define CHECK_CONSISTENT(s) CHECK_EQ((s).invariants(), std::string())

// Four 12 MiB segments (each request of 10 MiB or more gets a segment of its own size, rounded to
// 2 MiB, as in PyTorch), the first and third freed: 24 MiB free, in two blocks of 12 MiB.
std::vector<address_t> fragment(setup& s) {
  std::vector<address_t> a;
  for (int i = 0; i < 4; ++i) a.push_back(s.allocate(12 * MiB));
  s.deallocate(a[0]);
  s.deallocate(a[2]);
  return a;
}

const region_info* region_at(const layout_snapshot& l, address_t a) {
  for (const region_info& r : l.regions)
    if (r.mapped && r.address <= a && a < r.address + r.size) return &r;
  return nullptr;
}

TEST(
    "stitching: a request no free block fits is stitched from two segments' free chunks, no "
    "growth") {
  setup s("stitching", {});
  fragment(s);
  CHECK_EQ(s.reserved(), 48 * MiB);
  const std::uint64_t maps_before = s.alloc->stats().device_calls.map;
  const std::size_t available_before = s.device->available();
  const address_t big = s.allocate(20 * MiB);
  // No memory obtained: the 20 MiB block lies on ten of the twelve free chunks, moved.
  CHECK_EQ(s.reserved(), 48 * MiB);
  CHECK_EQ(s.alloc->stats().reserved_peak, 48 * MiB);
  CHECK_EQ(s.device->available(), available_before);
  CHECK_EQ(s.alloc->stats().device_calls.map - maps_before, 2u);  // one remap per segment drawn
  const layout_snapshot l = snapshot(*s.alloc);
  const region_info* r = region_at(l, big);
  CHECK(r != nullptr);
  if (r != nullptr) {
    CHECK_EQ(r->kind, 2u);  // a stitched segment
    CHECK_EQ(r->address, big);
    CHECK_EQ(r->size, 20 * MiB);
  }
  // The chunks left behind: 4 MiB in one of the two segments, the other emptied and released.
  CHECK_EQ(s.alloc->stats().free_bytes, 4 * MiB);
  CHECK_CONSISTENT(s);

  // PyTorch's caching allocator, same requests: nothing free fits 20 MiB, so it grows.
  setup caching("caching", {{"preset", "pytorch"}});
  fragment(caching);
  caching.allocate(20 * MiB);
  CHECK_EQ(caching.reserved(), 68 * MiB);
}

TEST("stitching: with too few free chunks only the shortfall is mapped, beside the moved ones") {
  setup s("stitching", {});
  std::vector<address_t> a;
  for (int i = 0; i < 3; ++i) a.push_back(s.allocate(12 * MiB));
  s.deallocate(a[1]);  // 12 MiB free
  const address_t big = s.allocate(20 * MiB);
  CHECK_EQ(s.reserved(), 36 * MiB + 8 * MiB);  // 6 chunks moved, 4 obtained (caching: 56 MiB)
  const layout_snapshot l = snapshot(*s.alloc);
  const region_info* r = region_at(l, big);
  CHECK(r != nullptr && r->kind == 2u && r->size == 20 * MiB);
  CHECK_CONSISTENT(s);
}

TEST(
    "stitching: small requests, requests under fragment_limit and stitch_limit 0 grow as caching") {
  {
    setup s("stitching", {{"fragment_limit", "32MiB"}});
    fragment(s);
    s.allocate(20 * MiB);
    CHECK_EQ(s.reserved(), 68 * MiB);
    CHECK_CONSISTENT(s);
  }
  {
    setup s("stitching", {{"stitch_limit", "0"}});
    fragment(s);
    s.allocate(20 * MiB);
    CHECK_EQ(s.reserved(), 68 * MiB);
    CHECK_CONSISTENT(s);
  }
  {
    // A 1 MiB request goes to the small pool: a 2 MiB segment of its own, whatever is free.
    setup s("stitching", {});
    fragment(s);
    s.allocate(1 * MiB);
    CHECK_EQ(s.reserved(), 50 * MiB);
    CHECK_CONSISTENT(s);
  }
  {
    // stitch_limit 1: chunks from the largest free block only, the rest mapped anew.
    setup s("stitching", {{"stitch_limit", "1"}});
    fragment(s);
    s.allocate(20 * MiB);
    CHECK_EQ(s.reserved(), 56 * MiB);
    CHECK_CONSISTENT(s);
  }
}

TEST("stitching: another stream's free chunks are never stitched") {
  setup s("stitching", {});
  const address_t x = s.allocate(12 * MiB, 1);
  const address_t y = s.allocate(12 * MiB, 1);
  s.allocate(12 * MiB, 2);
  s.deallocate(x, 1);
  s.deallocate(y, 1);
  s.allocate(20 * MiB, 2);  // stream 2 has nothing free: it grows
  CHECK_EQ(s.reserved(), 56 * MiB);
  s.allocate(20 * MiB, 1);  // stream 1 stitches its own two free segments
  CHECK_EQ(s.reserved(), 56 * MiB);
  CHECK_CONSISTENT(s);
}

TEST("stitching: the map shows a stitch's holes; its trace moves memory; trim gives it all back") {
  setup s("stitching", {});
  // A segment of 24 MiB with a live block in the middle of its free space: its two free ends hold
  // whole chunks that a stitch takes, leaving unmapped holes in its address space.
  const address_t seg = s.allocate(24 * MiB);
  s.deallocate(seg);
  const address_t low = s.allocate(12 * MiB);  // split: 12 MiB live, 12 MiB free after it
  const address_t pin = s.allocate(12 * MiB, 0);
  CHECK_EQ(pin, low + 12 * MiB);  // the rest of the same segment
  s.deallocate(low);              // free: [seg, seg + 12 MiB)
  s.events.clear();
  const address_t big = s.allocate(14 * MiB);  // 12 MiB free here, 2 MiB more obtained
  CHECK_EQ(s.reserved(), 24 * MiB + 2 * MiB);
  CHECK_EQ(s.count(trace_op::va_reserve), 1u);
  CHECK_EQ(s.count(trace_op::unmap), 1u);  // the 12 MiB leave [seg, seg + 12 MiB)
  CHECK_EQ(s.count(trace_op::map), 2u);    // the 2 MiB obtained, the 12 MiB arriving
  for (const trace_event& e : s.events)
    if (e.op == trace_op::unmap) CHECK(e.address == seg && e.size == 12 * MiB);
  const layout_snapshot l = snapshot(*s.alloc);
  bool hole = false;
  for (const region_info& r : l.regions)
    if (!r.mapped && r.address == seg && r.size == 12 * MiB) hole = true;
  CHECK(hole);
  CHECK_CONSISTENT(s);
  s.deallocate(big);
  s.deallocate(pin);
  s.alloc->trim();
  CHECK_EQ(s.reserved(), 0u);
  CHECK_EQ(s.alloc->stats().address_space, 0u);
  CHECK_CONSISTENT(s);
}

TEST("stitching: a device that refuses gets every free chunk back, then the request fits") {
  setup s("stitching", {}, 64 * MiB);
  const address_t other = s.allocate(24 * MiB, 7);
  s.deallocate(other, 7);  // 24 MiB cached on stream 7
  std::vector<address_t> a;
  for (int i = 0; i < 3; ++i) a.push_back(s.allocate(12 * MiB));  // 60 MiB reserved
  CHECK_EQ(s.reserved(), 60 * MiB);
  // 26 MiB on stream 0: nothing of its own free, 4 MiB left on the device: stream 7's chunks go
  // back and the request is mapped.
  s.allocate(26 * MiB);
  CHECK_EQ(s.reserved(), 36 * MiB + 26 * MiB);
  CHECK_CONSISTENT(s);
  // Nothing left to give back: a request beyond the device fails with the state intact.
  const auto before = s.alloc->stats();
  CHECK_THROWS_AS(s.alloc->allocate(40 * MiB), out_of_memory);
  CHECK_EQ(s.alloc->stats().reserved_live, before.reserved_live);
  CHECK_CONSISTENT(s);
}

TEST("stitching: under a cap, a request that may be stitched maps only its own chunks") {
  // 56 MiB of 64 MiB in use: a 3 MiB request would get a 20 MiB segment from PyTorch's policy,
  // which no longer fits; stitching maps the 4 MiB it needs. Stitching off, it fails as PyTorch's.
  setup s("stitching", {}, 64 * MiB);
  for (int i = 0; i < 4; ++i) s.allocate(14 * MiB);
  s.allocate(3 * MiB);
  CHECK_EQ(s.reserved(), 56 * MiB + 4 * MiB);
  CHECK_CONSISTENT(s);
  setup off("stitching", {{"stitch_limit", "0"}}, 64 * MiB);
  for (int i = 0; i < 4; ++i) off.allocate(14 * MiB);
  CHECK_THROWS_AS(off.alloc->allocate(3 * MiB), out_of_memory);
  setup caching("caching", {{"preset", "pytorch"}}, 64 * MiB);
  for (int i = 0; i < 4; ++i) caching.allocate(14 * MiB);
  CHECK_THROWS_AS(caching.alloc->allocate(3 * MiB), out_of_memory);
}

// Random load: sizes log-uniform up to max_request, 55 % allocations, frees of a random live
// block, on four streams, under a small device; invariants and a recount every 5000 operations.
std::string stress(const params& p, std::size_t max_request, int operations, std::size_t capacity) {
  setup s("stitching", p, capacity);
  std::mt19937_64 rng(12345 + p.values().size());
  std::vector<std::pair<address_t, stream_t>> order;
  std::uint64_t failures = 0;
  for (int op = 0; op < operations; ++op) {
    if (order.empty() || (order.size() < 400 && rng() % 100 < 55)) {
      const double log_max = std::log(static_cast<double>(max_request));
      std::size_t n = static_cast<std::size_t>(
          std::exp(std::uniform_real_distribution<double>(0, log_max)(rng)));
      n = std::max<std::size_t>(1, std::min(n, max_request));
      const stream_t stream = rng() % 4;
      try {
        order.emplace_back(s.allocate(n, stream), stream);
      } catch (const out_of_memory&) {
        ++failures;
        for (std::size_t k = order.size() / 2; k > 0; --k) {
          std::size_t i = rng() % order.size();
          s.deallocate(order[i].first, order[i].second);
          order[i] = order.back();
          order.pop_back();
        }
      }
    } else {
      std::size_t i = rng() % order.size();
      s.deallocate(order[i].first, order[i].second);
      order[i] = order.back();
      order.pop_back();
    }
    if (rng() % 20000 == 0) s.alloc->trim();
    if (op % 5000 == 0 || op == operations - 1) {
      std::string broken = s.invariants();
      if (!broken.empty()) return broken + " (op " + std::to_string(op) + ")";
    }
  }
  for (auto& [a, stream] : order) s.deallocate(a, stream);
  s.alloc->trim();
  std::string broken = s.invariants();
  if (!broken.empty()) return broken + " (after freeing all)";
  if (s.reserved() != 0 || s.alloc->stats().address_space != 0)
    return "trim left " + format_bytes(s.reserved()) + " mapped";
  if (s.count(trace_op::failure) != failures) return "failures not all traced";
  std::printf("    %s: %llu out-of-memory\n", p.values().empty() ? "defaults" : "params",
              static_cast<unsigned long long>(failures));
  return {};
}

TEST("stress: stitching on four streams, with 4 MiB chunks, one piece a stitch, every size") {
  CHECK_EQ(stress({}, 24 * MiB, 200000, 256 * MiB), "");
  CHECK_EQ(stress({{"chunk_size", "4MiB"}, {"fragment_limit", "0"}}, 24 * MiB, 200000, 256 * MiB),
           "");
  CHECK_EQ(stress({{"stitch_limit", "1"}}, 40 * MiB, 100000, 128 * MiB), "");
}

}  // namespace

CHECK_MAIN
