// The cuda_async backing: stream-ordered allocation (cudaMallocFromPoolAsync / cudaFreeAsync) from a
// cudaMemPool this backing creates and owns, so its statistics and release threshold are ours
// alone. A capacity cap becomes the pool's maxSize, so the driver itself refuses to grow past it.
#include "cuda_common.hpp"

namespace vramscope::cuda {
namespace {

class cuda_async_backing final : public cuda_backing_base {
 public:
  explicit cuda_async_backing(const cuda_options& options) : cuda_backing_base(options) {
    int supported = 0;
    check(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device_),
          "cudaDeviceGetAttribute");
    if (!supported)
      throw unsupported("CUDA device " + std::to_string(device_) +
                        " does not support stream-ordered memory pools");
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device_;
    // The driver sizes pools in 2 MiB chunks; a cap that is not a multiple is rounded up to one.
    props.maxSize = capped_ ? align_up(capacity_, 2 * MiB) : 0;
    check(cudaMemPoolCreate(&pool_, &props), "cudaMemPoolCreate");
    try {
      set_release_threshold(options.async_release_threshold);
    } catch (...) {
      (void)cudaMemPoolDestroy(pool_);
      throw;
    }
  }

  ~cuda_async_backing() override {
    // Frees still queued must run before the pool goes; the pool then returns its memory.
    (void)cudaDeviceSynchronize();
    (void)cudaMemPoolDestroy(pool_);
  }

  backing_kind kind() const noexcept override { return backing_kind::cuda_async; }
  bool has_async() const noexcept override { return true; }

  address_t allocate_async(std::size_t bytes, stream_t stream) override {
    if (bytes == 0) throw invalid_argument("cuda_async backing: allocation of 0 bytes");
    void* p = nullptr;
    cudaError_t status = cudaMallocFromPoolAsync(&p, bytes, pool_, to_cuda(stream));
    if (status == cudaErrorMemoryAllocation) throw_out_of_memory("cudaMallocFromPoolAsync", bytes);
    if (status != cudaSuccess) throw_device_error("cudaMallocFromPoolAsync", status);
    ++calls_.async_alloc;
    return reinterpret_cast<address_t>(p);
  }

  void free_async(address_t address, std::size_t, stream_t stream) override {
    check(cudaFreeAsync(reinterpret_cast<void*>(address), to_cuda(stream)), "cudaFreeAsync");
    ++calls_.async_free;
  }

  void set_release_threshold(std::uint64_t bytes) override {
    unsigned long long value = bytes;  // the attribute is a cuuint64_t
    check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &value),
          "cudaMemPoolSetAttribute(ReleaseThreshold)");
  }

  void trim_async_pool(std::size_t min_bytes_to_keep) override {
    check(cudaMemPoolTrimTo(pool_, min_bytes_to_keep), "cudaMemPoolTrimTo");
  }

  async_pool_stats async_stats() const override {
    async_pool_stats s;
    s.used_current = attribute(cudaMemPoolAttrUsedMemCurrent, "UsedMemCurrent");
    s.used_high = attribute(cudaMemPoolAttrUsedMemHigh, "UsedMemHigh");
    s.reserved_current = attribute(cudaMemPoolAttrReservedMemCurrent, "ReservedMemCurrent");
    s.reserved_high = attribute(cudaMemPoolAttrReservedMemHigh, "ReservedMemHigh");
    return s;
  }

 protected:
  std::size_t physical_in_use() const noexcept override {
    unsigned long long reserved = 0;
    if (cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrReservedMemCurrent, &reserved) !=
        cudaSuccess) {
      (void)cudaGetLastError();
      reserved = 0;
    }
    return region_bytes_ + static_cast<std::size_t>(reserved);
  }

 private:
  std::uint64_t attribute(cudaMemPoolAttr which, const char* name) const {
    unsigned long long value = 0;
    cudaError_t status = cudaMemPoolGetAttribute(pool_, which, &value);
    if (status != cudaSuccess)
      throw_device_error((std::string("cudaMemPoolGetAttribute(") + name + ")").c_str(), status);
    return value;
  }

  cudaMemPool_t pool_ = nullptr;
};

}  // namespace

std::unique_ptr<backing> make_async_backing(const cuda_options& options) {
  return std::make_unique<cuda_async_backing>(options);
}

}  // namespace vramscope::cuda
