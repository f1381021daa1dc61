// Error types and the formatting of sizes and addresses in their messages.
#include "vramscope/errors.hpp"

#include <cstdio>

namespace vramscope {

const char* error_code_name(error_code code) noexcept {
  switch (code) {
    case error_code::out_of_memory:
      return "out_of_memory";
    case error_code::invalid_free:
      return "invalid_free";
    case error_code::double_free:
      return "double_free";
    case error_code::invalid_argument:
      return "invalid_argument";
    case error_code::unsupported:
      return "unsupported";
    case error_code::no_cuda_device:
      return "no_cuda_device";
    case error_code::device_error:
      return "device_error";
    case error_code::cancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string format_bytes(std::size_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else if (v == static_cast<double>(static_cast<std::uint64_t>(v)))
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

std::string format_address(address_t address) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(address));
  return buf;
}

out_of_memory::out_of_memory(std::size_t requested, std::size_t available, const std::string& where)
    : error(error_code::out_of_memory, "out of memory: " + where + ": requested " +
                                           format_bytes(requested) + ", " +
                                           format_bytes(available) + " available"),
      requested_(requested),
      available_(available) {}

invalid_free::invalid_free(address_t address)
    : error(error_code::invalid_free,
            "invalid free: " + format_address(address) + " was not allocated by this allocator"),
      address_(address) {}

double_free::double_free(address_t address)
    : error(error_code::double_free,
            "double free: " + format_address(address) + " is already freed"),
      address_(address) {}

no_cuda_device::no_cuda_device(const std::string& detail)
    : error(error_code::no_cuda_device,
            "no CUDA device: " + detail +
                " (recording needs an NVIDIA GPU and driver; import and replay work without one)") {
}

device_error::device_error(const std::string& call, int status, const std::string& text)
    : error(error_code::device_error,
            call + " failed: " + text + " (" + std::to_string(status) + ")"),
      status_(status) {}

}  // namespace vramscope
