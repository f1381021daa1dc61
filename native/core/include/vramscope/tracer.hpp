// The tracing hook: every strategy reports what it does with memory to an optional tracer. With no
// tracer installed this costs one predictable branch per operation.
#pragma once

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
  map = 8,  // physical memory mapped into reserved address space (granules)
  unmap = 9,
  split = 10,    // a free block split: address = the block, size = the part kept, aux unused
  merge = 11,    // free neighbours merged: address/size = the merged block
  failure = 12,  // a request failed: size = requested
  reset = 13,    // bulk reset (arena step boundary)
  trim = 14,     // cached memory released on request
};

const char* trace_op_name(trace_op op) noexcept;

struct trace_event {
  trace_op op;
  std::uint32_t aux;  // strategy-specific: size class, buddy order, segment pool...
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
    if (VRAMSCOPE_LIKELY(cursor_ != end_)) *cursor_++ = event;
    else record(event);
  }

  // The same event given field by field, written straight into the buffer. Assembling an event
  // first and copying it makes the copy's wide loads read stores still in flight, which cannot be
  // forwarded and stall (several ns an event, as much as a whole warm alloc+free).
  void append(trace_op op, std::uint32_t aux, stream_t stream, address_t address,
              std::uint64_t size, std::uint64_t requested) {
    trace_event* e = cursor_;
    if (VRAMSCOPE_LIKELY(e != end_)) {
      // Ask for the line the buffer reaches a few events on, for writing: a store to a line not in
      // L1 waits for its read-for-ownership, and on the H100 machine's Xeon that wait was most of
      // tracing's cost (block_pool's pair ×1.75 → ×1.40, arena ×1.69 → ×1.26, caching ×1.5 → ×1.3;
      // docs/benchmarks.md). A prefetch never faults, so reaching past end_ is harmless.
#if defined(__GNUC__) || defined(__clang__)
      __builtin_prefetch(reinterpret_cast<const char*>(e) + prefetch_ahead_bytes, 1, 3);
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      // op, its padding (zeroed) and aux in one 8-byte store.
      static_assert(offsetof(trace_event, aux) == 4 && offsetof(trace_event, stream) == 8,
                    "layout");
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
  // 512 B and 1 KiB ahead measured alike on the Xeon, 256 B and 2 KiB no better; on the
  // development machine's EPYC the prefetch changed nothing.
  static constexpr std::size_t prefetch_ahead_bytes = 512;

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
  std::size_t size() const noexcept {
    return static_cast<std::size_t>(buffer_cursor() - storage_.data());
  }
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
// or grows, and every event goes through the inline buffer; record() sees only the event that
// finds the ring full and starts it over. What the benchmark's "tracing on" measures.
class ring_tracer final : public tracer {
 public:
  explicit ring_tracer(std::size_t capacity) : events_(capacity == 0 ? 1 : capacity) {
    set_buffer(events_.data(), events_.data() + events_.size());
  }
  void record(const trace_event& event) override {
    ++laps_;
    set_buffer(events_.data(), events_.data() + events_.size());
    append(event);
  }
  // How many times the ring filled and started over.
  std::uint64_t laps() const noexcept { return laps_; }

 private:
  std::vector<trace_event> events_;
  std::uint64_t laps_ = 0;
};

}  // namespace vramscope
