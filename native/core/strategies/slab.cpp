// slab: segregated size classes (256 B, 1, 4, 16, 64 KiB by default). Each class owns slabs, regions
// of slab_size cut into equal slots, grown one at a time on demand; a request takes a slot of the
// smallest class that fits. Requests above the largest class get a dedicated region (or fail).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

constexpr std::uint64_t max_slots_per_slab = std::uint64_t{1} << 20;

constexpr std::uint32_t no_slot = ~std::uint32_t{0};  // ends a free list
constexpr std::uint32_t slot_live = no_slot - 1;      // marks a slot handed out
constexpr std::size_t large_alignment = 512;

// One region cut into `capacity` slots of its class's size. Free slots form an intrusive singly
// linked index list through next_slot (host-side: device memory is never touched).
// Invariant: live + free_count == capacity, and exactly `live` entries of next_slot are slot_live.
struct slab {
  address_t base;
  std::uint32_t capacity;
  std::uint32_t free_count;
  std::uint32_t live = 0;
  std::uint32_t free_head = 0;
  std::uint32_t id = 0;  // its index in slab_allocator::slab_of_id_, the blocks' cookie
  std::uint32_t class_index = 0;
  // A slot's index is (address - base) / size, an exact division: (address - base) >> shift times
  // the inverse of size's odd part modulo 2^64 (no divide instruction).
  unsigned shift = 0;
  std::uint64_t odd_inverse = 1;
  bool in_partial = false;  // on its class's stack of slabs that have a free slot
  std::vector<std::uint32_t> next_slot;

  slab(address_t b, std::uint32_t slots)
      : base(b), capacity(slots), free_count(slots), next_slot(slots) {
    // Lowest address first, so a fresh slab fills from its start.
    for (std::uint32_t i = 0; i < slots; ++i) next_slot[i] = i + 1 < slots ? i + 1 : no_slot;
  }
  std::uint32_t slot_of(address_t a) const {
    return static_cast<std::uint32_t>(((a - base) >> shift) * odd_inverse);
  }
  std::uint32_t pop_free() {
    std::uint32_t slot = free_head;
    free_head = next_slot[slot];
    next_slot[slot] = slot_live;
    --free_count;
    ++live;
    VRAMSCOPE_ASSERT(live + free_count == capacity);
    return slot;
  }
  void push_free(std::uint32_t slot) {
    VRAMSCOPE_ASSERT(next_slot[slot] == slot_live);
    next_slot[slot] = free_head;
    free_head = slot;
    ++free_count;
    --live;
    VRAMSCOPE_ASSERT(live + free_count == capacity);
  }
};

struct size_class {
  std::uint64_t size;
  std::uint32_t slots_per_slab;
  std::vector<slab*> partial;                // slabs with a free slot; the top one serves requests
  std::vector<std::unique_ptr<slab>> slabs;  // every slab of this class, sorted by base address
  unsigned shift;                            // size = odd << shift
  std::uint64_t odd_inverse;                 // odd * odd_inverse == 1 modulo 2^64

  std::uint64_t slab_bytes() const { return std::uint64_t{slots_per_slab} * size; }
  slab* find(address_t a) const {
    auto it =
        std::upper_bound(slabs.begin(), slabs.end(), a,
                         [](address_t x, const std::unique_ptr<slab>& s) { return x < s->base; });
    if (it == slabs.begin()) return nullptr;
    slab* s = (--it)->get();
    return a < s->base + slab_bytes() ? s : nullptr;
  }
};

