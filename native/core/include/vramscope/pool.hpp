// A stream-ordered memory pool for C++ callers, in the shape of the seed design: a caching pool on
// a backing with allocate_async / deallocate_async, and PoolPtr, an owning pointer that frees its
// block on its stream. Underneath it is the `caching` strategy; this header only adds the
// configuration a program sets once and the RAII handle.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "vramscope/allocator.hpp"

namespace vramscope {

struct PoolConfig {
  std::string preset = "pow2";  // "pow2" (power-of-two classes) or "pytorch"
  std::size_t initial_pool_size =
      0;  // cached at construction, on stream 0: one segment at least this large
  std::size_t max_pool_size = 0;       // cap on reserved memory; 0: the device's memory
  std::size_t segment_size = 2 * MiB;  // pow2 preset: smallest segment obtained from the device
  // At each process_deferred() unused segments are released until at most this much stays
  // reserved (cudaMemPool's release threshold). The default never releases there; trim() still
  // does.
  std::size_t release_threshold = std::numeric_limits<std::size_t>::max();
  // true: a block freed on another stream than its own waits for that stream's event and is
  // completed by process_deferred() or the next allocation. false: the free waits for the event.
  bool enable_deferred_frees = true;
  bool thread_safe = true;
};

class caching_pool {
 public:
  explicit caching_pool(backing& device, const PoolConfig& config = {});

  // A block usable by work queued on `stream`; throws out_of_memory with the pool unchanged.
  void* allocate_async(std::size_t bytes, stream_t stream) {
    return alloc_->allocate(bytes, stream);
  }
  // Reusable at once on the block's own stream; freed on another stream, it waits for the work
  // queued there so far (see PoolConfig::enable_deferred_frees).
  void deallocate_async(void* ptr, stream_t stream);
  // Completes deferred frees whose events have completed, then applies the release threshold.
  // Returns how many frees completed.
  std::size_t process_deferred();
  // Releases unused segments (down to the release threshold when one is set).
  void trim() { alloc_->trim(); }

  allocator_stats stats() const { return alloc_->stats(); }
  allocator& underlying() noexcept { return *alloc_; }
  const PoolConfig& config() const noexcept { return config_; }

 private:
  PoolConfig config_;
  std::unique_ptr<allocator> alloc_;
};

// Owns `count` objects' worth of pool memory used on one stream, and frees it there when
// destroyed. Move-only. No constructor or destructor of T runs: the memory may be the device's.
template <class T>
class PoolPtr {
  static_assert(alignof(T) <= min_alignment, "pool blocks are aligned to 256 B");

 public:
  PoolPtr() noexcept = default;
  PoolPtr(caching_pool& pool, T* ptr, std::size_t count, stream_t stream) noexcept
      : pool_(&pool), ptr_(ptr), count_(count), stream_(stream) {}
  PoolPtr(PoolPtr&& other) noexcept
      : pool_(other.pool_),
        ptr_(std::exchange(other.ptr_, nullptr)),
        count_(std::exchange(other.count_, 0)),
        stream_(other.stream_) {}
  PoolPtr& operator=(PoolPtr&& other) noexcept {
    if (this != &other) {
      reset();
      pool_ = other.pool_;
      ptr_ = std::exchange(other.ptr_, nullptr);
      count_ = std::exchange(other.count_, 0);
      stream_ = other.stream_;
    }
    return *this;
  }
  PoolPtr(const PoolPtr&) = delete;
  PoolPtr& operator=(const PoolPtr&) = delete;
  // A free that throws here (the block was freed behind the PoolPtr's back) ends the program:
  // a destructor cannot report it, and ignoring it would hide a double free.
  ~PoolPtr() { reset(); }

  T* get() const noexcept { return ptr_; }
  std::size_t size() const noexcept { return count_; }
  stream_t stream() const noexcept { return stream_; }
  explicit operator bool() const noexcept { return ptr_ != nullptr; }

  // Gives up ownership: the caller frees the block with deallocate_async.
  T* release() noexcept {
    count_ = 0;
    return std::exchange(ptr_, nullptr);
  }
  // Frees the block on its stream now; the PoolPtr becomes empty.
  void reset() {
    if (ptr_ == nullptr) return;
    T* p = std::exchange(ptr_, nullptr);
    count_ = 0;
    pool_->deallocate_async(p, stream_);
  }

 private:
  caching_pool* pool_ = nullptr;
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
  stream_t stream_ = 0;
};

// Room for `count` objects of T on `stream`; an empty PoolPtr for count 0. Throws
// invalid_argument when count * sizeof(T) overflows, out_of_memory when the pool cannot serve it.
template <class T>
PoolPtr<T> make_pool_ptr(caching_pool& pool, std::size_t count, stream_t stream = 0) {
  if (count == 0) return PoolPtr<T>();
  if (count > std::numeric_limits<std::size_t>::max() / sizeof(T))
    throw invalid_argument("make_pool_ptr: " + std::to_string(count) + " objects of " +
                           std::to_string(sizeof(T)) + " B overflow the address space");
  void* p = pool.allocate_async(count * sizeof(T), stream);
  return PoolPtr<T>(pool, static_cast<T*>(p), count, stream);
}

}  // namespace vramscope
