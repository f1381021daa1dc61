// caching: a pool of segments obtained from the device, cut into blocks that are split to serve a
// request and merged again when freed, cached per stream (a segment and every block cut from it
// belong to the stream it was obtained for). Preset `pytorch` reproduces PyTorch's
// CUDACachingAllocator decision by decision (caching_policy.hpp holds the rules that differ between
// presets; the comments name the PyTorch function each branch follows); preset `pow2` rounds to
// power-of-two classes. Thread-safe through the base class's lock. Cross-stream frees are deferred
// by the base class; a block reaches do_deallocate once it may be reused on its own stream.
//
// Private pools (use_pool, a CUDA graph's mempool; PyTorch's PrivatePool): while pool k is
// current, allocations come from pool k's own small and large pools, per stream, with segments of
// their own; a free returns a block to its own pool. Private segments count toward reserved memory
// and the cap but are never released (the graph is alive): not by trim, garbage collection nor the
// out-of-memory retry, which PyTorch skips altogether while a pool is current.
//
// Expandable segments (expandable_segments, PyTorch's ExpandableSegment): one segment per pool and
// stream, a reservation of address space 1 1/8 times the device's memory (less where the simulated
// address space has no room for that: new_expandable_segment), into which pages (2 MiB
// for a small pool, 20 MiB for a large one) are mapped as it grows and unmapped again by the
// release paths. A segment's blocks are live, free (mapped) or unmapped; reserved memory is the
// mapped bytes.
#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <unordered_map>
#include <vector>

#include "caching_free_index.hpp"
#include "caching_policy.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

using caching_detail::free_index;
using caching_detail::large_pool;
using caching_detail::no_block;
using caching_detail::policy;
using caching_detail::preset;
using caching_detail::small_pool;

class caching final : public allocator {
 public:
  caching(backing& b, const params& p)
      : allocator("caching", b, p.get_bool("thread_safe", true)),
        policy_(caching_detail::parse_policy(p)),
        max_reserved_(p.get_size("max_reserved", 0)),
        release_threshold_(p.get_size("release_threshold", 0)) {
    if (policy_.garbage_collection_threshold > 0 && max_reserved_ == 0)
      throw invalid_argument(
          "caching: garbage_collection_threshold needs max_reserved (as PyTorch's "
          "needs a per-process memory fraction)");
    collect_garbage_ = policy_.garbage_collection_threshold > 0;
    expandable_ = policy_.expandable_segments;
    unusual_ = collect_garbage_ || expandable_;
    if (expandable_ && !b.has_vmm())
      throw unsupported(std::string("caching: expandable_segments maps pages into reserved address "
                                    "space, which the ") +
                        b.name() + " backing cannot");
    if (expandable_ && caching_detail::small_buffer % b.granularity() != 0)
      throw invalid_argument(
          "caching: expandable_segments maps 2 MiB pages, not a multiple of the "
          "backing's granularity " +
          format_bytes(b.granularity()));
    reuse_is_stream_ordered();  // a segment and its blocks belong to one stream
    pools_.resize(2);           // the default small and large pools
  }

  ~caching() override {
    for (auto& [address, s] : segments_) {
      if (!s.expandable) {
        get_backing().free_region(address, s.size);
        continue;
      }
      // Each run of mapped blocks was mapped page by page: give it back as one range.
      address_t run = 0;
      std::uint64_t run_bytes = 0;
      for (std::uint32_t i = s.head; i != no_block; i = nodes_[i].next) {
        if (nodes_[i].state != unmapped) {
          if (run_bytes == 0) run = nodes_[i].address;
          run_bytes += nodes_[i].size;
          continue;
        }
        if (run_bytes != 0) get_backing().unmap(run, run_bytes);
        run_bytes = 0;
      }
      if (run_bytes != 0) get_backing().unmap(run, run_bytes);
      get_backing().release_address_space(address, s.size);
    }
  }