class slab_allocator final : public allocator {
 public:
  slab_allocator(backing& b, const params& p) : allocator("slab", b) {
    std::vector<std::uint64_t> sizes =
        p.get_size_list("classes", {256, 1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB});
    slab_size_ = p.get_size("slab_size", 2 * MiB);
    max_slabs_ = p.get_uint("max_slabs", 0);
    release_empty_slabs_ = p.get_bool("release_empty_slabs", false);
    std::string large = p.get_string("large", "region");
    if (large != "region" && large != "fail")
      throw invalid_argument("slab: parameter 'large' must be 'region' or 'fail', got '" + large +
                             "'");
    large_fails_ = large == "fail";

    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (std::uint64_t s : sizes)
      if (s == 0 || s % min_alignment != 0)
        throw invalid_argument(
            "slab: parameter 'classes': every class must be a multiple of 256 B, got " +
            format_bytes(s));
    if (slab_size_ < sizes.back())
      throw invalid_argument("slab: parameter 'slab_size' (" + format_bytes(slab_size_) +
                             ") is smaller than the largest class (" + format_bytes(sizes.back()) +
                             ")");
    // Every slot is state of its own and a block of every walk of the map: a slab holds at most
    // 2^20 of them, whatever their bytes.
    if (slab_size_ / sizes.front() > max_slots_per_slab)
      throw invalid_argument(
          "slab: parameter 'slab_size' holds more than 2^20 slots of the "
          "smallest class (" +
          format_bytes(slab_size_) + " / " + format_bytes(sizes.front()) + ")");
    for (std::uint64_t s : sizes) {
      size_class c;
      c.size = s;
      c.slots_per_slab = static_cast<std::uint32_t>(slab_size_ / s);
      c.shift = 0;
      while (((s >> c.shift) & 1) == 0) ++c.shift;
      const std::uint64_t odd = s >> c.shift;
      // Newton's iteration doubles the correct low bits each step: 3 (odd * odd == 1 mod 8),
      // then 6, 12, 24, 48, 96.
      std::uint64_t inverse = odd;
      for (int i = 0; i < 5; ++i) inverse *= 2 - odd * inverse;
      c.odd_inverse = inverse;
      classes_.push_back(std::move(c));
    }
    largest_class_ = sizes.back();
    // first_class_at_log2_[k]: the first class of at least 2^k bytes (a request of n bytes, with
    // 2^k <= n, need not look at any class below it).
    for (unsigned k = 0; k < 64; ++k) {
      std::size_t i = 0;
      while (i < classes_.size() && classes_[i].size < (std::uint64_t{1} << k)) ++i;
      first_class_at_log2_[k] = static_cast<std::uint32_t>(i);
    }
  }

  ~slab_allocator() override {
    for (auto& c : classes_)
      for (auto& s : c.slabs) get_backing().free_region(s->base, c.slab_bytes());
    for (const large_region& r : large_)
      if (r.bytes != 0) get_backing().free_region(r.address, r.bytes);
  }

 private:
  // Fast path: the smallest class that fits, and a slot popped from its warmest partial slab. The
  // cookie is the slab's id (for a dedicated region, large_flag and its index in large_).
  allocation do_allocate(std::size_t bytes, stream_t, std::uint32_t& cookie) override {
    if (VRAMSCOPE_LIKELY(bytes <= largest_class_)) {
      size_class& c = classes_[class_for(bytes)];
      if (VRAMSCOPE_LIKELY(!c.partial.empty())) {
        slab& s = *c.partial.back();
        std::uint32_t slot = s.pop_free();
        if (VRAMSCOPE_UNLIKELY(s.free_count == 0)) leave_partial(c);
        cookie = s.id;
        return {s.base + slot * c.size, c.size};
      }
    }
    return allocate_slow(bytes, cookie);
  }

  void do_deallocate(address_t address, std::uint64_t rounded, std::uint32_t id,
                     stream_t) override {
    if (VRAMSCOPE_LIKELY(id < large_flag)) {
      slab& s = *slab_of_id_[id];
      VRAMSCOPE_ASSERT(address >= s.base && (address - s.base) % classes_[s.class_index].size == 0);
      s.push_free(s.slot_of(address));
      if (VRAMSCOPE_UNLIKELY(!s.in_partial || (s.live == 0 && release_empty_slabs_)))
        after_free_slow(classes_[s.class_index], s);
      return;
    }
    return_large(address, rounded, id & ~large_flag);
  }

  std::size_t class_for(std::size_t bytes) const {
    // From the first class that could fit, a short linear scan.
    std::size_t i = first_class_at_log2_[log2_floor(bytes)];
    while (classes_[i].size < bytes) ++i;
    return i;
  }

  void leave_partial(size_class& c) {
    c.partial.back()->in_partial = false;
    c.partial.pop_back();
  }

