// Typed errors. Every failure an allocator can report is one of these, with a stable code that the
// Node binding passes on to JavaScript; none leaves an allocator in a changed state.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "vramscope/types.hpp"

namespace vramscope {

enum class error_code {
  out_of_memory,     // a request did not fit (cap, device memory, pool size)
  invalid_free,      // an address this allocator never handed out (or not a block start)
  double_free,       // an address that was handed out and is already freed
  invalid_argument,  // a bad parameter (unknown key, wrong unit, out of range)
  unsupported,       // the strategy needs a capability the backing lacks, or CUDA was not built
  no_cuda_device,    // asked for a CUDA backing where there is no driver or device
  device_error,      // a CUDA call failed; the message carries the CUDA error text
  cancelled,         // a long operation (replay) was asked to stop; its partial results are dropped
};

const char* error_code_name(error_code code) noexcept;

class error : public std::runtime_error {
 public:
  error(error_code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  error_code code() const noexcept { return code_; }

 private:
  error_code code_;
};

class out_of_memory : public error {
 public:
  out_of_memory(std::size_t requested, std::size_t available, const std::string& where);
  std::size_t requested() const noexcept { return requested_; }
  std::size_t available() const noexcept { return available_; }

 private:
  std::size_t requested_;
  std::size_t available_;
};

class invalid_free : public error {
 public:
  explicit invalid_free(address_t address);
  address_t address() const noexcept { return address_; }

 private:
  address_t address_;
};

class double_free : public error {
 public:
  explicit double_free(address_t address);
  address_t address() const noexcept { return address_; }

 private:
  address_t address_;
};

class invalid_argument : public error {
 public:
  explicit invalid_argument(const std::string& message)
      : error(error_code::invalid_argument, message) {}
};

class unsupported : public error {
 public:
  explicit unsupported(const std::string& message) : error(error_code::unsupported, message) {}
};

class no_cuda_device : public error {
 public:
  explicit no_cuda_device(const std::string& detail);
};

class device_error : public error {
 public:
  device_error(const std::string& call, int status, const std::string& text);
  int status() const noexcept { return status_; }

 private:
  int status_;
};

// "1.5 GiB", "512 B": sizes in messages are written for people.
std::string format_bytes(std::size_t bytes);
std::string format_address(address_t address);

}  // namespace vramscope
