// The base class's bookkeeping around a strategy's calls, on paths the typed suite cannot reach
// with the real strategies: a do_deallocate that throws (a device error while freeing) must leave
// the block live and counted, as if the free had not been tried, and the deallocation count (derived
// from allocations, live blocks and resets) must match a count kept here through frees, deferred
// frees and resets.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "check.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

// A bump strategy over one region whose frees throw while `fail_frees` is set; resettable.
class failing_free_strategy final : public allocator {
 public:
  explicit failing_free_strategy(backing& b) : allocator("failing_free", b) {
    base_ = obtain_region(region_bytes);
    top_ = base_;
  }
  ~failing_free_strategy() override { get_backing().free_region(base_, region_bytes); }

  bool fail_frees = false;
  std::vector<std::uint32_t> cookies_seen;

 private:
  static constexpr std::size_t region_bytes = 64 * MiB;

  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) override {
    const std::uint64_t n = align_up(bytes, 256);
    if (n > base_ + region_bytes - top_) fail(bytes, base_ + region_bytes - top_, "region full");
    const address_t a = top_;
    top_ += n;
    cookie = static_cast<std::uint32_t>((a - base_) / 256 + 7);
    return {a, n};
  }
  void do_deallocate(address_t a, std::uint64_t, std::uint32_t cookie, stream_t) override {
    if (fail_frees) throw device_error("simulated free", 1, "failure injected by the test");
    REQUIRE(cookie == static_cast<std::uint32_t>((a - base_) / 256 + 7));
    cookies_seen.push_back(cookie);
  }
  void do_walk(layout_visitor& v) const override {
    v.region({base_, region_bytes, true, 0});
    // Every block up to top_ is reported live or freed-but-unusable; nothing is reused.
    if (top_ > base_) v.block({base_, top_ - base_, block_state::unusable, 0});
    if (top_ < base_ + region_bytes)
      v.block({top_, base_ + region_bytes - top_, block_state::free, 0});
  }
  bool do_supports_reset() const noexcept override { return true; }
  void do_reset() override { top_ = base_; }

  address_t base_ = 0;
  address_t top_ = 0;
};

}  // namespace

TEST("base: a do_deallocate that throws leaves the block live, counted and freeable") {
  simulated_options o;
  o.capacity = 1 * GiB;
  auto device = make_simulated_backing(o);
  failing_free_strategy a(*device);
  void* p = a.allocate(1000);
  void* q = a.allocate(3000);
  const allocator_stats before = a.stats();
  a.fail_frees = true;
  CHECK_THROWS_AS(a.deallocate(p), device_error);
  CHECK_THROWS_AS(a.deallocate(q), device_error);
  const allocator_stats after = a.stats();
  CHECK_EQ(after.live_blocks, before.live_blocks);
  CHECK_EQ(after.requested_live, before.requested_live);
  CHECK_EQ(after.rounded_live, before.rounded_live);
  CHECK_EQ(after.deallocations, before.deallocations);
  CHECK_EQ(a.requested_size(p), 1000u);
  CHECK_EQ(a.requested_size(q), 3000u);
  a.fail_frees = false;
  // The entries put back keep their cookies: do_deallocate REQUIREs the one it gave.
  a.deallocate(q);
  a.deallocate(p);
  CHECK_EQ(a.cookies_seen.size(), 2u);
  CHECK_EQ(a.stats().live_blocks, 0u);
  CHECK_EQ(a.stats().requested_live, 0u);
  CHECK_EQ(a.stats().deallocations, 2u);
  CHECK_THROWS_AS(a.deallocate(p), invalid_free);
}

TEST("base: deallocations counted through frees, deferred frees and resets") {
  simulated_options o;
  o.capacity = 1 * GiB;
  auto device = make_simulated_backing(o);
  failing_free_strategy a(*device);
  std::uint64_t frees = 0;
  std::vector<void*> held;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; ++i) held.push_back(a.allocate(512 + static_cast<std::size_t>(i)));
    for (int i = 0; i < 20; ++i) {
      // Every third free on another stream: deferred, and counted when it is deferred.
      a.deallocate(held.back(), i % 3 == 0 ? 1 : 0);
      held.pop_back();
      ++frees;
    }
    CHECK_EQ(a.stats().deallocations, frees);
    CHECK_EQ(a.stats().allocations, static_cast<std::uint64_t>(50 * (round + 1)));
    // A reset drops the held blocks (and pending ones) without counting them as freed.
    a.reset();
    held.clear();
    CHECK_EQ(a.stats().deallocations, frees);
    CHECK_EQ(a.stats().live_blocks, 0u);
  }
}

CHECK_MAIN
