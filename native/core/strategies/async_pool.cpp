// async_pool: stream-ordered allocation from the backing's pool (cudaMallocAsync / cudaFreeAsync on
// an owned cudaMemPool on a GPU; the simulated backing's model of one elsewhere). The pool decides
// placement, caching and release; this strategy passes requests through, sets the pool's release
// threshold, and keeps the shared counters in step with what the pool reports it holds.
#include <algorithm>
#include <vector>

#include "recently_freed.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

namespace vramscope {
namespace {

class async_pool_strategy final : public allocator {
 public:
  async_pool_strategy(backing& b, const params& p)
      : allocator("async_pool", b),
        release_threshold_(p.get_size("release_threshold", 0)),
        trim_on_free_(p.get_bool("trim_on_free", false)),
        track_pool_(p.get_bool("track_pool", true)),
        freed_(p.get_uint("remember_frees", 4096)),
        model_(track_pool_ ? dynamic_cast<simulated_backing*>(&b) : nullptr) {
    b.set_release_threshold(release_threshold_);
    // Whatever the pool already holds is memory this allocator's walk will show: count it.
    if (track_pool_) sync_reserved();
    reuse_is_stream_ordered();  // cudaFreeAsync: the pool orders reuse across streams itself
  }

  ~async_pool_strategy() override {
    // Blocks never freed go back to the pool, and the pool gives its memory back to the device.
    // Destructors must not throw: a failing device call here has nowhere to be reported.
    try {
      live_.for_each([&](address_t a, const live_entry& e) {
        get_backing().free_async(a, e.rounded, e.stream);
      });
      get_backing().trim_async_pool(0);
    } catch (...) {
    }
  }

 private:
  struct live_entry {
    std::uint64_t rounded;
    stream_t stream;
  };

  // Invariant: live_ holds exactly the blocks handed out and not yet returned to the pool (live
  // and pending). Tracking the pool: reserved_live == the pool's reserved_current as of the last
  // call. Not tracking: reserved_live == rounded size of the blocks in live_.
  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t&) override {
    const std::uint64_t used_before = track_pool_ ? get_backing().async_stats().used_current : 0;
    address_t a;
    try {
      a = get_backing().allocate_async(bytes, stream);
    } catch (const out_of_memory& e) {
      fail_from_pool(bytes, e);
    }
    std::uint64_t rounded = align_up(bytes, 512);
    if (track_pool_) rounded = account_pool_after_allocation(a, bytes, used_before, stream);
    else note_reserved(static_cast<std::int64_t>(rounded));
    live_.insert(a, {rounded, stream});
    freed_.forget(a);
    return {a, rounded};
  }

  void do_deallocate(address_t address, std::uint64_t rounded, std::uint32_t,
                     stream_t stream) override {
    get_backing().free_async(address, rounded, stream);
    live_.erase(address);
    freed_.remember(address);
    if (trim_on_free_) get_backing().trim_async_pool(release_threshold_);
    if (track_pool_) sync_reserved();
    else note_reserved(-static_cast<std::int64_t>(rounded));
  }

  // Reads the pool after an allocation: its growth is counted as reserved, and what it charged for
  // the block (the change in used bytes) is the block's rounded size. A pool whose count does not
  // move with the call is accounted at 512 B granularity, as cudaMalloc rounds.
  std::uint64_t account_pool_after_allocation(address_t a, std::size_t bytes,
                                              std::uint64_t used_before, stream_t stream) {
    const async_pool_stats after = get_backing().async_stats();
    if (after.reserved_current > counted_reserved_)  // the pool grew for this block
      trace(trace_op::region_reserve, a, after.reserved_current - counted_reserved_, 0, stream);
    note_reserved_now(after.reserved_current);
    const bool charged = after.used_current >= used_before + bytes &&
                         (after.used_current - used_before) % min_alignment == 0;
    return charged ? after.used_current - used_before : align_up(bytes, 512);
  }

  [[noreturn]] VRAMSCOPE_NOINLINE void fail_from_pool(std::size_t bytes, const out_of_memory& e) {
    // A pool may release cached memory while trying (the driver trims on out-of-memory): count it.
    if (track_pool_) sync_reserved();
    fail(bytes, e.available(), "the stream-ordered pool could not grow");
  }

  void sync_reserved() { note_reserved_now(get_backing().async_stats().reserved_current); }
  // Pool memory released (at a synchronization, a trim or an out-of-memory) has no address the
  // pool tells us: it is traced as a trim of that many bytes.
  void note_reserved_now(std::uint64_t reserved_now) {
    if (reserved_now != counted_reserved_) {
      if (reserved_now < counted_reserved_)
        trace(trace_op::trim, 0, counted_reserved_ - reserved_now);
      note_reserved(static_cast<std::int64_t>(reserved_now) -
                    static_cast<std::int64_t>(counted_reserved_));
      counted_reserved_ = reserved_now;
    }
  }

  void do_walk(layout_visitor& v) const override {
    if (model_ != nullptr) {
      // The simulated pool can be enumerated: its chunks are regions, tiled by its blocks.
      for (const auto& c : model_->async_regions()) v.region({c.address, c.bytes, true, 0});
      for (const auto& b : model_->async_blocks())
        v.block({b.address, b.bytes, b.in_use ? block_state::live : block_state::free, 0});
      return;
    }
    // A real cudaMemPool is opaque: only the blocks handed out are known, each shown as its own
    // region. The memory the pool caches (reserved_live - rounded_live - pending) has no address
    // we can learn, so this walk does not tile reserved memory on a GPU (it does when the pool is
    // not tracked: reserved then counts the blocks only).
    std::vector<std::pair<address_t, std::uint64_t>> sorted;
    live_.for_each([&](address_t a, const live_entry& e) { sorted.emplace_back(a, e.rounded); });
    std::sort(sorted.begin(), sorted.end());
    for (auto& [a, bytes] : sorted) {
      v.region({a, bytes, true, 0});
      v.block({a, bytes, block_state::live, 0});
    }
  }

  bool do_was_freed(address_t address) const override { return freed_.contains(address); }

  void do_trim() override {
    get_backing().trim_async_pool(0);
    if (track_pool_) sync_reserved();
  }

  std::uint64_t release_threshold_;
  bool trim_on_free_;
  bool track_pool_;  // read the pool's counters around every call (costs attribute queries on CUDA)
  recently_freed freed_;
  simulated_backing* model_;  // non-null on the simulated backing (tracked), whose pool is walked
  address_map<live_entry> live_;
  std::uint64_t counted_reserved_ = 0;  // the pool's reserved bytes as last noted
};

const strategy_registration registration{
    {"async_pool",
     "cudaMallocAsync on an owned pool: release threshold, trim, used/reserved stats",
     {{"release_threshold", "size", "0",
       "bytes the pool keeps reserved across synchronizations (cudaMemPoolAttrReleaseThreshold)"},
      {"trim_on_free", "bool", "false",
       "trim the pool to release_threshold after every free, as if the program synchronized"},
      {"track_pool", "bool", "true",
       "read the pool's used/reserved counters around every call; false: count only the blocks "
       "(no attribute queries, for timing the driver itself)"},
      {"remember_frees", "uint", "4096",
       "how many freed addresses are remembered to report a double free as such"}},
     strategy_traits().needs_async().runs_on(backing_kind::cuda_async)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<async_pool_strategy>(b, p);
    }};

}  // namespace
}  // namespace vramscope
