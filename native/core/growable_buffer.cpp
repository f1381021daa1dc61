// growable_buffer: one reservation, mapped from its start as it grows.
#include "vramscope/growable_buffer.hpp"

#include <utility>

#include "vramscope/errors.hpp"

namespace vramscope {

growable_buffer::growable_buffer(backing& b, std::size_t max_bytes) : backing_(&b) {
  if (!b.has_vmm())
    throw unsupported(std::string("growable_buffer needs virtual memory (VMM), which backing '") +
                      b.name() + "' lacks (use simulated or cuda_vmm)");
  if (max_bytes == 0) throw invalid_argument("growable_buffer: max_bytes must be more than 0");
  granularity_ = b.granularity();
  reserved_ = align_up(max_bytes, granularity_);
  base_ = b.reserve_address_space(reserved_, granularity_);
}

growable_buffer::~growable_buffer() { release(); }

growable_buffer::growable_buffer(growable_buffer&& other) noexcept
    : backing_(other.backing_),
      base_(std::exchange(other.base_, 0)),
      reserved_(std::exchange(other.reserved_, 0)),
      granularity_(other.granularity_),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

growable_buffer& growable_buffer::operator=(growable_buffer&& other) noexcept {
  if (this != &other) {
    release();
    backing_ = other.backing_;
    base_ = std::exchange(other.base_, 0);
    reserved_ = std::exchange(other.reserved_, 0);
    granularity_ = other.granularity_;
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void growable_buffer::release() noexcept {
  if (base_ == 0) return;
  // A destructor must not throw; a backing that refuses here has lost track of its own state.
  try {
    if (mapped_ != 0) backing_->unmap(base_, mapped_);
    backing_->release_address_space(base_, reserved_);
  } catch (...) {
  }
  base_ = 0;
  mapped_ = size_ = 0;
}

void growable_buffer::grow(std::size_t new_size) {
  if (new_size <= size_) return;
  if (new_size > reserved_)
    throw out_of_memory(new_size, reserved_,
                        "growable_buffer: beyond its reservation of " + format_bytes(reserved_));
  const std::size_t needed = align_up(new_size, granularity_);
  if (needed > mapped_) {
    backing_->map(base_ + mapped_, needed - mapped_);  // all or nothing
    mapped_ = needed;
  }
  size_ = new_size;
}

void growable_buffer::resize(std::size_t new_size) {
  if (new_size > size_) grow(new_size);
  else size_ = new_size;
}

void growable_buffer::shrink_to_fit() {
  const std::size_t keep = align_up(size_, granularity_);
  if (keep >= mapped_) return;
  backing_->unmap(base_ + keep, mapped_ - keep);
  mapped_ = keep;
}

}  // namespace vramscope
