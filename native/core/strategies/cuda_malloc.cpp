// cuda_malloc: the driver baseline. Every request is its own region from the backing (cudaMalloc on
// a GPU), rounded to `rounding` bytes, and every free hands it straight back (cudaFree). Nothing is
// cached, so reserved == rounded live at all times; what it costs is a device call per operation.
#include <algorithm>
#include <vector>

#include "recently_freed.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

class cuda_malloc_strategy final : public allocator {
 public:
  cuda_malloc_strategy(backing& b, const params& p)
      : allocator("cuda_malloc", b),
        rounding_(p.get_size("rounding", 512)),
        freed_(p.get_uint("remember_frees", 4096)) {
    if (rounding_ < min_alignment || !is_power_of_two(rounding_))
      throw invalid_argument("cuda_malloc: rounding must be a power of two >= 256 B, got " +
                             format_bytes(rounding_));
    reuse_is_stream_ordered();  // cudaFree waits for the device before the address can come back
  }

  ~cuda_malloc_strategy() override {
    // Blocks the program never freed go back to the device with the allocator.
    regions_.for_each(
        [&](address_t a, std::uint64_t bytes) { get_backing().free_region(a, bytes); });
  }

 private:
  // Invariant: regions_ holds exactly the live (and pending) blocks; reserved == their sum.
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t&) override {
    const std::size_t rounded = align_up(bytes, rounding_);
    if (VRAMSCOPE_UNLIKELY(rounded < bytes))  // within `rounding` of 2^64: no region that large
      fail(bytes, 0, "request too large for a region");
    address_t a;
    try {
      a = obtain_region(rounded);
    } catch (const out_of_memory& e) {
      fail_from_device(bytes, e);
    }
    regions_.insert(a, rounded);
    freed_.forget(a);
    return {a, rounded};
  }

  void do_deallocate(address_t address, std::uint64_t rounded, std::uint32_t, stream_t) override {
    return_region(address, rounded);
    regions_.erase(address);
    freed_.remember(address);
  }

  // Reports the caller's request, not the rounded one, with what the device said was available.
  [[noreturn]] VRAMSCOPE_NOINLINE void fail_from_device(std::size_t bytes, const out_of_memory& e) {
    fail(bytes, e.available(), "the device has no room for the region");
  }

  void do_walk(layout_visitor& v) const override {
    std::vector<std::pair<address_t, std::uint64_t>> sorted;
    sorted.reserve(regions_.size());
    regions_.for_each([&](address_t a, std::uint64_t bytes) { sorted.emplace_back(a, bytes); });
    std::sort(sorted.begin(), sorted.end());
    for (auto& [a, bytes] : sorted) {
      v.region({a, bytes, true, 0});
      v.block({a, bytes, block_state::live, 0});
    }
  }

  bool do_was_freed(address_t address) const override { return freed_.contains(address); }

  std::size_t rounding_;
  address_map<std::uint64_t> regions_;  // address -> rounded bytes
  recently_freed freed_;
};

const strategy_registration registration{
    {"cuda_malloc",
     "every request a cudaMalloc, every free a cudaFree; the driver baseline",
     {{"rounding", "size", "512", "requests are rounded up to a multiple of this (power of two)"},
      {"remember_frees", "uint", "4096",
       "how many freed addresses are remembered to report a double free as such"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<cuda_malloc_strategy>(b, p);
    }};

}  // namespace
}  // namespace vramscope
