// Where there is no GPU, the library still loads and works on the simulated backing, and asking for
// a CUDA backing fails with a typed error that says why: no_cuda_device in a CUDA build (no driver
// or no device), unsupported in a build without CUDA. On a machine with a GPU the same binary checks
// that a device index beyond the last is refused the same way.
#include <string>

#include "check.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

const backing_kind cuda_kinds[] = {backing_kind::cuda_malloc, backing_kind::cuda_vmm,
                                   backing_kind::cuda_async};

TEST("probing for a CUDA device never throws and gives a reason when there is none") {
  std::string reason;
  bool available = cuda_device_available(&reason);
  std::printf("  built with CUDA: %s; device available: %s%s%s\n", built_with_cuda() ? "yes" : "no",
              available ? "yes" : "no", available ? "" : "; reason: ", reason.c_str());
  if (!available) CHECK(!reason.empty());
  if (!built_with_cuda()) CHECK(!available);
  CHECK_EQ(cuda_device_available(nullptr), available);
}

TEST("without a usable device every CUDA backing is refused with a typed error") {
  std::string reason;
  if (cuda_device_available(&reason)) {
    std::printf("  skipped: a CUDA device is present, so its absence cannot be observed here\n");
    return;
  }
  for (backing_kind kind : cuda_kinds) {
    try {
      make_backing(kind);
      ::check::report(__FILE__, __LINE__, std::string(backing_kind_name(kind)) + " did not throw");
    } catch (const error& e) {
      std::printf("  %s: %s: %s\n", backing_kind_name(kind), error_code_name(e.code()), e.what());
      if (built_with_cuda()) {
        CHECK_EQ(e.code(), error_code::no_cuda_device);
        // The driver's own reason reaches the message.
        CHECK(std::string(e.what()).find(reason) != std::string::npos);
      } else {
        CHECK_EQ(e.code(), error_code::unsupported);
        CHECK(std::string(e.what()).find("CUDA") != std::string::npos);
      }
    }
  }
}

TEST("a device index beyond the last is refused as no_cuda_device (or unsupported without CUDA)") {
  cuda_options options;
  options.device = 4096;
  for (backing_kind kind : cuda_kinds) {
    try {
      make_backing(kind, {}, options);
      ::check::report(__FILE__, __LINE__, "device 4096 was accepted");
    } catch (const error& e) {
      CHECK_EQ(e.code(), built_with_cuda() ? error_code::no_cuda_device : error_code::unsupported);
    }
  }
}

TEST("after the failed probe the simulated backing serves the driver-baseline strategies") {
  std::string reason;
  (void)cuda_device_available(&reason);
  (void)cuda_device_available(&reason);  // a second probe must not change the answer's kind
  auto b = make_backing(backing_kind::simulated);
  for (const char* name : {"cuda_malloc", "async_pool"}) {
    auto a = make_allocator(name, *b);
    void* p = a->allocate(1000);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<address_t>(p) % min_alignment == 0);
    a->deallocate(p);
    CHECK_EQ(a->stats().live_blocks, 0u);
  }
}

}  // namespace

CHECK_MAIN
