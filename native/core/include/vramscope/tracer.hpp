// The tracing hook: every strategy reports what it does with memory to an optional tracer. With no
// tracer installed this costs one predictable branch per operation.
#pragma once

#include <cstdint>
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
  virtual void record(const trace_event& event) = 0;
};

// Keeps every event in memory, in order; what tests and replay use.
class vector_tracer final : public tracer {
 public:
  void record(const trace_event& event) override { events.push_back(event); }
  std::vector<trace_event> events;
};

}  // namespace vramscope
