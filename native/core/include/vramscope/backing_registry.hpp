// The registry of device backings. Backings that need a device runtime live outside the core
// library (the CUDA ones in native/cuda/, target vramscope_cuda) and register themselves at static
// initialisation, as strategies do; make_backing (backing.hpp) finds them here. Core therefore
// builds and links without CUDA, and a program has the CUDA backings exactly when it links them.
#pragma once

#include <memory>
#include <string>

#include "vramscope/backing.hpp"

namespace vramscope {

// Builds a backing of the kind it was registered for on options.device. Throws no_cuda_device
// (no driver, no device, bad index), unsupported (the device lacks the capability) or device_error.
using device_backing_factory = std::unique_ptr<backing> (*)(const cuda_options& options);

// Whether the device runtime can be used now. Never throws; when it answers false it sets *reason
// (if given) to why, in words a user can act on.
using device_probe = bool (*)(std::string* reason) noexcept;

// Each device backing registers itself with one of these at namespace scope. A second
// registration of the same kind replaces the first (the last one linked wins).
struct backing_registration {
  backing_registration(backing_kind kind, device_backing_factory factory);
};

// The device runtime registers its probe once, beside its backings; built_with_cuda() is true from
// then on, and cuda_device_available() asks the probe.
struct device_probe_registration {
  explicit device_probe_registration(device_probe probe);
};

// The factory registered for `kind`, or nullptr where this program links no backing of that kind
// (the simulated backing is never registered: make_backing builds it itself).
device_backing_factory find_device_backing(backing_kind kind) noexcept;

}  // namespace vramscope
