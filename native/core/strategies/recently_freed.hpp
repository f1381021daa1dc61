// A bounded memory of addresses freed lately, for strategies that hand memory straight back to the
// device (cuda_malloc, async_pool) and so keep no freed block to recognise a double free by. The
// oldest address is forgotten first; an address handed out again is forgotten at once.
#pragma once

#include <cstdint>
#include <vector>

#include "vramscope/address_map.hpp"

namespace vramscope {

class recently_freed {
 public:
  explicit recently_freed(std::size_t capacity) : ring_(capacity == 0 ? 1 : capacity, 0) {}

  void remember(address_t address) {
    address_t& oldest = ring_[next_];
    // The slot may hold an address that was handed out again and forgotten since; only drop the
    // map entry if it still points at this slot.
    if (oldest != 0) {
      const std::uint32_t* slot = slot_of_.find(oldest);
      if (slot != nullptr && *slot == next_) slot_of_.erase(oldest);
    }
    oldest = address;
    slot_of_.insert(address, static_cast<std::uint32_t>(next_));
    next_ = (next_ + 1) % ring_.size();
  }
  void forget(address_t address) noexcept {
    if (!slot_of_.empty()) slot_of_.erase(address);
  }
  bool contains(address_t address) const noexcept { return slot_of_.find(address) != nullptr; }
  std::size_t size() const noexcept { return slot_of_.size(); }

 private:
  // Invariant: slot_of_[a] == i implies ring_[i] == a.
  std::vector<address_t> ring_;
  std::size_t next_ = 0;
  address_map<std::uint32_t> slot_of_;
};

}  // namespace vramscope
