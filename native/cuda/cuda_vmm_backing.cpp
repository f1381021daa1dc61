// The cuda_vmm backing: regions through cudaMalloc, plus CUDA virtual memory: reserve address space
// (cuMemAddressReserve), back it granule by granule (cuMemCreate + cuMemMap, then cuMemSetAccess),
// unmap and release exactly what was mapped. The driver API is reached only through
// cudaGetDriverEntryPointByVersion, so nothing links libcuda and the library loads without a
// driver; <cuda.h> and <cudaTypedefs.h> give types and constants only.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <map>
#include <string>

#include "cuda_common.hpp"

namespace vramscope::cuda {
namespace {

// The driver functions VMM needs, resolved once per backing. The version is the ABI the types
// above describe (these entry points have been stable since CUDA 10.2).
struct driver_api {
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 get_granularity = nullptr;
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;

  template <class F>
  static void load(F& fn, const char* symbol) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t status =
        cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
    if (status != cudaSuccess) throw_device_error("cudaGetDriverEntryPointByVersion", status);
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw unsupported(std::string("the CUDA driver has no ") + symbol +
                        " (virtual memory management needs driver 12.0 or newer)");
    fn = reinterpret_cast<F>(p);
  }
  driver_api() {
    load(get_error_string, "cuGetErrorString");
    load(get_granularity, "cuMemGetAllocationGranularity");
    load(address_reserve, "cuMemAddressReserve");
    load(address_free, "cuMemAddressFree");
    load(create, "cuMemCreate");
    load(release, "cuMemRelease");
    load(map, "cuMemMap");
    load(unmap, "cuMemUnmap");
    load(set_access, "cuMemSetAccess");
  }

