// The backing registry: core alone (this test links no CUDA backing, in every build) has no device
// backing and says so, and a backing registered at static initialisation is the one make_backing
// builds for its kind, as the CUDA backings (native/cuda/cuda_backings.cpp) register theirs.
#include <memory>
#include <string>

#include "check.hpp"
#include "vramscope/backing_registry.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

// Stands in for a device backing: a simulated one whose capacity tells it apart.
constexpr std::size_t stand_in_capacity = 3 * GiB;
std::unique_ptr<backing> make_stand_in(const cuda_options&) {
  simulated_options o;
  o.capacity = stand_in_capacity;
  return make_simulated_backing(o);
}
const backing_registration stand_in_registration{backing_kind::cuda_async, make_stand_in};

TEST(
    "core alone has no CUDA: no probe, and the kinds nobody registered are refused as "
    "unsupported") {
  CHECK(!built_with_cuda());
  std::string reason;
  CHECK(!cuda_device_available(&reason));
  CHECK(reason.find("no CUDA") != std::string::npos);
  for (backing_kind kind : {backing_kind::cuda_malloc, backing_kind::cuda_vmm}) {
    CHECK(find_device_backing(kind) == nullptr);
    try {
      make_backing(kind);
      ::check::report(__FILE__, __LINE__, std::string(backing_kind_name(kind)) + " did not throw");
    } catch (const error& e) {
      CHECK_EQ(e.code(), error_code::unsupported);
      CHECK(std::string(e.what()).find("needs CUDA") != std::string::npos);
    }
  }
}

TEST("a backing registered at static initialisation is what make_backing builds for its kind") {
  CHECK(find_device_backing(backing_kind::cuda_async) == make_stand_in);
  auto b = make_backing(backing_kind::cuda_async);
  REQUIRE(b != nullptr);
  CHECK_EQ(b->capacity(), stand_in_capacity);
}

TEST("the simulated backing is never looked up in the registry") {
  CHECK(find_device_backing(backing_kind::simulated) == nullptr);
  auto b = make_backing(backing_kind::simulated);
  CHECK_EQ(b->kind(), backing_kind::simulated);
}

}  // namespace

CHECK_MAIN
