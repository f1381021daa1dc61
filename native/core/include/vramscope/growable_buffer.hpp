// A buffer whose address never changes while it grows: it reserves max_bytes of address space up
// front on a backing with virtual memory and maps more granules at its end as it grows, so data
// written before a grow() stays where it was (no copy, unlike a realloc). On cuda_vmm the address
// is device memory kernels may use; on the simulated backing it is a number only.
#pragma once

#include <cstddef>

#include "vramscope/backing.hpp"
#include "vramscope/types.hpp"

namespace vramscope {

class growable_buffer {
 public:
  // Reserves max_bytes (rounded up to the granularity) of address space; maps nothing yet.
  // Throws unsupported when the backing has no virtual memory, invalid_argument for 0 bytes.
  growable_buffer(backing& b, std::size_t max_bytes);
  ~growable_buffer();  // unmaps and releases everything
  growable_buffer(growable_buffer&& other) noexcept;
  growable_buffer& operator=(growable_buffer&& other) noexcept;
  growable_buffer(const growable_buffer&) = delete;
  growable_buffer& operator=(const growable_buffer&) = delete;

  // Makes size() at least new_size, mapping the granules it needs at the end. A smaller new_size
  // changes nothing. Throws out_of_memory (nothing changed) beyond max_size() or when the device
  // cannot back the granules.
  void grow(std::size_t new_size);
  // Sets size() to new_size: grows as grow() does, or lowers the size and keeps the mapping.
  void resize(std::size_t new_size);
  // Unmaps the granules past size().
  void shrink_to_fit();

  void* data() const noexcept { return reinterpret_cast<void*>(base_); }
  address_t address() const noexcept { return base_; }
  std::size_t size() const noexcept { return size_; }
  std::size_t mapped() const noexcept { return mapped_; }  // bytes backed by physical memory now
  std::size_t max_size() const noexcept { return reserved_; }
  std::size_t granularity() const noexcept { return granularity_; }

 private:
  void release() noexcept;

  backing* backing_;
  address_t base_ = 0;
  std::size_t reserved_ = 0;
  std::size_t granularity_ = 0;
  std::size_t size_ = 0;
  std::size_t mapped_ = 0;
};

}  // namespace vramscope
