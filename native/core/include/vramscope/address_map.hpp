// An open-addressing hash map from block address to a small value, for the allocator's table of
// live blocks. Linear probing with backward-shift deletion (no tombstones), so a warm
// insert + erase of the same address touches one cache line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vramscope/types.hpp"

namespace vramscope {

template <class Value>
class address_map {
 public:
  address_map() { rehash(64); }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  Value* find(address_t key) noexcept {
    std::size_t i = slot_of(key);
    while (true) {
      slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == empty_key) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  const Value* find(address_t key) const noexcept {
    return const_cast<address_map*>(this)->find(key);
  }

  // Inserts or overwrites.
  void insert(address_t key, const Value& value) {
    VRAMSCOPE_ASSERT(key != empty_key);
    if (VRAMSCOPE_UNLIKELY((size_ + 1) * 4 > slots_.size() * 3)) rehash(slots_.size() * 2);
    std::size_t i = slot_of(key);
    while (true) {
      slot& s = slots_[i];
      if (s.key == key) {
        s.value = value;
        return;
      }
      if (s.key == empty_key) {
        s.key = key;
        s.value = value;
        ++size_;
        return;
      }
      i = (i + 1) & mask_;
    }
  }

  bool erase(address_t key) noexcept {
    std::size_t i = slot_of(key);
    while (true) {
      if (slots_[i].key == key) break;
      if (slots_[i].key == empty_key) return false;
      i = (i + 1) & mask_;
    }
    // Backward shift: pull later entries of the same probe run into the hole.
    std::size_t hole = i;
    std::size_t j = i;
    while (true) {
      j = (j + 1) & mask_;
      if (slots_[j].key == empty_key) break;
      std::size_t home = slot_of(slots_[j].key);
      // Move j into hole when its home is not cyclically within (hole, j].
      bool between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!between) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].key = empty_key;
    --size_;
    return true;
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
    // Blocks are 256 B aligned: drop those bits, then mix (Fibonacci hashing).
    std::uint64_t h = (static_cast<std::uint64_t>(key) >> 8) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h >> shift_);
  }

  void rehash(std::size_t capacity) {
    std::vector<slot> old;
    old.swap(slots_);
    slots_.assign(capacity, slot{});
    mask_ = capacity - 1;
    shift_ = 64 - log2_floor(capacity);
    size_ = 0;
    for (const auto& s : old)
      if (s.key != empty_key) insert(s.key, s.value);
  }

  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t size_ = 0;
};

}  // namespace vramscope
