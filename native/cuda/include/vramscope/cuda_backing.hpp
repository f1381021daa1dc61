// The CUDA backings (cudaMalloc, CUDA VMM, cudaMallocAsync on an owned pool) and what the device
// is, for programs that want them directly: GPU tests, benchmarks, recording. No CUDA header is
// needed to include this; the backings themselves live in native/cuda/*.cpp.
#pragma once

#include <memory>
#include <string>

#include "vramscope/backing.hpp"

namespace vramscope {

// Builds a CUDA backing of `kind` (cuda_malloc, cuda_vmm or cuda_async) on options.device.
// Throws no_cuda_device (no driver, no device, bad index), unsupported (the device lacks VMM or
// memory pools) or device_error.
std::unique_ptr<backing> make_cuda_backing(backing_kind kind, const cuda_options& options);

// "NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB, driver 13.0, runtime 13.0". Throws no_cuda_device.
std::string describe_cuda_device(int device = 0);

}  // namespace vramscope
