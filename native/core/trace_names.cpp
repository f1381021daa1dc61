// Names of trace operations, as they appear in files and on screen.
#include "vramscope/tracer.hpp"

namespace vramscope {

const char* trace_op_name(trace_op op) noexcept {
  switch (op) {
    case trace_op::alloc:
      return "alloc";
    case trace_op::free:
      return "free";
    case trace_op::free_pending:
      return "free_pending";
    case trace_op::free_completed:
      return "free_completed";
    case trace_op::region_reserve:
      return "region_reserve";
    case trace_op::region_release:
      return "region_release";
    case trace_op::va_reserve:
      return "va_reserve";
    case trace_op::va_release:
      return "va_release";
    case trace_op::map:
      return "map";
    case trace_op::unmap:
      return "unmap";
    case trace_op::split:
      return "split";
    case trace_op::merge:
      return "merge";
    case trace_op::failure:
      return "failure";
    case trace_op::reset:
      return "reset";
    case trace_op::trim:
      return "trim";
  }
  return "unknown";
}

}  // namespace vramscope
