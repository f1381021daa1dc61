// The tracing hook: every strategy reports what it does with memory to an optional tracer. With no
// tracer installed this costs one predictable branch per operation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vramscope/types.hpp"

namespace vramscope {

enum class trace_op : std::uint8_t {
  alloc = 0,           // block placed: address, size = rounded, requested, stream
  free = 1,            // block freed and reusable at once (same stream)
  free_pending = 2,    // block freed on another stream; waits for that stream's event
  free_completed = 3,  // a pending block's event completed; the block is reusable
  region_reserve = 4,  // memory obtained from the device (cudaMalloc, pool growth); aux = kind
  region_release = 5,  // memory given back to the device
  va_reserve = 6,      // address space reserved (VMM), nothing mapped yet
  va_release = 7,
  map = 8,             // physical memory mapped into reserved address space (granules)
  unmap = 9,
  split = 10,          // a free block split: address = the block, size = the part kept, aux unused
  merge = 11,          // free neighbours merged: address/size = the merged block
  failure = 12,        // a request failed: size = requested
  reset = 13,          // bulk reset (arena step boundary)
  trim = 14,           // cached memory released on request
};

const char* trace_op_name(trace_op op) noexcept;

struct trace_event {
  trace_op op;
  std::uint32_t aux;       // strategy-specific: size class, buddy order, segment pool...
  stream_t stream;
  address_t address;
  std::uint64_t size;
  std::uint64_t requested;  // for alloc/free: the bytes the caller asked for
};

class tracer {
 public:
  virtual ~tracer() = default;

  // What an allocator calls. A tracer that gives itself an inline buffer (set_buffer) receives
  // events there with no virtual call, which keeps tracing cheap next to a ~10 ns alloc+free;
  // record() then sees only the event that finds the buffer full (to grow, flush or wrap).
  void append(const trace_event& event) {
    if (VRAMSCOPE_LIKELY(cursor_ != end_))
      *cursor_++ = event;
    else
      record(event);
  }

  // The same event given field by field, written straight into the buffer. Assembling an event
  // first and copying it makes the copy's wide loads read stores still in flight, which cannot be
  // forwarded and stall (several ns an event, as much as a whole warm alloc+free).
  void append(trace_op op, std::uint32_t aux, stream_t stream, address_t address,
              std::uint64_t size, std::uint64_t requested) {
    trace_event* e = cursor_;
    if (VRAMSCOPE_LIKELY(e != end_)) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      // op, its padding (zeroed) and aux in one 8-byte store.
      static_assert(offsetof(trace_event, aux) == 4 && offsetof(trace_event, stream) == 8, "layout");
      const std::uint64_t head = static_cast<std::uint64_t>(op) | (std::uint64_t{aux} << 32);
      std::memcpy(e, &head, sizeof head);
#else
      e->op = op;
      e->aux = aux;
#endif
      e->stream = stream;
      e->address = address;
      e->size = size;
      e->requested = requested;
      cursor_ = e + 1;
    } else {
      record(trace_event{op, aux, stream, address, size, requested});
    }
  }

  // The slow path, and the only path for tracers without a buffer.
  virtual void record(const trace_event& event) = 0;

 protected:
  void set_buffer(trace_event* begin, trace_event* end) noexcept {
    cursor_ = begin;
    end_ = end;
  }
  trace_event* buffer_cursor() const noexcept { return cursor_; }

 private:
  trace_event* cursor_ = nullptr;
  trace_event* end_ = nullptr;
};

// Keeps every event in memory, in order; what tests, the binding and replay use.
class vector_tracer final : public tracer {
 public:
  explicit vector_tracer(std::size_t initial_capacity = 4096)
      : storage_(initial_capacity == 0 ? 1 : initial_capacity) {
    set_buffer(storage_.data(), storage_.data() + storage_.size());
  }
  void record(const trace_event& event) override {
    // The buffer is full: double it and go on appending inline.
    std::size_t n = size();
    storage_.resize(storage_.size() * 2);
    set_buffer(storage_.data() + n, storage_.data() + storage_.size());
    append(event);
  }
  std::size_t size() const noexcept { return static_cast<std::size_t>(buffer_cursor() - storage_.data()); }
  const trace_event* begin() const noexcept { return storage_.data(); }
  const trace_event* end() const noexcept { return buffer_cursor(); }
  const trace_event& operator[](std::size_t i) const noexcept { return storage_[i]; }
  // A copy of the events so far.
  std::vector<trace_event> events() const { return std::vector<trace_event>(begin(), end()); }
  void clear() noexcept { set_buffer(storage_.data(), storage_.data() + storage_.size()); }

 private:
  std::vector<trace_event> storage_;  // [0, size()) recorded; the rest is room
};

// Keeps the last `capacity` events in a ring allocated up front: a long recording never allocates
// or grows. Events are appended inline into a small staging buffer (`staging` events, sized to stay
// in the L1 cache) and moved into the ring a chunk at a time when it fills, as a recorder drains
// its buffer: the allocator's hot path then writes to lines already in cache instead of taking a
// cache miss for every new line of a multi-megabyte ring. What the benchmark's "tracing on"
// measures, moving included. Read the ring after flush().
class ring_tracer final : public tracer {
 public:
  explicit ring_tracer(std::size_t capacity, std::size_t staging = 512)
      : events_(capacity == 0 ? 1 : capacity),
        staging_(std::min(staging == 0 ? std::size_t{1} : staging, events_.size())) {
    set_buffer(staging_.data(), staging_.data() + staging_.size());
  }
  void record(const trace_event& event) override {
    flush();
    append(event);
  }
  // Moves the staged events into the ring, oldest first, wrapping at its end.
  void flush() {
    const trace_event* from = staging_.data();
    std::size_t n = static_cast<std::size_t>(buffer_cursor() - from);
    while (n != 0) {
      const std::size_t room = events_.size() - head_;
      const std::size_t k = n < room ? n : room;
      std::memcpy(events_.data() + head_, from, k * sizeof(trace_event));
      from += k;
      n -= k;
      head_ += k;
      total_ += k;
      if (head_ == events_.size()) {
        head_ = 0;
        ++laps_;
      }
    }
    set_buffer(staging_.data(), staging_.data() + staging_.size());
  }
  // How many times the ring filled and started over.
  std::uint64_t laps() const noexcept { return laps_; }
  // Events moved into the ring so far (flush() first to count the staged ones).
  std::uint64_t total() const noexcept { return total_; }
  // The i-th most recent event in the ring (0: the newest), after flush(); i < min(total, capacity).
  const trace_event& recent(std::size_t i) const noexcept {
    return events_[(head_ + events_.size() - 1 - i) % events_.size()];
  }

 private:
  std::vector<trace_event> events_;
  std::vector<trace_event> staging_;
  std::size_t head_ = 0;
  std::uint64_t total_ = 0;
  std::uint64_t laps_ = 0;
};

}  // namespace vramscope
