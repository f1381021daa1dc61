// The CUDA backings' entry: whether CUDA is usable here (never throwing, never aborting where there
// is no driver), the plain cudaMalloc backing, the registration of all three CUDA backings with
// core's backing registry, and a description of the device for GPU tests and benchmarks.
#include <string>

#include "cuda_common.hpp"
#include "vramscope/backing_registry.hpp"
#include "vramscope/cuda_backing.hpp"

namespace vramscope {

namespace {

class cuda_malloc_backing final : public cuda::cuda_backing_base {
 public:
  explicit cuda_malloc_backing(const cuda_options& options) : cuda_backing_base(options) {}
  backing_kind kind() const noexcept override { return backing_kind::cuda_malloc; }
};

std::string version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The number of devices, or -1 with the reason. With cudart linked statically and no driver
// installed, cudaGetDeviceCount reports cudaErrorInsufficientDriver rather than failing to load.
int device_count(std::string* reason) noexcept {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (reason) {
      *reason = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status) + " (" +
                std::to_string(static_cast<int>(status)) + ")";
      if (status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice)
        *reason += "; is an NVIDIA driver installed and a GPU visible to this process?";
    }
    return -1;
  }
  if (count == 0 && reason) *reason = "the CUDA driver reports no device";
  return count;
}

void require_device(int device) {
  std::string reason;
  int count = device_count(&reason);
  if (count <= 0) throw no_cuda_device(reason);
  if (device < 0 || device >= count)
    throw no_cuda_device("device " + std::to_string(device) + " requested, " +
                         std::to_string(count) + " present");
}

// The probe behind cuda_device_available (core asks it through the registry).
bool probe_cuda_device(std::string* reason) noexcept {
  try {
    return device_count(reason) > 0;
  } catch (...) {  // std::string may throw bad_alloc; this function must not
    return false;
  }
}

}  // namespace

std::unique_ptr<backing> make_cuda_backing(backing_kind kind, const cuda_options& options) {
  require_device(options.device);
  switch (kind) {
    case backing_kind::cuda_malloc:
      return std::make_unique<cuda_malloc_backing>(options);
    case backing_kind::cuda_vmm:
      return cuda::make_vmm_backing(options);
    case backing_kind::cuda_async:
      return cuda::make_async_backing(options);
    case backing_kind::simulated:
      break;
  }
  throw invalid_argument(std::string("make_cuda_backing: '") + backing_kind_name(kind) +
                         "' is not a CUDA backing");
}

namespace {

// Registered at static initialisation: linking this library is what gives a program the CUDA
// backings (and makes built_with_cuda() true). Nothing here touches the driver, so a program still
// loads where there is none.
std::unique_ptr<backing> make_malloc(const cuda_options& o) {
  return make_cuda_backing(backing_kind::cuda_malloc, o);
}
std::unique_ptr<backing> make_vmm(const cuda_options& o) {
  return make_cuda_backing(backing_kind::cuda_vmm, o);
}
std::unique_ptr<backing> make_async(const cuda_options& o) {
  return make_cuda_backing(backing_kind::cuda_async, o);
}
const device_probe_registration cuda_probe{probe_cuda_device};
const backing_registration cuda_malloc_registration{backing_kind::cuda_malloc, make_malloc};
const backing_registration cuda_vmm_registration{backing_kind::cuda_vmm, make_vmm};
const backing_registration cuda_async_registration{backing_kind::cuda_async, make_async};

}  // namespace

std::string describe_cuda_device(int device) {
  require_device(device);
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cuda::check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  cuda::check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  return std::string(prop.name) + ", sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + format_bytes(prop.totalGlobalMem) + ", driver " +
         version_text(driver) + ", runtime " + version_text(runtime);
}

}  // namespace vramscope