 private:
  // --- fast path: a cached block of exactly the rounded size on this stream; freeing a block
  // whose neighbours are in use. ------------------------------------------------------------------
  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t& cookie) override {
    const std::uint64_t size = policy_.round_size(bytes);
    const unsigned pool = current_pools_ + policy_.pool_of(size);
    free_index& index = index_for(pool, stream);
    if (VRAMSCOPE_UNLIKELY(unusual_)) {
      // PyTorch get_free_block counts its calls per pool, the clock of garbage collection's ages.
      if (collect_garbage_) ++pools_[pool].free_block_searches;
      // With expandable segments an exact fit may still lose to a larger block (get_free_block).
      if (expandable_) return allocate_slow(bytes, size, pool, stream, index, cookie);
    }
    const std::uint32_t n = index.take_exact(size);
    if (VRAMSCOPE_LIKELY(n != no_block)) {
      releasable_known_ = false;
      block_node& b = nodes_[n];
      b.state = live;
      cookie = n;
      return {b.address, size};
    }
    return allocate_slow(bytes, size, pool, stream, index, cookie);
  }

  // The cookie is the block's node.
  void do_deallocate(address_t address, std::uint64_t, std::uint32_t n, stream_t) override {
    block_node& b = nodes_[n];
    VRAMSCOPE_ASSERT(b.state == live && b.address == address);
    (void)address;
    releasable_known_ = false;
    b.state = cached;
    // Both paths are tail calls, so that this function needs no stack frame: the registers the
    // index insert needs would otherwise be saved and restored here around free_slow as well.
    if (VRAMSCOPE_UNLIKELY(is_free(b.prev) || is_free(b.next))) return free_slow(n);
    free_unmerged(n);
  }

  VRAMSCOPE_NOINLINE void free_unmerged(std::uint32_t n) {
    block_node& b = nodes_[n];
    stamp(b);
    b.bucket = index_for(b.pool, b.stream).insert(b.size, b.address, n, b.bucket);
  }

  // --- slow paths -------------------------------------------------------------------------------

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes, std::uint64_t size, unsigned pool,
                                              stream_t stream, free_index& index,
                                              std::uint32_t& cookie) {
    if (size == 0) {
      const bool pow2 = policy_.kind == preset::pow2;
      return refuse(bytes, 0, [pow2] {
        return pow2 ? "the pow2 preset's largest size class is 2 GiB"
                    : "request too large to round";
      });
    }
    std::uint32_t n = get_free_block(index, size);
    if (n == no_block) n = alloc_block(bytes, size, pool, stream, index);
    // A refusal (no_block, or a throw) comes before any change.
    if (VRAMSCOPE_UNLIKELY(n == no_block)) return {refused, 0};
    releasable_known_ = false;
    cookie = n;
    return alloc_found_block(n, size, index);
  }

  // PyTorch get_free_block: the lowest (size, address) at least `size` among this stream's cached
  // blocks of the pool, unless the oversize rules (max_split_size) refuse it; no further search.
  // With expandable segments a block counts, for best fit, as large as it can grow (with the
  // unmapped block after it): from the first fit the search moves on to each next block while that
  // one can grow to less.
  std::uint32_t get_free_block(free_index& index, std::uint64_t size) {
    free_index::found best;
    if (!index.lower_bound(size, best)) return no_block;
    if (VRAMSCOPE_UNLIKELY(expandable_)) {
      free_index::found next;
      while (index.next_after(best.block, next) &&
             expandable_size(next.block.node) < expandable_size(best.block.node))
        best = next;
    }
    if (!policy_.may_serve(best.block.size, size)) return no_block;
    index.take_found(best);
    return best.block.node;
  }

  // PyTorch malloc after get_free_block failed: garbage collection (when set), cudaMalloc of the
  // allocation size, then release_available_cached_blocks and retry, then (unless a private pool
  // is current, as PyTorch skips it during a capture) release_cached_blocks and retry. Unlike
  // PyTorch this first checks that a retry could succeed at all, and fails with nothing released
  // when none could (the interface's strong guarantee). no_block where refused (refuse).
  std::uint32_t alloc_block(std::size_t bytes, std::uint64_t size, unsigned pool, stream_t stream,
                            free_index& index) {
    const std::uint64_t alloc_size = policy_.allocation_size(size);
    if (expandable_) return alloc_expandable(bytes, size, alloc_size, pool, stream);
    if (!fits(alloc_size, 0)) {
      // What release_available_cached_blocks would release, then what release_cached_blocks would.
      const release_plan available = plan_release_available(index, size);
      const bool retry_all = current_pools_ == 0;
      const std::uint64_t releasable = retry_all ? releasable_now() : 0;
      if (!(available.enough && fits(alloc_size, available.bytes)) &&
          !(retry_all && fits(alloc_size, releasable))) {
        const std::uint64_t freed = retry_all ? releasable : available.bytes;
        const bool fits_device = alloc_size <= backing_available() + freed;
        refuse(bytes, backing_available() + freed, [&] {
          return "no cached block fits and a new " + format_bytes(alloc_size) + " segment " +
                 (fits_device ? "would exceed max_reserved " + format_bytes(max_reserved_)
                              : std::string("does not fit on the device")) +
                 (retry_all ? " even with every unused segment released"
                            : " (a private pool is current: PyTorch releases no other "
                              "cached segments then)");
        });
        return no_block;
      }
    }
    releasable_known_ = false;
    if (collect_garbage_) garbage_collect_cached_blocks(&index);
    address_t address;
    if (try_obtain(alloc_size, pool, address) ||
        (release_available_cached_blocks(index, size) && try_obtain(alloc_size, pool, address)) ||
        (current_pools_ == 0 &&
         (release_cached_blocks(0, &index), try_obtain(alloc_size, pool, address))))
      return new_segment(address, alloc_size, pool, stream);
    // Only a real device that fragments its own memory gets here.
    refuse(bytes, backing_available(),
           [] { return "the device refused a new segment after the cache was released"; });
    return no_block;
  }

  // alloc_block with expandable segments: the cap is checked against the allocation size, as for a
  // new segment, but only the pages the request needs are mapped (try_allocate_expandable_block).
  // release_available_cached_blocks never releases expandable memory, so the retry comes after
  // release_cached_blocks, which unmaps every free page (unless a private pool is current).
  // Checked first, exactly: that the cap allows the retry and that the device could hold the pages
  // the request would map once every free page is unmapped; when not, nothing changes.
  std::uint32_t alloc_expandable(std::size_t bytes, std::uint64_t size, std::uint64_t alloc_size,
                                 unsigned pool, stream_t stream) {
    const std::uint64_t need = map_bytes(find_expandable_block(pool, stream, size), size, pool);
    if (exceeds_max_reserved(alloc_size) || need > backing_available()) {
      const bool retry_all = current_pools_ == 0;
      const std::uint64_t releasable = retry_all ? releasable_now() : 0;
      const bool fits_cap =
          max_reserved_ == 0 || reserved_ - releasable + alloc_size <= max_reserved_;
      const bool fits_device = retry_all && map_bytes_after_release(pool, stream, size) <=
                                                backing_available() + releasable;
      if (!retry_all || !fits_cap || !fits_device) {
        refuse(bytes, backing_available() + releasable, [&] {
          return "no cached block fits and " + format_bytes(size) +
                 " more in an expandable segment " +
                 (fits_device ? "would exceed max_reserved " + format_bytes(max_reserved_)
                              : std::string("does not fit on the device")) +
                 (retry_all ? " even with every free page unmapped"
                            : " (a private pool is current: PyTorch unmaps no other "
                              "cached pages then)");
        });
        return no_block;
      }
    }
    releasable_known_ = false;
    // The caller holds this request's index: the release paths must not drop it.
    const free_index* held = &index_for(pool, stream);
    if (collect_garbage_) garbage_collect_cached_blocks(held);
    std::uint32_t n;
    if (try_allocate_expandable_block(size, alloc_size, pool, stream, n) ||
        (current_pools_ == 0 && (release_cached_blocks(0, held),
                                 try_allocate_expandable_block(size, alloc_size, pool, stream, n))))
      return n;
    // Only a real device that fragments its own memory gets here.
    refuse(bytes, backing_available(), [] {
      return "the device refused the request's pages after every free page was unmapped";
    });
    return no_block;
  }

  // Whether `bytes` more fit the device and the cap once `released` bytes are given back.
  bool fits(std::uint64_t bytes, std::uint64_t released) const noexcept {
    return bytes <= backing_available() + released &&
           (max_reserved_ == 0 || reserved_ - released + bytes <= max_reserved_);
  }

  // PyTorch alloc_found_block: when should_split, the front of the block serves the request and
  // the remainder goes back to the pool.
  allocation alloc_found_block(std::uint32_t n, std::uint64_t size, free_index& index) {
    if (policy_.should_split(nodes_[n].size, size, kind_of(nodes_[n].pool))) {
      const std::uint32_t r = new_node();
      block_node& b = nodes_[n];
      block_node& rest = nodes_[r];
      rest.address = b.address + size;
      rest.size = b.size - size;
      rest.stream = b.stream;
      rest.pool = b.pool;
      rest.state = cached;
      rest.prev = n;
      rest.next = b.next;
      if (rest.next != no_block) nodes_[rest.next].prev = r;
      b.next = r;
      b.size = size;
      stamp(rest);
      rest.bucket = index.insert(rest.size, rest.address, r, rest.bucket);
      trace(trace_op::split, b.address, size, 0, b.stream, b.pool);
    }
    block_node& b = nodes_[n];
    b.state = live;
    return {b.address, b.size};
  }

  // PyTorch free_block: merge with the previous, then the next block when they are free (a block
  // waiting on events is still live here), and return the result to the pool. The lower block of
  // a merge survives, so a segment's first block never changes.
  VRAMSCOPE_NOINLINE void free_slow(std::uint32_t n) {
    free_index& index = index_for(nodes_[n].pool, nodes_[n].stream);
    if (is_free(nodes_[n].prev)) {
      const std::uint32_t p = nodes_[n].prev;
      block_node& prev = nodes_[p];
      index.erase(prev.size, prev.address, prev.bucket);
      absorb_next(p);
      n = p;
      trace(trace_op::merge, prev.address, prev.size, 0, prev.stream, prev.pool);
    }
    block_node& b = nodes_[n];
    if (is_free(b.next)) {
      index.erase(nodes_[b.next].size, nodes_[b.next].address, nodes_[b.next].bucket);
      absorb_next(n);
      trace(trace_op::merge, b.address, b.size, 0, b.stream, b.pool);
    }
    stamp(b);
    b.bucket = index.insert(b.size, b.address, n, b.bucket);
  }

  void absorb_next(std::uint32_t n) {
    block_node& b = nodes_[n];
    const std::uint32_t x = b.next;
    b.size += nodes_[x].size;
    b.next = nodes_[x].next;
    if (b.next != no_block) nodes_[b.next].prev = n;
    free_nodes_.push_back(x);
  }

  // PyTorch release_available_cached_blocks (only with max_split_size set), in the pool the request
  // is served from: release the smallest cached oversize block of this stream that covers the
  // request, else this stream's oversize blocks from the largest down until as many bytes are
  // released as asked. plan_release_available says what it would do without doing it.
  struct release_plan {
    bool enough = false;  // what PyTorch's function returns
    std::uint64_t bytes = 0;
    std::vector<free_index::entry> blocks;
  };
  release_plan plan_release_available(free_index& index, std::uint64_t size) const {
    release_plan plan;
    if (policy_.kind != preset::pytorch || policy_.max_split_size == caching_detail::unlimited)
      return plan;
    // PyTorch skips expandable blocks here, and with expandable segments every block is one.
    if (expandable_) return plan;
    const std::uint64_t key = size < policy_.max_split_size ? policy_.max_split_size : size;
    std::vector<free_index::entry> blocks;
    index.ascending(blocks);
    std::size_t first_large_enough = 0;
    while (first_large_enough < blocks.size() && blocks[first_large_enough].size < key)
      ++first_large_enough;
    if (first_large_enough < blocks.size()) {
      const free_index::entry& e = blocks[first_large_enough];
      // Oversize blocks are whole segments: they are never split.
      if (!is_whole_segment(e.node)) return plan;
      plan.blocks.push_back(e);
      plan.bytes = e.size;
      plan.enough = true;
      return plan;
    }
    for (std::size_t i = blocks.size(); i-- > 0 && plan.bytes < key;) {
      if (blocks[i].size < policy_.max_split_size) break;
      if (!is_whole_segment(blocks[i].node)) continue;
      plan.bytes += blocks[i].size;
      plan.blocks.push_back(blocks[i]);
    }
    plan.enough = plan.bytes >= key;
    return plan;
  }
  bool release_available_cached_blocks(free_index& index, std::uint64_t size) {
    const release_plan plan = plan_release_available(index, size);
    for (const auto& e : plan.blocks) release_block(e, index);
    return plan.enough;
  }

  // PyTorch release_cached_blocks (empty_cache): every cached block of the default pools that is a
  // whole segment goes back to the device, large pool first, each in (stream, size, address)
  // order; private pools keep theirs (their graphs are alive). With expandable segments
  // (release_blocks) the whole pages inside each free block are unmapped instead, in the same
  // order, and a segment left with nothing mapped is released. Stops once reserved memory is down
  // to `keep` bytes. Returns the bytes released.
  std::uint64_t release_cached_blocks(std::uint64_t keep, const free_index* held = nullptr) {
    std::uint64_t released = 0;
    std::vector<free_index::entry> blocks;
    std::vector<std::uint32_t> to_unmap;
    for (unsigned pool : {large_pool, small_pool}) {
      prune_empty_indexes(pool, held);
      to_unmap.clear();
      for (auto& [stream, index] : pools_[pool].indexes) {
        index.ascending(blocks);
        for (const auto& e : blocks) {
          if (expandable_) {
            to_unmap.push_back(e.node);
            continue;
          }
          if (reserved_ <= keep) return released;
          if (!is_whole_segment(e.node)) continue;
          released += e.size;
          release_block(e, index);
        }
      }
      for (std::uint32_t n : to_unmap) {
        if (reserved_ <= keep) return released;
        const std::uint64_t before = reserved_;
        const std::uint32_t u = unmap_block(n);
        released += before - reserved_;
        if (u != no_block && nodes_[u].prev == no_block && nodes_[u].next == no_block)
          release_expandable_segment(u);
      }
    }
    return released;
  }

  // PyTorch garbage_collect_cached_blocks: once reserved memory passes the threshold fraction of
  // the cap, release whole cached segments of the default large pool whose age (free-block
  // searches since they were cached) is at least the average, repeating until enough is reclaimed.
  void garbage_collect_cached_blocks(const free_index* held) {
    const auto threshold = static_cast<std::uint64_t>(policy_.garbage_collection_threshold *
                                                      static_cast<double>(max_reserved_));
    if (reserved_ <= threshold) return;
    const std::uint64_t target = reserved_ - threshold;
    prune_empty_indexes(large_pool, held);
    pool_state& large = pools_[large_pool];
    auto freeable = [&] {
      std::vector<std::pair<free_index::entry, free_index*>> out;
      std::vector<free_index::entry> blocks;
      for (auto& [stream, index] : large.indexes) {
        index.ascending(blocks);
        for (const auto& e : blocks)
          if (is_whole_segment(e.node)) out.push_back({e, &index});
      }
      return out;
    };
    auto age = [&](std::uint32_t n) { return large.free_block_searches - nodes_[n].gc_count_base; };
    auto candidates = freeable();
    if (candidates.empty()) return;
    std::uint64_t total_age = 0;
    for (auto& [e, index] : candidates) total_age += age(e.node);
    std::size_t count = candidates.size();
    std::uint64_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && count > 0) {
      const double age_threshold = static_cast<double>(total_age) / static_cast<double>(count);
      freed = false;
      for (auto& [e, index] : freeable()) {
        if (static_cast<double>(age(e.node)) < age_threshold) continue;
        freed = true;
        reclaimed += e.size;
        total_age -= age(e.node);
        --count;
        release_block(e, *index);
      }
    }
  }

  // --- segments -------------------------------------------------------------------------------

  bool exceeds_max_reserved(std::uint64_t bytes) const noexcept {
    return max_reserved_ != 0 && reserved_ + bytes > max_reserved_;
  }

  // PyTorch alloc_block: the cap (set_per_process_memory_fraction) first, then cudaMalloc.
  bool try_obtain(std::uint64_t bytes, unsigned pool, address_t& address) {
    if (exceeds_max_reserved(bytes)) return false;
    try {
      address = obtain_region(bytes, pool);
    } catch (const out_of_memory&) {
      return false;
    }
    return true;
  }

  std::uint32_t new_segment(address_t address, std::uint64_t bytes, unsigned pool,
                            stream_t stream) {
    const std::uint32_t n = new_node();
    block_node& b = nodes_[n];
    b.address = address;
    b.size = bytes;
    b.stream = stream;
    b.pool = static_cast<std::uint16_t>(pool);
    b.state = cached;
    b.prev = b.next = no_block;
    b.bucket = free_index::no_bucket;
    stamp(b);
    segments_.emplace(address, segment{bytes, n, pool, false});
    reserved_ += bytes;
    return n;
  }

  // PyTorch release_block: cudaFree of a whole cached segment.
  void release_block(const free_index::entry& e, free_index& index) {
    const unsigned pool = nodes_[e.node].pool;
    return_region(e.address, e.size, pool);
    index.erase(e.size, e.address, nodes_[e.node].bucket);
    segments_.erase(e.address);
    reserved_ -= e.size;
    free_nodes_.push_back(e.node);
  }

  // releasable_bytes() as of now. It walks every segment (or every stream's free blocks), and a
  // replay past its limit asks it once per failed request: a failure changes nothing, so the figure
  // is kept until the next change of the cache (releasable_known_ is cleared on every one).
  std::uint64_t releasable_now() {
    if (!releasable_known_) {
      releasable_ = releasable_bytes();
      releasable_known_ = true;
    }
    return releasable_;
  }

  // Drops the pool's per-stream indexes that hold no block, but `held` (a caller's): the release
  // paths walk every index, and a trace of many streams (each its own index) leaves most of them
  // empty, which would make each release cost every stream ever seen. A dropped stream's next
  // block makes its index again (bucket hints are checked, so old ones only miss).
  void prune_empty_indexes(unsigned pool, const free_index* held) {
    auto& indexes = pools_[pool].indexes;
    bool dropped = false;
    for (auto it = indexes.begin(); it != indexes.end();) {
      if (it->second.count() != 0 || &it->second == held) {
        ++it;
        continue;
      }
      it = indexes.erase(it);
      dropped = true;
    }
    if (dropped)
      for (last_index& last : last_index_) last = last_index{};
  }

  // What release_cached_blocks would give back: the whole cached segments of the default pools,
  // or with expandable segments the whole pages inside their free blocks.
  std::uint64_t releasable_bytes() const {
    std::uint64_t bytes = 0;
    if (expandable_) {
      std::vector<free_index::entry> blocks;
      for (unsigned pool : {large_pool, small_pool})
        for (auto& [stream, index] : pools_[pool].indexes) {
          index.ascending(blocks);
          for (const auto& e : blocks) {
            const page_range r = whole_pages(e.node);
            bytes += r.end - r.begin;
          }
        }
      return bytes;
    }
    for (auto& [address, s] : segments_)
      if (s.pool < 2 && is_whole_segment(s.head)) bytes += s.size;
    return bytes;
  }

  // --- expandable segments ----------------------------------------------------------------------

  // ExpandableSegment's segment_size_: the page a pool maps at a time.
  static std::uint64_t page_of(unsigned pool) noexcept {
    return kind_of(pool) == small_pool ? caching_detail::small_buffer
                                       : caching_detail::large_buffer;
  }

  // For best fit: the size a block can grow to, with the unmapped block after it.
  std::uint64_t expandable_size(std::uint32_t n) const noexcept {
    const block_node& b = nodes_[n];
    return b.size +
           (b.next != no_block && nodes_[b.next].state == unmapped ? nodes_[b.next].size : 0);
  }

  bool allocatable(std::uint32_t n) const noexcept {
    return n != no_block && nodes_[n].state != live;
  }

  // PyTorch find_expandable_block: the lowest-address unmapped block of the pool and stream (or the
  // free block just before it) from which free and unmapped blocks add up to `size`; no_block when
  // there is none, for which a new segment is reserved.
  std::uint32_t find_expandable_block(unsigned pool, stream_t stream, std::uint64_t size) {
    // Looked up, not inserted: a stream with no expandable segment in the pool costs no entry.
    const auto blocks = pools_[pool].unmapped.find(stream);
    if (blocks == pools_[pool].unmapped.end()) return no_block;
    for (auto& [address, u] : blocks->second) {
      std::uint32_t c = u;
      if (allocatable(nodes_[c].prev)) c = nodes_[c].prev;
      std::uint64_t bytes = 0;
      for (std::uint32_t b = c; bytes < size && allocatable(b); b = nodes_[b].next)
        bytes += nodes_[b].size;
      if (bytes >= size) return c;
    }
    return no_block;
  }

  // The bytes try_allocate_expandable_block maps from candidate `c` (no_block: a new segment): each
  // unmapped block on the way is mapped from its start, as many pages as the rest of the request
  // needs (at most the block), and merges with the free blocks beside it.
  std::uint64_t map_bytes(std::uint32_t c, std::uint64_t size, unsigned pool) const {
    const std::uint64_t page = page_of(pool);
    if (c == no_block) return align_up(size, page);
    std::uint64_t have = 0, need = 0;
    for (std::uint32_t b = c; have < size; b = nodes_[b].next) {
      if (nodes_[b].state == unmapped) {
        const std::uint64_t m =
            std::min<std::uint64_t>(align_up(size - have, page), nodes_[b].size);
        need += m;
        have += m;
      } else {
        have += nodes_[b].size;
      }
    }
    return need;
  }

  // map_bytes as it would be after release_cached_blocks: find_expandable_block and map_bytes on the
  // pool's segments (a default pool's) with the whole pages of every free block unmapped
  // (unmap_block) and merged with the unmapped blocks beside them.
  std::uint64_t map_bytes_after_release(unsigned pool, stream_t stream, std::uint64_t size) const {
    const std::uint64_t page = page_of(pool);
    struct part {
      std::uint64_t size;
      std::uint8_t state;
    };
    // A stream that never had an expandable segment in the pool gets a new one: no walk.
    if (pools_[pool].unmapped.count(stream) == 0) return align_up(size, page);
    std::vector<part> parts;
    for (auto& [base, seg] : segments_) {  // in address order, as PyTorch's unmapped set
      if (!seg.expandable || seg.pool != pool || nodes_[seg.head].stream != stream) continue;
      parts.clear();
      auto push = [&](std::uint64_t bytes, std::uint8_t state) {
        if (bytes == 0) return;
        if (state == unmapped && !parts.empty() && parts.back().state == unmapped)
          parts.back().size += bytes;
        else parts.push_back({bytes, state});
      };
      for (std::uint32_t i = seg.head; i != no_block; i = nodes_[i].next) {
        const block_node& b = nodes_[i];
        const page_range r = b.state == cached ? whole_pages(i) : page_range{0, 0};
        if (r.begin == r.end) {
          push(b.size, b.state);
          continue;
        }
        push(r.begin - b.address, cached);
        push(r.end - r.begin, unmapped);
        push(b.address + b.size - r.end, cached);
      }
      for (std::size_t k = 0; k < parts.size(); ++k) {
        if (parts[k].state != unmapped) continue;
        const std::size_t c = k > 0 && parts[k - 1].state != live ? k - 1 : k;
        std::uint64_t room = 0;
        for (std::size_t j = c; room < size && j < parts.size() && parts[j].state != live; ++j)
          room += parts[j].size;
        if (room < size) continue;
        std::uint64_t have = 0, need = 0;
        for (std::size_t j = c; have < size; ++j) {
          if (parts[j].state != unmapped) {
            have += parts[j].size;
            continue;
          }
          const std::uint64_t m =
              std::min<std::uint64_t>(align_up(size - have, page), parts[j].size);
          need += m;
          have += m;
        }
        return need;
      }
    }
    return align_up(size, page);  // a new segment
  }

  // PyTorch alloc_block with expandable segments: the cap against the allocation size, then
  // try_allocate_expandable_block: map what the candidate lacks, page by page, merging as it grows,
  // and take the grown block out of the free index. A device that cannot hold the pages fails it
  // with nothing mapped.
  bool try_allocate_expandable_block(std::uint64_t size, std::uint64_t alloc_size, unsigned pool,
                                     stream_t stream, std::uint32_t& out) {
    if (exceeds_max_reserved(alloc_size)) return false;
    std::uint32_t c = find_expandable_block(pool, stream, size);
    if (map_bytes(c, size, pool) > backing_available()) return false;
    if (c == no_block) c = new_expandable_segment(pool, stream, size);
    if (nodes_[c].state == unmapped) c = map_block(c, std::min(nodes_[c].size, size));
    while (nodes_[c].size < size) {
      const std::uint32_t u = nodes_[c].next;  // free is followed by unmapped
      c = map_block(u, std::min(size - nodes_[c].size, nodes_[u].size));
    }
    block_node& b = nodes_[c];
    index_for(pool, stream).erase(b.size, b.address, b.bucket);
    out = c;
    return true;
  }

  // The address space an expandable segment falls back to where PyTorch's size no longer fits:
  // 2^43 B, 1/1024 of the simulated address space (which ends at 2^53). Every real device's
  // 1 1/8 is below it, so on a real device the fallback is never taken.
  static constexpr std::uint64_t fallback_expandable_reservation = std::uint64_t{1} << 43;

  // A new ExpandableSegment: address space for 1 1/8 times the device's memory (PyTorch's size),
  // in whole pages, all of it one unmapped block. On a device of petabytes (a large cap) the
  // simulated address space holds a few ranges that large, one per pool and stream, and the next
  // segment would fail requests the device holds; where PyTorch's size no longer fits, a segment
  // reserves the fallback instead. Either is at least `at_least` (the request it is made for, or
  // the recorded ranges it is seeded with), and a request that a segment's unmapped rest cannot
  // hold gets a new segment, as in PyTorch when find_expandable_block finds none. Two tries at
  // most: no cost grows with bytes.
  std::uint32_t new_expandable_segment(unsigned pool, stream_t stream, std::uint64_t at_least = 0) {
    const std::uint64_t page = page_of(pool);
    const std::uint64_t total = get_backing().capacity();
    // Past 2^60 B no address space holds it anyway (and 1 1/8 of it would wrap).
    const std::uint64_t pytorch = total >> 60 != 0 ? std::uint64_t{1} << 60 : total + total / 8;
    std::uint64_t bytes = align_up(std::max(pytorch, at_least), page);
    address_t base;
    try {
      base = reserve_address_space(bytes, get_backing().granularity());
    } catch (const out_of_memory&) {
      const std::uint64_t fallback =
          align_up(std::max(std::min(pytorch, fallback_expandable_reservation), at_least), page);
      if (fallback == bytes) throw;
      bytes = fallback;
      base = reserve_address_space(bytes, get_backing().granularity());
    }
    const std::uint32_t n = new_node();
    block_node& b = nodes_[n];
    b.address = base;
    b.size = bytes;
    b.stream = stream;
    b.pool = static_cast<std::uint16_t>(pool);
    b.state = unmapped;
    b.prev = b.next = no_block;
    b.bucket = free_index::no_bucket;
    b.gc_count_base = 0;
    segments_.emplace(base, segment{bytes, n, pool, true});
    pools_[pool].unmapped[stream].emplace(base, n);
    return n;
  }

  // PyTorch map_block: maps `bytes` (rounded up to pages) at the start of unmapped block n; the
  // rest stays unmapped after it. The mapped block merges with free neighbours and is cached.
  // Returns the block it became part of.
  std::uint32_t map_block(std::uint32_t n, std::uint64_t bytes) {
    const unsigned pool = nodes_[n].pool;
    const stream_t stream = nodes_[n].stream;
    const std::uint64_t mapped =
        std::min<std::uint64_t>(align_up(bytes, page_of(pool)), nodes_[n].size);
    map_range(nodes_[n].address, mapped);
    reserved_ += mapped;
    auto& unmapped_blocks = pools_[pool].unmapped[stream];
    unmapped_blocks.erase(nodes_[n].address);
    if (mapped < nodes_[n].size) {
      const std::uint32_t r = new_node();
      block_node& b = nodes_[n];
      block_node& rest = nodes_[r];
      rest = b;
      rest.address = b.address + mapped;
      rest.size = b.size - mapped;
      rest.prev = n;
      if (rest.next != no_block) nodes_[rest.next].prev = r;
      b.next = r;
      b.size = mapped;
      unmapped_blocks.emplace(rest.address, r);
    }
    nodes_[n].state = cached;
    free_index& index = index_for(pool, stream);
    if (is_free(nodes_[n].prev)) {
      const std::uint32_t p = nodes_[n].prev;
      index.erase(nodes_[p].size, nodes_[p].address, nodes_[p].bucket);
      absorb_next(p);
      n = p;
    }
    if (is_free(nodes_[n].next)) {
      const std::uint32_t x = nodes_[n].next;
      index.erase(nodes_[x].size, nodes_[x].address, nodes_[x].bucket);
      absorb_next(n);
    }
    block_node& b = nodes_[n];
    stamp(b);
    b.bucket = index.insert(b.size, b.address, n, b.bucket);
    return n;
  }

  struct page_range {
    address_t begin, end;  // begin == end: no whole page
  };
  // The whole pages inside block n (ExpandableSegment::unmap's range).
  page_range whole_pages(std::uint32_t n) const {
    const block_node& b = nodes_[n];
    const std::uint64_t page = page_of(b.pool);
    auto it = std::prev(segments_.upper_bound(b.address));
    const address_t base = it->first;
    const address_t begin = base + align_up(b.address - base, page);
    const address_t end = base + align_down(b.address + b.size - base, page);
    return begin < end ? page_range{begin, end} : page_range{begin, begin};
  }

  // PyTorch unmap_block: unmaps the whole pages inside free block n; what is left before and after
  // them stays free, and the unmapped range merges with unmapped neighbours. Returns the unmapped
  // block, or no_block when n holds no whole page.
  std::uint32_t unmap_block(std::uint32_t n) {
    const page_range r = whole_pages(n);
    if (r.begin == r.end) return no_block;
    const unsigned pool = nodes_[n].pool;
    const stream_t stream = nodes_[n].stream;
    free_index& index = index_for(pool, stream);
    index.erase(nodes_[n].size, nodes_[n].address, nodes_[n].bucket);
    unmap_range(r.begin, r.end - r.begin);
    reserved_ -= r.end - r.begin;
    const address_t block_end = nodes_[n].address + nodes_[n].size;
    std::uint32_t u = n;
    if (r.begin > nodes_[n].address) {  // n keeps the free part before the pages
      u = new_node();
      block_node& b = nodes_[n];
      block_node& x = nodes_[u];
      x = b;
      x.address = r.begin;
      x.prev = n;
      if (x.next != no_block) nodes_[x.next].prev = u;
      b.next = u;
      b.size = r.begin - b.address;
      stamp(b);
      b.bucket = index.insert(b.size, b.address, n, free_index::no_bucket);
    }
    if (r.end < block_end) {  // and a free block after them
      const std::uint32_t a = new_node();
      block_node& x = nodes_[u];
      block_node& y = nodes_[a];
      y = x;
      y.address = r.end;
      y.size = block_end - r.end;
      y.prev = u;
      if (y.next != no_block) nodes_[y.next].prev = a;
      x.next = a;
      stamp(y);
      y.bucket = index.insert(y.size, y.address, a, free_index::no_bucket);
    }
    nodes_[u].size = r.end - r.begin;
    nodes_[u].state = unmapped;
    nodes_[u].bucket = free_index::no_bucket;
    auto& unmapped_blocks = pools_[pool].unmapped[stream];
    if (nodes_[u].prev != no_block && nodes_[nodes_[u].prev].state == unmapped) {
      const std::uint32_t p = nodes_[u].prev;
      unmapped_blocks.erase(nodes_[p].address);
      absorb_next(p);
      u = p;
    }
    if (nodes_[u].next != no_block && nodes_[nodes_[u].next].state == unmapped) {
      unmapped_blocks.erase(nodes_[nodes_[u].next].address);
      absorb_next(u);
    }
    unmapped_blocks[nodes_[u].address] = u;
    return u;
  }

  // PyTorch release_expandable_segment: a segment with nothing mapped gives its address space back.
  void release_expandable_segment(std::uint32_t u) {
    const block_node& b = nodes_[u];
    pools_[b.pool].unmapped[b.stream].erase(b.address);
    release_address_space(b.address, b.size);
    segments_.erase(b.address);
    free_nodes_.push_back(u);
  }

  void do_trim() override {
    releasable_known_ = false;
    std::uint64_t released = release_cached_blocks(release_threshold_);
    if (released != 0) trace(trace_op::trim, 0, released);
  }

  // --- the recorded state (allocator::seed) -----------------------------------------------------

  // Segments are obtained in the order given (a replay's region placement then puts them at their
  // recorded addresses), each cut into its live blocks at their recorded offsets and free blocks
  // between them, cached in the segment's pool and stream. A free gap after a live block that
  // should_split would not have cut off it (a large-pool block's slack of up to 1 MiB, an oversize
  // block's whole segment) is that block's: PyTorch never split it off. Mapped runs of expandable
  // segments become one expandable segment per pool and stream, each run at its offset from the
  // group's lowest run, unmapped between.
  void do_seed(const seed_state& state, std::vector<seeded_block>& out) override {
    if (policy_.kind != preset::pytorch)
      throw unsupported("caching: only preset pytorch starts from a recorded state");
    releasable_known_ = false;
    std::vector<std::size_t> order(state.blocks.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return state.blocks[a].address < state.blocks[b].address;
    });
    out.assign(state.blocks.size(), seeded_block{0, 0, 0});
    std::vector<bool> placed(state.blocks.size(), false);
    // The blocks inside a recorded range, ascending: a binary search in `order`.
    auto blocks_in = [&](address_t begin, std::uint64_t size) {
      auto first =
          std::lower_bound(order.begin(), order.end(), begin,
                           [&](std::size_t i, address_t a) { return state.blocks[i].address < a; });
      auto last = first;
      while (last != order.end() && state.blocks[*last].address < begin + size) ++last;
      return std::make_pair(first, last);
    };
    std::map<std::pair<unsigned, stream_t>, std::vector<std::size_t>> runs;  // expandable groups
    for (std::size_t k = 0; k < state.segments.size(); ++k) {
      const seed_segment& g = state.segments[k];
      if (g.expandable != expandable_)
        throw invalid_argument(
            "caching: recorded segment " + std::to_string(k) + " at " + format_address(g.address) +
            (g.expandable ? " is part of an expandable segment" : " is not expandable") +
            ", but expandable_segments is " + (expandable_ ? "on" : "off"));
      const unsigned pool = seed_pool(g);
      if (g.expandable) {
        runs[{pool, g.stream}].push_back(k);
        continue;
      }
      const auto [first, last] = blocks_in(g.address, g.size);
      const address_t base = obtain_region(g.size, pool);
      segments_.emplace(base, segment{g.size, no_block, pool, false});
      reserved_ += g.size;
      std::uint32_t prev = no_block;
      seed_run(state, first, last, g, base, g.address, pool, prev, placed, out);
      segments_.find(base)->second.head = head_of(prev);
    }
    for (auto& [key, members] : runs) {
      const auto [pool, stream] = key;
      std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
        return state.segments[a].address < state.segments[b].address;
      });
      const seed_segment& last = state.segments[members.back()];
      const std::uint32_t u = new_expandable_segment(
          pool, stream, last.address + last.size - state.segments[members.front()].address);
      const address_t base = nodes_[u].address;
      const std::uint64_t span = nodes_[u].size;
      const address_t origin = state.segments[members.front()].address;
      const std::uint64_t page = page_of(pool);
      pools_[pool].unmapped[stream].erase(base);
      free_nodes_.push_back(u);
      std::uint32_t prev = no_block;
      std::uint64_t at = 0;  // offset reached
      for (std::size_t k : members) {
        const seed_segment& g = state.segments[k];
        const std::uint64_t offset = g.address - origin;
        if (offset < at || offset % page != 0 || g.size % page != 0 || offset + g.size > span)
          throw invalid_argument("caching: recorded mapped range " + std::to_string(k) + " at " +
                                 format_address(g.address) + " (" + format_bytes(g.size) +
                                 ") is not whole " + format_bytes(page) +
                                 " pages inside one expandable segment");
        if (offset > at) link_unmapped(base + at, offset - at, pool, stream, prev);
        map_range(base + offset, g.size);
        reserved_ += g.size;
        const auto [first, last] = blocks_in(g.address, g.size);
        seed_run(state, first, last, g, base + offset, g.address, pool, prev, placed, out);
        at = offset + g.size;
      }
      if (at < span) link_unmapped(base + at, span - at, pool, stream, prev);
      segments_.find(base)->second.head = head_of(prev);
    }
    for (std::size_t i = 0; i < placed.size(); ++i)
      if (!placed[i])
        throw invalid_argument("caching: recorded block " + std::to_string(i) + " at " +
                               format_address(state.blocks[i].address) +
                               " lies in no recorded segment");
  }

  // The pool number of a recorded segment: its kind in its memory pool (a private pool is made
  // on first sight, as use_pool would, without making it current).
  unsigned seed_pool(const seed_segment& g) {
    const unsigned kind = g.small_pool ? small_pool : large_pool;
    if (g.pool == 0) return kind;
    const unsigned current = current_pools_;
    do_use_pool(g.pool);
    const unsigned pool = current_pools_ + kind;
    current_pools_ = current;
    return pool;
  }

  // Cuts the mapped range [recorded, recorded + g.size), now at `base`, into the given live blocks
  // and the free blocks between them, linked after `prev` (updated to the last node).
  template <class It>
  void seed_run(const seed_state& state, It first, It last, const seed_segment& g, address_t base,
                address_t recorded, unsigned pool, std::uint32_t& prev, std::vector<bool>& placed,
                std::vector<seeded_block>& out) {
    std::uint64_t at = 0;
    std::uint32_t last_live = no_block;
    for (It it = first; it != last; ++it) {
      const seed_block& b = state.blocks[*it];
      const std::uint64_t offset = b.address - recorded;
      if (offset < at || b.size == 0 || b.size > g.size - offset || b.requested > b.size)
        throw invalid_argument("caching: recorded block " + std::to_string(*it) + " at " +
                               format_address(b.address) + " (" + format_bytes(b.size) +
                               ") overlaps another or its segment's end, or is smaller than its "
                               "request");
      if (offset > at) seed_gap(base + at, offset - at, g.stream, pool, prev, last_live);
      last_live = link_node(base + offset, b.size, g.stream, pool, live, prev);
      out[*it] = {base + offset, b.size, last_live};
      placed[*it] = true;
      at = offset + b.size;
    }
    if (at < g.size) seed_gap(base + at, g.size - at, g.stream, pool, prev, last_live);
    // The rounded sizes of blocks that took their slack.
    for (It it = first; it != last; ++it) out[*it].rounded = nodes_[out[*it].cookie].size;
  }

  // A free gap: the slack of the live block just before it where PyTorch would not have split it
  // off, else a cached block.
  void seed_gap(address_t address, std::uint64_t size, stream_t stream, unsigned pool,
                std::uint32_t& prev, std::uint32_t& last_live) {
    if (last_live != no_block && prev == last_live &&
        !policy_.should_split(nodes_[last_live].size + size, nodes_[last_live].size,
                              kind_of(pool))) {
      nodes_[last_live].size += size;
      return;
    }
    const std::uint32_t n = link_node(address, size, stream, pool, cached, prev);
    stamp(nodes_[n]);
    nodes_[n].bucket = index_for(pool, stream).insert(size, address, n, free_index::no_bucket);
    last_live = no_block;
  }

  void link_unmapped(address_t address, std::uint64_t size, unsigned pool, stream_t stream,
                     std::uint32_t& prev) {
    const std::uint32_t n = link_node(address, size, stream, pool, unmapped, prev);
    pools_[pool].unmapped[stream].emplace(address, n);
  }

  std::uint32_t link_node(address_t address, std::uint64_t size, stream_t stream, unsigned pool,
                          std::uint8_t state, std::uint32_t& prev) {
    const std::uint32_t n = new_node();
    block_node& b = nodes_[n];
    b.address = address;
    b.size = size;
    b.stream = stream;
    b.pool = static_cast<std::uint16_t>(pool);
    b.state = state;
    b.prev = prev;
    b.next = no_block;
    b.bucket = free_index::no_bucket;
    b.gc_count_base = 0;
    if (prev != no_block) nodes_[prev].next = n;
    prev = n;
    return n;
  }

  std::uint32_t head_of(std::uint32_t n) const noexcept {
    while (nodes_[n].prev != no_block) n = nodes_[n].prev;
    return n;
  }

  // --- private pools ----------------------------------------------------------------------------

  // Private pool k gets the next two pool numbers (small, large) the first time it is used.
  void do_use_pool(std::uint32_t pool) override {
    if (pool == 0) {
      current_pools_ = 0;
    } else {
      auto it = private_pools_.find(pool);
      if (it == private_pools_.end()) {
        if (pools_.size() + 2 > 0xFFFF)
          throw invalid_argument("caching: at most 32766 private memory pools");
        it = private_pools_.emplace(pool, static_cast<unsigned>(pools_.size())).first;
        pools_.resize(pools_.size() + 2);
      }
      current_pools_ = it->second;
    }
  }

  // --- structure --------------------------------------------------------------------------------

  // Regions are segments; their kind is the pool number (0 small, 1 large; private pool pairs
  // follow in order of first use, small even and large odd).
  // An expandable segment is a region per run of mapped blocks and an unmapped region per hole
  // between them (the unmapped rest of its address space after the last mapped block is left out).
  void do_walk(layout_visitor& v) const override {
    for (auto& [address, s] : segments_) {
      if (s.expandable) {
        walk_expandable(v, s.head, s.pool);
        continue;
      }
      v.region({address, s.size, true, s.pool});
      for (std::uint32_t i = s.head; i != no_block; i = nodes_[i].next) {
        const block_node& b = nodes_[i];
        v.block({b.address, b.size, b.state == live ? block_state::live : block_state::free,
                 static_cast<std::uint32_t>(b.stream)});
      }
    }
  }

  void walk_expandable(layout_visitor& v, std::uint32_t head, unsigned pool) const {
    std::uint32_t i = head;
    while (i != no_block) {
      if (nodes_[i].state == unmapped) {
        if (nodes_[i].next != no_block) v.region({nodes_[i].address, nodes_[i].size, false, pool});
        i = nodes_[i].next;
        continue;
      }
      std::uint64_t run = 0;
      for (std::uint32_t j = i; j != no_block && nodes_[j].state != unmapped; j = nodes_[j].next)
        run += nodes_[j].size;
      v.region({nodes_[i].address, run, true, pool});
      for (; i != no_block && nodes_[i].state != unmapped; i = nodes_[i].next) {
        const block_node& b = nodes_[i];
        v.block({b.address, b.size, b.state == live ? block_state::live : block_state::free,
                 static_cast<std::uint32_t>(b.stream)});
      }
    }
  }

  bool do_was_freed(address_t address) const override {
    auto it = segments_.upper_bound(address);
    if (it == segments_.begin()) return false;
    --it;
    if (address >= it->first + it->second.size) return false;
    for (std::uint32_t i = it->second.head; i != no_block; i = nodes_[i].next)
      if (nodes_[i].address == address) return nodes_[i].state == cached;
    return false;
  }

  // --- blocks -----------------------------------------------------------------------------------

  // unmapped: address space of an expandable segment with no memory behind it.
  enum block_state_t : std::uint8_t { cached = 0, live = 1, unmapped = 2 };

  // One block of a segment. Invariant: the blocks of a segment, followed through next from its
  // head, tile it exactly; every free block is in the index of its pool and stream, and no two
  // free blocks are neighbours once a free has completed.
  struct block_node {
    address_t address;
    std::uint64_t size;
    stream_t stream;
    std::uint64_t gc_count_base;  // free_block_searches of its pool when it was last cached
    std::uint32_t prev, next;     // neighbours in the segment, or no_block
    std::uint32_t bucket;         // the free-index bucket it was last put in (a hint)
    std::uint16_t pool;           // pool number: kind (small_pool, large_pool) + 2 * private pool
    std::uint8_t state;           // block_state_t
  };
  struct segment {
    std::uint64_t size;  // expandable: the address space reserved
    std::uint32_t head;  // the block at the segment's start
    unsigned pool;
    bool expandable;
  };
  // One of PyTorch's BlockPools: the default small and large pools are numbers 0 and 1, each
  // private pool has the next two.
  struct pool_state {
    std::map<stream_t, free_index> indexes;  // per stream; ordered as PyTorch's sets
    std::uint64_t free_block_searches = 0;   // PyTorch get_free_blocks_call_count
    // Expandable segments: the unmapped blocks per stream, by address (PyTorch's pool.unmapped).
    std::map<stream_t, std::map<address_t, std::uint32_t>> unmapped;
  };
  static unsigned kind_of(unsigned pool) noexcept { return pool & 1u; }

  // PyTorch insert_into_blocks: a block cached again remembers its pool's free-block searches, the
  // clock of garbage collection's ages (which only runs, and only counts, when it is on).
  void stamp(block_node& b) noexcept {
    if (VRAMSCOPE_UNLIKELY(collect_garbage_)) b.gc_count_base = pools_[b.pool].free_block_searches;
  }

  bool is_free(std::uint32_t n) const noexcept {
    return n != no_block && nodes_[n].state == cached;
  }
  bool is_whole_segment(std::uint32_t n) const noexcept {
    const block_node& b = nodes_[n];
    return b.state == cached && b.prev == no_block && b.next == no_block;
  }

  std::uint32_t new_node() {
    if (!free_nodes_.empty()) {
      std::uint32_t n = free_nodes_.back();
      free_nodes_.pop_back();
      return n;
    }
    nodes_.emplace_back();
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }

  free_index& index_for(unsigned pool, stream_t stream) {
    last_index& last = last_index_[kind_of(pool)];
    if (VRAMSCOPE_LIKELY(last.index != nullptr && last.stream == stream && last.pool == pool))
      return *last.index;
    return index_for_slow(pool, stream);
  }
  VRAMSCOPE_NOINLINE free_index& index_for_slow(unsigned pool, stream_t stream) {
    free_index& index = pools_[pool].indexes[stream];  // std::map: the address stays valid
    last_index_[kind_of(pool)] = {stream, pool, &index};
    return index;
  }

  policy policy_;
  std::uint64_t max_reserved_;       // 0: no cap but the device's
  std::uint64_t release_threshold_;  // trim() keeps this many bytes reserved
  bool collect_garbage_ = false;
  bool expandable_ = false;
  bool unusual_ = false;  // either of the two: the fast path's one test

  std::vector<block_node> nodes_;
  std::vector<std::uint32_t> free_nodes_;
  std::map<address_t, segment> segments_;  // by address, for walks and lookups
  std::deque<pool_state> pools_;           // by pool number; a deque keeps their addresses
  std::unordered_map<std::uint32_t, unsigned> private_pools_;  // pool id -> its small pool number
  unsigned current_pools_ = 0;  // the small pool number of the current pool (use_pool)
  struct last_index {
    stream_t stream = 0;
    unsigned pool = 0;
    free_index* index = nullptr;
  } last_index_[2];
  // Invariant: the sum of the sizes of segments_ not expandable and of mapped expandable blocks.
  std::uint64_t reserved_ = 0;
  // releasable_bytes() while releasable_known_ (releasable_now); every change of the cache clears it.
  std::uint64_t releasable_ = 0;
  bool releasable_known_ = false;
};

