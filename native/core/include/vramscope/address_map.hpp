// An open-addressing hash map from block address to a small value, for the allocator's table of
// live blocks. Linear probing with backward-shift deletion (no tombstones), so a warm
// insert + erase of the same address touches one cache line. Keys are multiples of 256 (block
// addresses, or sizes rounded to 512 B): the hash ignores the low 8 bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vramscope/types.hpp"

namespace vramscope {

template <class Value>
class address_map {
 public:
  static constexpr std::size_t npos = ~std::size_t{0};

  address_map() { rehash(64); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  // Where `key` is (for value_at / erase_at), or npos. The position stays valid until the next
  // insert or erase.
  std::size_t locate(address_t key) const noexcept {
    std::size_t i = slot_of(key);
    while (true) {
      const address_t k = slots_[i].key;
      if (k == key) return i;
      if (k == empty_key) return npos;
      i = (i + 1) & mask_;
    }
  }
  Value& value_at(std::size_t i) noexcept { return slots_[i].value; }
  const Value& value_at(std::size_t i) const noexcept { return slots_[i].value; }

  Value* find(address_t key) noexcept {
    const std::size_t i = locate(key);
    return i == npos ? nullptr : &slots_[i].value;
  }
  const Value* find(address_t key) const noexcept {
    const std::size_t i = locate(key);
    return i == npos ? nullptr : &slots_[i].value;
  }

  // Inserts or overwrites.
  void insert(address_t key, const Value& value) {
    VRAMSCOPE_ASSERT(key != empty_key);
    const std::size_t i = locate(key);
    if (i != npos) {
      slots_[i].value = value;
      return;
    }
    insert_new(key, value);
  }

  // Inserts a key that is not in the map (a block just handed out): no comparison with the keys
  // probed past, only a search for the first empty slot.
  void insert_new(address_t key, const Value& value) {
    VRAMSCOPE_ASSERT(key != empty_key && locate(key) == npos);
    if (VRAMSCOPE_UNLIKELY(size_ >= grow_at_)) grow();
    std::size_t i = slot_of(key);
    while (slots_[i].key != empty_key) i = (i + 1) & mask_;
    slots_[i].key = key;
    slots_[i].value = value;
    ++size_;
  }

  bool erase(address_t key) noexcept {
    const std::size_t i = locate(key);
    if (i == npos) return false;
    erase_at(i);
    return true;
  }

  void erase_at(std::size_t hole) noexcept {
    // Backward shift: pull later entries of the same probe run into the hole.
    std::size_t j = hole;
    while (true) {
      j = (j + 1) & mask_;
      const address_t k = slots_[j].key;
      if (k == empty_key) break;
      const std::size_t home = slot_of(k);
      // Move j into hole when its home is not cyclically within (hole, j].
      const bool between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!between) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].key = empty_key;
    --size_;
  }

  void clear() noexcept {
    for (auto& s : slots_) s.key = empty_key;
    size_ = 0;
  }

  template <class F>
  void for_each(F&& f) const {
    for (const auto& s : slots_)
      if (s.key != empty_key) f(s.key, s.value);
  }

 private:
  static constexpr address_t empty_key = ~address_t{0};
  struct slot {
    address_t key = empty_key;
    Value value{};
  };

  std::size_t slot_of(address_t key) const noexcept {
    // Drop the 8 low bits (always 0), then mix (Fibonacci hashing).
    std::uint64_t h = (static_cast<std::uint64_t>(key) >> 8) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h >> shift_);
  }

  VRAMSCOPE_NOINLINE void grow() { rehash(slots_.size() * 2); }

  void rehash(std::size_t capacity) {
    std::vector<slot> old;
    old.swap(slots_);
    slots_.assign(capacity, slot{});
    mask_ = capacity - 1;
    shift_ = 64 - log2_floor(capacity);
    grow_at_ = capacity / 4 * 3;  // load factor at most 3/4
    size_ = 0;
    for (const auto& s : old)
      if (s.key != empty_key) insert_new(s.key, s.value);
  }

  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
  std::size_t grow_at_ = 0;
};

}  // namespace vramscope
