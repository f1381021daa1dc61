// An open-addressing hash map from block address to a small value, for the allocator's table of
// live blocks. Linear probing with backward-shift deletion (no tombstones). Keys and values are
// two arrays: probing reads packed keys, and a value of 32 bytes (the live-block entry) stays
// inside one cache line, so that the wide stores the compiler makes of its fields never straddle
// two lines (a straddling store cannot be forwarded to the loads of the free that follows).
// Keys are multiples of 256 (block addresses, or sizes rounded to 512 B): the hash is Fibonacci
// hashing of key / 256, with the division folded into the multiplier (one instruction fewer).
// With `FrontSlot`, an entry inserted while the front slot (one entry outside the table, a member
// of the map: no pointer to load, no index to compute) is empty waits there: a block freed before the next allocation (a temporary, or
// the benchmark's warm pair) is found and erased there without a hash or a probe. An insert that
// finds the slot taken goes into the table (a batch of allocations pays only a test for the slot),
// except that every front_turnover-th one moves the slot's entry into the table and takes the slot,
// so that a long-lived entry cannot keep the slot from the temporaries that follow it. Every
// operation (size, lookups, iteration, clear, growth) sees the slot's entry as part of the map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vramscope/types.hpp"

namespace vramscope {

template <class Value, bool FrontSlot = false>
class address_map {
 public:
  static constexpr std::size_t npos = ~std::size_t{0};

  // `capacity` slots to start with (a power of two, at least 4): a map made for each of many
  // streams starts small.
  explicit address_map(std::size_t capacity = 64) { rehash(capacity); }

  // The front slot's position (for value_at / erase_at).
  static constexpr std::size_t front_position = npos - 1;

  std::size_t size() const noexcept { return grow_at_ - room_ + (front_used() ? 1 : 0); }
  bool empty() const noexcept { return room_ == grow_at_ && !front_used(); }

  // Where `key` is (for value_at / erase_at), or npos. The position stays valid until the next
  // insert or erase.
  std::size_t locate(address_t key) const noexcept {
    if (FrontSlot && front_key_ == key) return front_position;
    std::size_t i = slot_of(key);
    while (true) {
      const address_t k = keys_[i];
      if (k == key) return i;
      if (k == empty_key) return npos;
      i = (i + 1) & mask_;
    }
  }
  // The same, calling `missing` (which must not return: it throws) where `key` is not there. The
  // caller then needs no test for npos after a probe that found the key.
  template <class Missing>
  std::size_t locate_or(address_t key, Missing&& missing) const {
    if (FrontSlot && VRAMSCOPE_LIKELY(front_key_ == key)) return front_position;
    std::size_t i = slot_of(key);
    while (true) {
      const address_t k = keys_[i];
      if (VRAMSCOPE_LIKELY(k == key)) return i;
      if (k == empty_key) {
        missing();
        return npos;
      }
      i = (i + 1) & mask_;
    }
  }

  Value& value_at(std::size_t i) noexcept {
    if (FrontSlot && i == front_position) return front_value_;
    return values_[i];
  }
  const Value& value_at(std::size_t i) const noexcept {
    if (FrontSlot && i == front_position) return front_value_;
    return values_[i];
  }

  Value* find(address_t key) noexcept {
    const std::size_t i = locate(key);
    return i == npos ? nullptr : &value_at(i);
  }
  const Value* find(address_t key) const noexcept {
    const std::size_t i = locate(key);
    return i == npos ? nullptr : &value_at(i);
  }

  // Inserts or overwrites.
  void insert(address_t key, const Value& value) {
    VRAMSCOPE_ASSERT(key != empty_key);
    const std::size_t i = locate(key);
    if (i != npos) {
      value_at(i) = value;
      return;
    }
    insert_new(key, value);
  }

  // Inserts a key that is not in the map (a block just handed out): no comparison with the keys
  // probed past, only a search for the first empty slot.
  void insert_new(address_t key, const Value& value) {
    VRAMSCOPE_ASSERT(key != empty_key && locate(key) == npos);
    if constexpr (FrontSlot) {
      if (VRAMSCOPE_UNLIKELY(front_used())) {
        if (VRAMSCOPE_LIKELY(--inserts_until_turnover_ != 0)) {
          insert_in_table(key, value);
          return;
        }
        move_front_into_table();
      }
      front_key_ = key;
      front_value_ = value;
    } else {
      insert_in_table(key, value);
    }
  }