  VRAMSCOPE_NOINLINE allocation allocate_slow(std::size_t bytes, std::uint32_t& cookie) {
    if (bytes > largest_class_) return allocate_large(bytes, cookie);
    std::size_t index = class_for(bytes);
    size_class& c = classes_[index];
    if (max_slabs_ != 0 && c.slabs.size() >= max_slabs_)
      fail(bytes, 0,
           ("size class " + format_bytes(c.size) + " has max_slabs (" + std::to_string(max_slabs_) +
            ") slabs, every slot in use")
               .c_str());
    address_t base = obtain_or_fail(c.slab_bytes(), static_cast<std::uint32_t>(index), bytes,
                                    "no memory for a new slab of class " + format_bytes(c.size));
    auto owned = std::make_unique<slab>(base, c.slots_per_slab);
    slab* s = owned.get();
    s->class_index = static_cast<std::uint32_t>(index);
    s->shift = c.shift;
    s->odd_inverse = c.odd_inverse;
    if (free_ids_.empty()) {
      s->id = static_cast<std::uint32_t>(slab_of_id_.size());
      slab_of_id_.push_back(s);
    } else {
      s->id = free_ids_.back();
      free_ids_.pop_back();
      slab_of_id_[s->id] = s;
    }
    auto at =
        std::upper_bound(c.slabs.begin(), c.slabs.end(), base,
                         [](address_t x, const std::unique_ptr<slab>& t) { return x < t->base; });
    c.slabs.insert(at, std::move(owned));
    s->in_partial = true;
    c.partial.push_back(s);
    return do_allocate(bytes, 0, cookie);
  }

  VRAMSCOPE_NOINLINE allocation allocate_large(std::size_t bytes, std::uint32_t& cookie) {
    if (large_fails_)
      fail(bytes, 0,
           ("request larger than the largest class " + format_bytes(largest_class_) +
            " (large=fail)")
               .c_str());
    std::size_t rounded = align_up(bytes, large_alignment);
    if (VRAMSCOPE_UNLIKELY(rounded < bytes))  // within 512 B of 2^64: no region that large
      fail(bytes, 0, "request too large for a dedicated region");
    if (VRAMSCOPE_UNLIKELY(free_large_.empty() && large_.size() >= large_flag))
      fail(bytes, 0, "2^31 dedicated regions live at once");
    address_t a = obtain_or_fail(rounded, large_kind(), bytes, "no memory for a dedicated region");
    std::uint32_t index;
    if (free_large_.empty()) {
      index = static_cast<std::uint32_t>(large_.size());
      large_.push_back({a, rounded});
    } else {
      index = free_large_.back();
      free_large_.pop_back();
      large_[index] = {a, rounded};
    }
    cookie = large_flag | index;
    return {a, rounded};
  }

  VRAMSCOPE_NOINLINE void return_large(address_t address, std::uint64_t rounded,
                                       std::uint32_t index) {
    VRAMSCOPE_ASSERT(large_[index].address == address && large_[index].bytes == rounded);
    large_[index].bytes = 0;
    free_large_.push_back(index);
    return_region(address, rounded, large_kind());
  }

  // The slab was full (it rejoins the partial stack) or is now empty (it may go back).
  VRAMSCOPE_NOINLINE void after_free_slow(size_class& c, slab& s) {
    if (!s.in_partial) {
      s.in_partial = true;
      c.partial.push_back(&s);
    }
    if (s.live == 0 && release_empty_slabs_) release_slab(c, s);
  }

  void release_slab(size_class& c, slab& s) {
    std::size_t index = static_cast<std::size_t>(&c - classes_.data());
    if (s.in_partial) c.partial.erase(std::find(c.partial.begin(), c.partial.end(), &s));
    slab_of_id_[s.id] = nullptr;
    free_ids_.push_back(s.id);
    address_t base = s.base;
    auto it = std::find_if(c.slabs.begin(), c.slabs.end(),
                           [&](const std::unique_ptr<slab>& t) { return t.get() == &s; });
    c.slabs.erase(it);  // destroys s
    return_region(base, c.slab_bytes(), static_cast<std::uint32_t>(index));
  }

