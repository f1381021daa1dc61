// stitching: a caching allocator over virtual memory after GMLake (Guo et al., "GMLake: Efficient
// and Transparent GPU Memory Defragmentation for Large-scale DNN Training with Virtual Memory
// Stitching", ASPLOS 2024). Segments are reserved address space with physical memory mapped in
// chunks (2 MiB by default), cut into blocks that are split and merged per stream as PyTorch's
// caching allocator does (its small and large pools, its rounding to 512 B and its split rules).
// Where no cached block fits a request of at least fragment_limit bytes, the chunks no live block
// touches, in any segment of the request's stream, are stitched: moved (unmapped where they lie,
// the same physical memory mapped again) into one new range of address space, with only the
// chunks still missing obtained from the device (GMLake's "insufficient blocks" state). The device
// is asked for more only for what free chunks cannot give. Where it refuses, every free chunk of
// every stream goes back to it and the request is tried once more.
//
// GMLake keeps a stitched range beside the segments whose memory it maps (the same memory at two
// addresses) and caches both; here a chunk is mapped at one address at a time: a stitch moves it,
// leaving a hole in the segment it came from, and the new range is a segment like any other.
// Reserved memory is the mapped chunks, counted once.
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

constexpr std::uint64_t small_size = 1 * MiB;     // requests up to this go to the small pool
constexpr std::uint64_t small_buffer = 2 * MiB;   // a small-pool segment
constexpr std::uint64_t large_buffer = 20 * MiB;  // a large-pool segment for requests under 10 MiB
constexpr std::uint64_t min_large_alloc = 10 * MiB;
constexpr std::uint64_t round_large = 2 * MiB;  // larger requests get a segment rounded to this
constexpr std::uint64_t min_block = 512;

enum : std::uint8_t { small_pool = 0, large_pool = 1 };
// Region kinds in the walk: the pool, or a stitched segment (of the large pool).
constexpr std::uint32_t stitched_kind = 2;

class stitching final : public allocator {
 public:
  stitching(backing& b, const params& p)
      : allocator("stitching", b, p.get_bool("thread_safe", true)),
        chunk_(p.get_size("chunk_size", 2 * MiB)),
        fragment_limit_(p.get_size("fragment_limit", 2 * MiB)),
        stitch_limit_(p.get_uint("stitch_limit", 64)) {
    // A segment, its blocks and its chunks belong to one stream; chunks that leave a stream go back
    // to the device first (unmap_range waits for the device).
    reuse_is_stream_ordered();
    if (!b.has_vmm())
      throw unsupported(
          std::string("stitching maps chunks into reserved address space, which the ") + b.name() +
          " backing cannot");
    if (chunk_ == 0 || chunk_ % b.granularity() != 0)
      throw invalid_argument("stitching: chunk_size " + format_bytes(chunk_) +
                             " is not a multiple of the backing's granularity " +
                             format_bytes(b.granularity()));
    if (small_buffer % chunk_ != 0 && chunk_ % small_buffer != 0)
      throw invalid_argument("stitching: chunk_size " + format_bytes(chunk_) +
                             " must divide 2 MiB or be a multiple of it");
  }

  ~stitching() override {
    for (auto& [base, id] : by_base_) {
      const segment& s = segments_[id];
      for_each_run(id, [&](address_t a, std::uint64_t n) { get_backing().unmap(a, n); });
      get_backing().release_address_space(base, s.size);
    }
  }

 private:
  struct block {
    std::uint64_t size;
    std::uint32_t segment;
    bool free;
  };
  struct segment {
    address_t base;
    std::uint64_t size;  // address space reserved
    stream_t stream;
    std::uint8_t pool;
    bool stitched;
    std::uint32_t blocks = 0;  // how many blocks it holds (0: nothing mapped, released)
  };
  // A free block, found by best fit: its pool and stream, then the smallest size, lowest address.
  using free_key = std::tuple<std::uint8_t, stream_t, std::uint64_t, address_t>;
  // A run of whole free chunks a stitch takes from a free block.
  struct piece {
    address_t block;  // the free block
    address_t from;   // chunk-aligned, inside it
    std::uint64_t bytes;
  };

