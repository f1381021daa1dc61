// Defaults of the backing interface (capabilities a backing lacks) and the backing factory.
#include "vramscope/backing.hpp"

#include "vramscope/backing_registry.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/simulated_backing.hpp"

namespace vramscope {

const char* backing_kind_name(backing_kind kind) noexcept {
  switch (kind) {
    case backing_kind::simulated:
      return "simulated";
    case backing_kind::cuda_malloc:
      return "cuda_malloc";
    case backing_kind::cuda_vmm:
      return "cuda_vmm";
    case backing_kind::cuda_async:
      return "cuda_async";
  }
  return "unknown";
}

backing_kind parse_backing_kind(const std::string& name) {
  if (name == "simulated") return backing_kind::simulated;
  if (name == "cuda_malloc") return backing_kind::cuda_malloc;
  if (name == "cuda_vmm") return backing_kind::cuda_vmm;
  if (name == "cuda_async") return backing_kind::cuda_async;
  throw invalid_argument("unknown backing '" + name +
                         "' (simulated, cuda_malloc, cuda_vmm, cuda_async)");
}

namespace {
[[noreturn]] void lacks(const backing& b, const char* what) {
  throw unsupported(std::string("backing '") + b.name() + "' has no " + what);
}
}  // namespace

address_t backing::reserve_address_space(std::size_t, std::size_t) {
  lacks(*this, "virtual memory (VMM)");
}
void backing::release_address_space(address_t, std::size_t) {
  lacks(*this, "virtual memory (VMM)");
}
void backing::map(address_t, std::size_t) { lacks(*this, "virtual memory (VMM)"); }
void backing::unmap(address_t, std::size_t) { lacks(*this, "virtual memory (VMM)"); }
void backing::remap(address_t from, address_t to, std::size_t bytes) {
  if (!has_vmm()) lacks(*this, "virtual memory (VMM)");
  unmap(from, bytes);  // first, so the memory it gives back is there for the map
  map(to, bytes);
}
address_t backing::allocate_async(std::size_t, stream_t) { lacks(*this, "stream-ordered pool"); }
void backing::free_async(address_t, std::size_t, stream_t) { lacks(*this, "stream-ordered pool"); }
void backing::set_release_threshold(std::uint64_t) { lacks(*this, "stream-ordered pool"); }
void backing::trim_async_pool(std::size_t) { lacks(*this, "stream-ordered pool"); }
async_pool_stats backing::async_stats() const { lacks(*this, "stream-ordered pool"); }

std::unique_ptr<simulated_backing> make_simulated_backing(const simulated_options& options) {
  return std::make_unique<simulated_backing>(options);
}

// Device backings come from the registry (backing_registry.cpp), filled by whatever device backings
// the program links (native/cuda/ registers the CUDA ones); core itself knows no device runtime.
std::unique_ptr<backing> make_backing(backing_kind kind, const simulated_options& simulated,
                                      const cuda_options& cuda) {
  if (kind == backing_kind::simulated) return make_simulated_backing(simulated);
  if (device_backing_factory make = find_device_backing(kind)) return make(cuda);
  throw unsupported(std::string("backing '") + backing_kind_name(kind) +
                    "' needs CUDA, and this build of vramscope has none");
}

}  // namespace vramscope