  void do_trim() override {
    for (auto& c : classes_) {
      std::vector<slab*> empty;
      for (auto& s : c.slabs)
        if (s->live == 0) empty.push_back(s.get());
      for (slab* s : empty) release_slab(c, *s);
    }
  }

  address_t obtain_or_fail(std::size_t region_bytes, std::uint32_t kind, std::size_t requested,
                           const std::string& why) {
    try {
      return obtain_region(region_bytes, kind);
    } catch (const out_of_memory& e) {
      fail(requested, e.available(), why.c_str());
    }
  }

  std::uint32_t large_kind() const { return static_cast<std::uint32_t>(classes_.size()); }

  void do_walk(layout_visitor& v) const override {
    for (std::size_t k = 0; k < classes_.size(); ++k) {
      const size_class& c = classes_[k];
      for (auto& s : c.slabs) {
        v.region({s->base, c.slab_bytes(), true, static_cast<std::uint32_t>(k)});
        std::uint32_t live = 0;
        for (std::uint32_t i = 0; i < s->capacity; ++i) {
          bool is_live = s->next_slot[i] == slot_live;
          live += is_live;
          v.block({s->base + i * c.size, c.size, is_live ? block_state::live : block_state::free,
                   static_cast<std::uint32_t>(k)});
        }
        VRAMSCOPE_ASSERT(live == s->live && s->live + s->free_count == s->capacity);
      }
    }
    // Dedicated regions in address order, as the slabs are (large_ is in the order of its slots).
    std::vector<large_region> live;
    for (const large_region& r : large_)
      if (r.bytes != 0) live.push_back(r);
    std::sort(live.begin(), live.end(),
              [](const large_region& x, const large_region& y) { return x.address < y.address; });
    for (const large_region& r : live) {
      v.region({r.address, r.bytes, true, large_kind()});
      v.block({r.address, r.bytes, block_state::live, large_kind()});
    }
  }

  bool do_was_freed(address_t a) const override {
    for (const size_class& c : classes_) {
      const slab* s = c.find(a);
      if (s != nullptr)
        return (a - s->base) % c.size == 0 && s->next_slot[(a - s->base) / c.size] != slot_live;
    }
    return false;  // dedicated regions go back to the device at once and are not remembered
  }

  // A dedicated region's cookie: this bit and its index in large_ (slab ids stay below it).
  static constexpr std::uint32_t large_flag = std::uint32_t{1} << 31;
  struct large_region {
    address_t address;
    std::uint64_t bytes;  // 0: the slot is free (on free_large_)
  };

  std::vector<size_class> classes_;
  std::uint32_t first_class_at_log2_[64];
  std::vector<slab*> slab_of_id_;  // every slab by its id; nullptr for ids free for reuse
  std::vector<std::uint32_t> free_ids_;
  std::uint64_t largest_class_ = 0;
  std::uint64_t slab_size_ = 0;
  std::uint64_t max_slabs_ = 0;
  bool release_empty_slabs_ = false;
  bool large_fails_ = false;
  // Dedicated regions of requests above the largest class, by the index their cookie holds: taken
  // and given back in O(1) (a map by address cost a tree's insert and erase on every one).
  std::vector<large_region> large_;
  std::vector<std::uint32_t> free_large_;
};

const strategy_registration registration{
    {"slab",
     "size classes, a slab per class grown on demand, dedicated regions above the largest class",
     {{"classes", "size_list", "256,1KiB,4KiB,16KiB,64KiB", "slot sizes, multiples of 256 B"},
      {"slab_size", "size", "2MiB", "bytes of each slab (whole slots of its class)"},
      {"max_slabs", "uint", "0", "slabs each class may grow to (0: unlimited)"},
      {"release_empty_slabs", "bool", "false",
       "false: trim() releases empty slabs; true: a slab goes back as soon as it is empty"},
      {"large", "string", "region",
       "above the largest class: 'region' (a dedicated region, 512 B rounding) or 'fail'"}},
     strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<slab_allocator>(b, p);
    }};

}  // namespace
}  // namespace vramscope