  [[noreturn]] void fail(const char* call, CUresult status) const {
    const char* text = nullptr;
    if (get_error_string(status, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
    throw device_error(call, static_cast<int>(status), text);
  }
  void check(CUresult status, const char* call) const {
    if (status != CUDA_SUCCESS) fail(call, status);
  }
};

class cuda_vmm_backing final : public cuda_backing_base {
 public:
  explicit cuda_vmm_backing(const cuda_options& options) : cuda_backing_base(options) {
    int supported = 0;
    check(cudaDeviceGetAttribute(
              &supported,
              static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),
              device_),
          "cudaDeviceGetAttribute");
    if (!supported)
      throw unsupported("CUDA device " + std::to_string(device_) +
                        " does not support virtual memory management");
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device_;
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    api_.check(api_.get_granularity(&granularity_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
               "cuMemGetAllocationGranularity");
  }

  ~cuda_vmm_backing() override {
    // Whatever a strategy left behind goes back to the driver, mappings before their address space.
    for (auto& [address, handle] : granules_) {
      (void)api_.unmap(address, granularity_);
      (void)api_.release(handle);
    }
    for (auto& [address, bytes] : reservations_) (void)api_.address_free(address, bytes);
  }

  backing_kind kind() const noexcept override { return backing_kind::cuda_vmm; }
  bool has_vmm() const noexcept override { return true; }
  std::size_t granularity() const noexcept override { return granularity_; }

  address_t reserve_address_space(std::size_t bytes, std::size_t alignment) override {
    if (bytes == 0 || bytes % granularity_ != 0)
      throw invalid_argument("cuda_vmm backing: address space size " + format_bytes(bytes) +
                             " is not a multiple of the granularity " + format_bytes(granularity_));
    use_device();
    CUdeviceptr p = 0;
    CUresult status =
        api_.address_reserve(&p, bytes, alignment > granularity_ ? alignment : 0, 0, 0);
    if (status != CUDA_SUCCESS) fail("cuMemAddressReserve", status, bytes);
    reservations_.emplace(static_cast<address_t>(p), bytes);
    ++calls_.va_reserve;
    return static_cast<address_t>(p);
  }

  void release_address_space(address_t address, std::size_t bytes) override {
    auto it = reservations_.find(address);
    if (it == reservations_.end() || it->second != bytes) throw invalid_free(address);
    auto mapped = granules_.lower_bound(address);
    if (mapped != granules_.end() && mapped->first < address + bytes)
      throw invalid_argument("cuda_vmm backing: releasing address space that is still mapped");
    api_.check(api_.address_free(address, bytes), "cuMemAddressFree");
    reservations_.erase(it);
    ++calls_.va_release;
  }

  // One physical allocation per granule, so that any granule-aligned sub-range can later be
  // unmapped on its own (cuMemUnmap cannot split a mapping). All or nothing: a failure part-way
  // undoes the granules already mapped.
  void map(address_t address, std::size_t bytes) override {
    check_range(address, bytes, "map");
    for (address_t g = address; g < address + bytes; g += granularity_)
      if (granules_.count(g)) throw invalid_argument("cuda_vmm backing: granule mapped twice");
    check_cap(bytes, "cuMemCreate");
    use_device();
    address_t done = address;
    try {
      for (; done < address + bytes; done += granularity_) map_granule(done, bytes);
      CUresult status = api_.set_access(address, bytes, &access_, 1);
      if (status != CUDA_SUCCESS) fail("cuMemSetAccess", status, bytes);
    } catch (...) {
      // The first error is the one to report; undo quietly.
      for (address_t g = address; g < done; g += granularity_) {
        try {
          unmap_granule(g);
        } catch (...) {
        }
      }
      throw;
    }
    mapped_bytes_ += bytes;
    ++calls_.map;
  }

  // The same physical handles, unmapped at `from` and mapped at `to` (a stitch of free chunks into
  // a new range): nothing is created or released, so the device's free memory never changes. All or
  // nothing: a failure part-way maps what was moved back where it was.
  void remap(address_t from, address_t to, std::size_t bytes) override {
    check_range(from, bytes, "remap");
    check_range(to, bytes, "remap");
    for (std::size_t off = 0; off < bytes; off += granularity_) {
      if (!granules_.count(from + off))
        throw invalid_argument("cuda_vmm backing: remap of an unmapped granule");
      if (granules_.count(to + off))
        throw invalid_argument("cuda_vmm backing: remap onto a mapped granule");
    }
    use_device();
    std::size_t done = 0;
    auto move = [&](address_t a, address_t b) {
      auto it = granules_.find(a);
      api_.check(api_.unmap(a, granularity_), "cuMemUnmap");
      const CUmemGenericAllocationHandle handle = it->second;
      granules_.erase(it);
      CUresult status = api_.map(b, granularity_, 0, handle, 0);
      if (status != CUDA_SUCCESS) {
        // Back where it was, so the handle stays owned by a mapping.
        (void)api_.map(a, granularity_, 0, handle, 0);
        (void)api_.set_access(a, granularity_, &access_, 1);
        granules_.emplace(a, handle);
        api_.fail("cuMemMap", status);
      }
      granules_.emplace(b, handle);
    };
    try {
      for (; done < bytes; done += granularity_) move(from + done, to + done);
      api_.check(api_.set_access(to, bytes, &access_, 1), "cuMemSetAccess");
    } catch (...) {
      for (std::size_t off = 0; off < done; off += granularity_) {
        try {
          move(to + off, from + off);
        } catch (...) {
        }
      }
      if (done > 0) (void)api_.set_access(from, done, &access_, 1);
      throw;
    }
    ++calls_.unmap;
    ++calls_.map;
  }

  void unmap(address_t address, std::size_t bytes) override {
    check_range(address, bytes, "unmap");
    for (address_t g = address; g < address + bytes; g += granularity_)
      if (!granules_.count(g))
        throw invalid_argument("cuda_vmm backing: unmap of an unmapped granule");
    for (address_t g = address; g < address + bytes; g += granularity_) unmap_granule(g);
    mapped_bytes_ -= bytes;
    ++calls_.unmap;
  }

 protected:
  std::size_t physical_in_use() const noexcept override { return region_bytes_ + mapped_bytes_; }

 private:
  void check_range(address_t address, std::size_t bytes, const char* what) const {
    if (bytes == 0 || bytes % granularity_ != 0 || address % granularity_ != 0)
      throw invalid_argument(std::string("cuda_vmm backing: ") + what + " of " +
                             format_bytes(bytes) + " at " + format_address(address) +
                             " is not granule-aligned");
    auto it = reservations_.upper_bound(address);
    if (it == reservations_.begin() ||
        address + bytes > std::prev(it)->first + std::prev(it)->second)
      throw invalid_argument(std::string("cuda_vmm backing: ") + what +
                             " outside reserved address space");
  }

  // The driver's out-of-memory is typed like every backing's; anything else is a device_error.
  [[noreturn]] void fail(const char* call, CUresult status, std::size_t requested) const {
    if (status == CUDA_ERROR_OUT_OF_MEMORY) throw_out_of_memory(call, requested);
    api_.fail(call, status);
  }

  void map_granule(address_t address, std::size_t requested) {
    CUmemGenericAllocationHandle handle = 0;
    CUresult status = api_.create(&handle, granularity_, &prop_, 0);
    if (status != CUDA_SUCCESS) fail("cuMemCreate", status, requested);
    status = api_.map(address, granularity_, 0, handle, 0);
    if (status != CUDA_SUCCESS) {
      (void)api_.release(handle);
      fail("cuMemMap", status, requested);
    }
    granules_.emplace(address, handle);
  }

  // Unmaps and releases even when one of the two fails, so the granule is never left half-done.
  void unmap_granule(address_t address) {
    auto it = granules_.find(address);
    if (it == granules_.end()) return;
    CUresult unmapped = api_.unmap(address, granularity_);
    CUresult released = api_.release(it->second);
    granules_.erase(it);
    api_.check(unmapped, "cuMemUnmap");
    api_.check(released, "cuMemRelease");
  }

  driver_api api_;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  std::size_t granularity_ = 0;
  std::size_t mapped_bytes_ = 0;
  std::map<address_t, std::size_t> reservations_;               // address -> bytes
  std::map<address_t, CUmemGenericAllocationHandle> granules_;  // mapped granule -> its memory
};

}  // namespace

std::unique_ptr<backing> make_vmm_backing(const cuda_options& options) {
  return std::make_unique<cuda_vmm_backing>(options);
}

}  // namespace vramscope::cuda