  bool erase(address_t key) noexcept {
    const std::size_t i = locate(key);
    if (i == npos) return false;
    erase_at(i);
    return true;
  }

  void erase_at(std::size_t hole) noexcept {
    if (FrontSlot && hole == front_position) {
      front_key_ = empty_key;
      return;
    }
    // Backward shift: pull later entries of the same probe run into the hole.
    std::size_t j = hole;
    while (true) {
      j = (j + 1) & mask_;
      const address_t k = keys_[j];
      if (k == empty_key) break;
      const std::size_t home = slot_of(k);
      // Move j into hole when its home is not cyclically within (hole, j].
      const bool between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!between) {
        keys_[hole] = k;
        values_[hole] = values_[j];
        hole = j;
      }
    }
    keys_[hole] = empty_key;
    ++room_;
  }

  void clear() noexcept {
    for (auto& k : keys_) k = empty_key;
    front_key_ = empty_key;
    room_ = grow_at_;
  }

  // Every entry, the front slot's included (last).
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < keys_.size(); ++i)
      if (keys_[i] != empty_key) f(keys_[i], values_[i]);
    if (front_used()) f(front_key_, front_value_);
  }

 private:
  static constexpr address_t empty_key = ~address_t{0};

  bool front_used() const noexcept { return FrontSlot && front_key_ != empty_key; }

  // Moving the slot's entry on every insert that finds it taken cost a batch of allocations freed
  // in order (FIFO) 30 instructions and a quarter more time per pair; hence the turnover count.
  static constexpr std::uint32_t front_turnover = 8;

  VRAMSCOPE_NOINLINE void move_front_into_table() {
    inserts_until_turnover_ = front_turnover;
    insert_in_table(front_key_, front_value_);
  }

  void insert_in_table(address_t key, const Value& value) {
    if (VRAMSCOPE_UNLIKELY(room_ == 0)) grow();
    std::size_t i = slot_of(key);
    while (keys_[i] != empty_key) i = (i + 1) & mask_;
    keys_[i] = key;
    values_[i] = value;
    --room_;
  }

  std::size_t slot_of(address_t key) const noexcept {
    // For key = 256 k, key × (φ-constant / 256) = k × φ-constant (with its 8 low bits cleared):
    // the top bits spread consecutive k as Fibonacci hashing does. (key × the φ-constant itself
    // would multiply k by 256 φ, whose fraction 0.217 spreads them badly.)
    constexpr std::uint64_t multiplier = (0x9E3779B97F4A7C15ull >> 8) | 1;
    std::uint64_t h = static_cast<std::uint64_t>(key) * multiplier;
    return static_cast<std::size_t>(h >> shift_);
  }

  VRAMSCOPE_NOINLINE void grow() { rehash(keys_.size() * 2); }

  void rehash(std::size_t capacity) {  // the front slot is not in the table: it stays as it is
    std::vector<address_t> old_keys(capacity, empty_key);
    std::vector<Value> old_values(capacity);
    old_keys.swap(keys_);
    old_values.swap(values_);
    mask_ = capacity - 1;
    shift_ = 64 - log2_floor(capacity);
    grow_at_ = capacity / 4 * 3;  // load factor at most 3/4
    room_ = grow_at_;
    for (std::size_t i = 0; i < old_keys.size(); ++i)
      if (old_keys[i] != empty_key) insert_in_table(old_keys[i], old_values[i]);
  }

  // First, beside the table's pointers: the slot's value keeps its alignment (a live-block entry's
  // 32 bytes never straddle two cache lines).
  address_t front_key_ = empty_key;  // empty_key: the slot is free (unused without FrontSlot)
  Value front_value_{};
  std::vector<address_t> keys_;
  std::vector<Value> values_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t room_ = 0;  // inserts left before growing: one load and test for the insert's check
  std::size_t grow_at_ = 0;
  // Inserts that find the slot taken before the next turnover (counting down: one instruction).
  std::uint32_t inserts_until_turnover_ = front_turnover;
};

}  // namespace vramscope