const strategy_registration registration{
    {"caching",
     "size-class pool with splitting and coalescing inside cached segments, per-stream free lists, "
     "thread-safe; presets pow2 (power-of-two classes) and pytorch (CUDACachingAllocator's policy)",
     {{"preset", "string", "pow2",
       "pow2: power-of-two classes 512 B - 2 GiB; pytorch: PyTorch's CUDACachingAllocator policy "
       "(seed: pow2's former name, deprecated)"},
      {"thread_safe", "bool", "true", "lock every call, so that any thread may allocate and free"},
      {"segment_size", "size", "2MiB", "pow2: smallest segment obtained from the device"},
      {"max_split_size", "size", "unlimited",
       "pytorch (max_split_size_mb): cached blocks this large are never split and serve only "
       "requests this large; at least 20 MiB"},
      {"max_non_split_rounding_size", "size", "20MiB",
       "pytorch (max_non_split_rounding_mb): how much larger than an oversize request an oversize "
       "cached block may be"},
      {"roundup_power2_divisions", "string", "0",
       "pytorch: round sizes up to N divisions between powers of two: N, or per interval in MiB "
       "as 256:1,512:2,>:8; 0 rounds to 512 B"},
      {"garbage_collection_threshold", "double", "0",
       "pytorch: above this fraction of max_reserved, release the oldest unused segments before "
       "obtaining a new one; needs max_reserved; 0 is off"},
      {"expandable_segments", "bool", "false",
       "pytorch (expandable_segments:True): one segment per stream and pool, address space that "
       "grows by mapping 2 MiB (small pool) or 20 MiB (large pool) pages; release unmaps free "
       "pages"},
      {"max_reserved", "size", "0",
       "cap on reserved memory, as PyTorch's per-process memory fraction; 0: the device's memory"},
      {"release_threshold", "size", "0",
       "trim() keeps this many bytes reserved; 0 releases every unused segment (empty_cache)"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<caching>(b, p);
    }};

}  // namespace
}  // namespace vramscope