  static std::uint64_t round_size(std::size_t bytes) {
    return bytes < min_block ? min_block : align_up(bytes, min_block);
  }
  std::uint64_t segment_size(std::uint64_t n) const {
    std::uint64_t s = n <= small_size
                          ? small_buffer
                          : (n < min_large_alloc ? large_buffer : align_up(n, round_large));
    return align_up(s, chunk_);
  }

  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t&) override {
    const std::uint64_t n = round_size(bytes);
    if (VRAMSCOPE_UNLIKELY(n < bytes || n > (std::uint64_t{1} << 62)))
      return refuse(bytes, 0, [] { return "request too large"; });
    const std::uint8_t pool = n <= small_size ? small_pool : large_pool;
    auto fit = free_.lower_bound({pool, stream, n, 0});
    if (fit != free_.end() && std::get<0>(*fit) == pool && std::get<1>(*fit) == stream)
      return take(std::get<3>(*fit), n);
    address_t a = 0;
    if (grow(n, pool, stream, a)) return take(a, n);
    // The device refused: every free chunk goes back, then one more try (PyTorch's
    // release_cached_blocks before its last attempt).
    if (release_free_chunks() > 0 && grow(n, pool, stream, a)) return take(a, n);
    return refuse(bytes, backing_available(), [&] {
      return "the device has " + format_bytes(backing_available()) + " left, after stitching " +
             "every free chunk and releasing the rest";
    });
  }

  // Hands out the free block at `a` for n bytes, splitting off the rest where PyTorch would.
  allocation take(address_t a, std::uint64_t n) {
    auto it = blocks_.find(a);
    block& b = it->second;
    const segment& s = segments_[b.segment];
    free_.erase({s.pool, s.stream, b.size, a});
    const std::uint64_t rest = b.size - n;
    const bool split = s.pool == small_pool ? rest >= min_block : rest > small_size;
    b.free = false;
    if (split) {
      b.size = n;
      blocks_.emplace_hint(std::next(it), a + n, block{rest, b.segment, true});
      ++segments_[b.segment].blocks;
      free_.insert({s.pool, s.stream, rest, a + n});
      trace(trace_op::split, a, n);
    }
    return {a, b.size};
  }

  // A new segment with a free block of at least n bytes, for the pool and stream: stitched from free
  // chunks where the request may be, else obtained whole. False where the device refuses; nothing
  // has changed then.
  bool grow(std::uint64_t n, std::uint8_t pool, stream_t stream, address_t& at) {
    std::vector<piece> pieces;
    std::uint64_t gathered = 0;
    const std::uint64_t want = align_up(n, chunk_);
    const bool stitches = pool == large_pool && n >= fragment_limit_ && stitch_limit_ > 0;
    if (stitches) gathered = gather(stream, want, pieces);
    // A request that may be stitched gets just its chunks where PyTorch's segment size (20 MiB for
    // one under 10 MiB) would not fit: the shortfall is all it needs, as in a stitch.
    std::uint64_t size = gathered > 0 ? want : segment_size(n);
    if (stitches && size > backing_available() + gathered) size = want;
    const std::uint64_t fresh = size - gathered;
    if (fresh > backing_available()) return false;
    const address_t base = reserve_address_space(size, chunk_);
    if (fresh > 0) {
      try {
        map_range(base + gathered, fresh);
      } catch (const out_of_memory&) {
        release_address_space(base, size);
        return false;
      }
    }
    const std::uint32_t id = new_segment({base, size, stream, pool, gathered > 0});
    std::uint64_t offset = 0;
    for (const piece& p : pieces) {
      cut(p);
      remap_range(p.from, base + offset, p.bytes);
      offset += p.bytes;
    }
    release_empty_segments();
    blocks_.emplace(base, block{size, id, true});
    segments_[id].blocks = 1;
    free_.insert({pool, stream, size, base});
    at = base;
    return true;
  }

  // Chooses whole free chunks of the stream's large-pool segments, up to `want` bytes, from at most
  // stitch_limit free blocks, the largest first (the fewest pieces to move). Changes nothing.
  std::uint64_t gather(stream_t stream, std::uint64_t want, std::vector<piece>& out) const {
    std::uint64_t got = 0;
    const auto first = free_.lower_bound({large_pool, stream, 0, 0});
    auto it = free_.upper_bound({large_pool, stream, ~std::uint64_t{0}, ~address_t{0}});
    while (it != first && got < want && out.size() < stitch_limit_) {
      --it;
      const address_t a = std::get<3>(*it);
      const std::uint64_t size = std::get<2>(*it);
      if (size < chunk_) break;  // this one and every smaller one hold no whole chunk
      const address_t from = align_up(a, chunk_), end = (a + size) / chunk_ * chunk_;
      if (from >= end) continue;
      const std::uint64_t bytes = std::min<std::uint64_t>(end - from, want - got);
      out.push_back({a, from, bytes});
      got += bytes;
    }
    return got;
  }

  // Takes [p.from, p.from + p.bytes) out of its free block, keeping what is left either side.
  void cut(const piece& p) {
    auto it = blocks_.find(p.block);
    const block b = it->second;
    segment& s = segments_[b.segment];
    free_.erase({s.pool, s.stream, b.size, p.block});
    blocks_.erase(it);
    --s.blocks;
    if (p.from > p.block) add_free(p.block, p.from - p.block, b.segment);
    const address_t end = p.from + p.bytes, block_end = p.block + b.size;
    if (end < block_end) add_free(end, block_end - end, b.segment);
    if (s.blocks == 0) drop_segment(b.segment);
  }

  void add_free(address_t a, std::uint64_t size, std::uint32_t id) {
    blocks_.emplace(a, block{size, id, true});
    ++segments_[id].blocks;
    free_.insert({segments_[id].pool, segments_[id].stream, size, a});
  }

  void do_deallocate(address_t a, std::uint64_t, std::uint32_t, stream_t) override {
    auto it = blocks_.find(a);
    VRAMSCOPE_ASSERT(it != blocks_.end() && !it->second.free);
    const std::uint32_t id = it->second.segment;
    segment& s = segments_[id];
    it->second.free = true;
    bool merged = false;
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->second.free && prev->second.segment == id && prev->first + prev->second.size == a) {
        free_.erase({s.pool, s.stream, prev->second.size, prev->first});
        prev->second.size += it->second.size;
        blocks_.erase(it);
        --s.blocks;
        it = prev;
        merged = true;
      }
    }
    auto next = std::next(it);
    if (next != blocks_.end() && next->second.free && next->second.segment == id &&
        it->first + it->second.size == next->first) {
      free_.erase({s.pool, s.stream, next->second.size, next->first});
      it->second.size += next->second.size;
      blocks_.erase(next);
      --s.blocks;
      merged = true;
    }
    if (merged) trace(trace_op::merge, it->first, it->second.size);
    free_.insert({s.pool, s.stream, it->second.size, it->first});
  }

  // Every whole chunk of every free block goes back to the device; a segment left with nothing
  // mapped gives its address space back. Returns the bytes unmapped.
  std::uint64_t release_free_chunks() {
    std::vector<piece> all;
    for (const free_key& k : free_) {
      const address_t a = std::get<3>(k);
      const std::uint64_t size = std::get<2>(k);
      const address_t from = align_up(a, chunk_), end = (a + size) / chunk_ * chunk_;
      if (from < end) all.push_back({a, from, end - from});
    }
    std::uint64_t released = 0;
    for (const piece& p : all) {
      cut(p);
      unmap_range(p.from, p.bytes);
      released += p.bytes;
    }
    release_empty_segments();
    return released;
  }

  void do_trim() override { release_free_chunks(); }

  // --- segments ---------------------------------------------------------------------------------

  std::uint32_t new_segment(const segment& s) {
    std::uint32_t id;
    if (!unused_ids_.empty()) {
      id = unused_ids_.back();
      unused_ids_.pop_back();
      segments_[id] = s;
    } else {
      id = static_cast<std::uint32_t>(segments_.size());
      segments_.push_back(s);
    }
    by_base_.emplace(s.base, id);
    return id;
  }

  // A segment whose every chunk has moved away: its address space is released once the unmaps
  // that emptied it are done (drop_segment only marks it; cut runs before the remap).
  void drop_segment(std::uint32_t id) { emptied_.push_back(id); }

  void release_empty_segments() {
    for (std::uint32_t id : emptied_) {
      const segment& s = segments_[id];
      if (s.blocks != 0) continue;
      by_base_.erase(s.base);
      release_address_space(s.base, s.size);
      unused_ids_.push_back(id);
    }
    emptied_.clear();
  }

  // The mapped runs of a segment, in address order: f(address, bytes).
  template <class F>
  void for_each_run(std::uint32_t id, F&& f) const {
    const segment& s = segments_[id];
    auto it = blocks_.lower_bound(s.base);
    address_t start = 0, end = 0;
    for (; it != blocks_.end() && it->first < s.base + s.size; ++it) {
      if (end != 0 && it->first == end) {
        end += it->second.size;
        continue;
      }
      if (end != 0) f(start, end - start);
      start = it->first;
      end = it->first + it->second.size;
    }
    if (end != 0) f(start, end - start);
  }

  // --- the map ----------------------------------------------------------------------------------

  // A segment is a mapped region per run of chunks and an unmapped region per hole a stitch left;
  // its kind the pool (0 small, 1 large) or 2 for a stitched segment.
  void do_walk(layout_visitor& v) const override {
    for (auto& [base, id] : by_base_) {
      const segment& s = segments_[id];
      const std::uint32_t kind = s.stitched ? stitched_kind : s.pool;
      address_t at = base;
      for_each_run(id, [&](address_t a, std::uint64_t n) {
        if (a > at) v.region({at, a - at, false, kind});
        v.region({a, n, true, kind});
        at = a + n;
      });
      if (at < base + s.size) v.region({at, base + s.size - at, false, kind});
      for (auto it = blocks_.lower_bound(base); it != blocks_.end() && it->first < base + s.size;
           ++it)
        v.block({it->first, it->second.size,
                 it->second.free ? block_state::free : block_state::live,
                 static_cast<std::uint32_t>(s.stream)});
    }
  }

  bool do_was_freed(address_t a) const override {
    auto it = blocks_.find(a);
    return it != blocks_.end() && it->second.free;
  }

  std::uint64_t chunk_;
  std::uint64_t fragment_limit_;
  std::uint64_t stitch_limit_;
  std::map<address_t, block> blocks_;  // every block of every segment, by address
  std::set<free_key> free_;
  std::vector<segment> segments_;
  std::vector<std::uint32_t> unused_ids_;
  std::vector<std::uint32_t> emptied_;
  std::map<address_t, std::uint32_t> by_base_;  // live segments by their address
};

const strategy_registration registration{
    {"stitching",
     "caching over VMM chunks; stitches free chunks into a new range before growing (GMLake)",
     {{"chunk_size", "size", "2MiB",
       "physical chunk mapped at a time, a multiple of the granularity (GMLake: 2 MiB)"},
      {"fragment_limit", "size", "2MiB",
       "the smallest request that may be stitched (GMLake's fragment_limit, 512 MB there)"},
      {"stitch_limit", "uint", "64",
       "the most free blocks one stitch gathers chunks from (0: never stitch)"},
      {"thread_safe", "bool", "true", "lock every call"}},
     strategy_traits().needs_vmm().runs_on(backing_kind::cuda_vmm)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<stitching>(b, p);
    }};

}  // namespace
}  // namespace vramscope
