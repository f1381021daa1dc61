// The registry of device backings (backing_registry.hpp): a factory per kind and the device probe,
// filled at static initialisation by whatever device backings the program links.
#include "vramscope/backing_registry.hpp"

#include <array>

namespace vramscope {

namespace {

constexpr std::size_t kind_count = 4;  // backing_kind's values, simulated included

// Function-local statics: registrations run during static initialisation, in an order across
// translation units that nothing fixes, so the tables must exist before the first of them.
std::array<device_backing_factory, kind_count>& factories() {
  static std::array<device_backing_factory, kind_count> table{};
  return table;
}
device_probe& probe() {
  static device_probe registered = nullptr;
  return registered;
}

std::size_t slot(backing_kind kind) noexcept { return static_cast<std::size_t>(kind); }

}  // namespace

backing_registration::backing_registration(backing_kind kind, device_backing_factory factory) {
  factories()[slot(kind)] = factory;
}

device_probe_registration::device_probe_registration(device_probe p) { probe() = p; }

device_backing_factory find_device_backing(backing_kind kind) noexcept {
  if (kind == backing_kind::simulated || slot(kind) >= kind_count) return nullptr;
  return factories()[slot(kind)];
}

bool built_with_cuda() noexcept { return probe() != nullptr; }

bool cuda_device_available(std::string* reason) noexcept {
  if (device_probe p = probe()) return p(reason);
  try {
    if (reason) *reason = "this build of vramscope has no CUDA support";
  } catch (...) {  // std::string may throw bad_alloc; this function must not
  }
  return false;
}

}  // namespace vramscope
