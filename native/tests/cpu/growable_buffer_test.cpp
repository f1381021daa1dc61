// growable_buffer on the simulated backing: growth maps granules at the end and never moves the
// buffer, failures change nothing, shrink_to_fit and the destructor give everything back. (The GPU
// test checks on a real device that written data stays in place.)
#include <memory>

#include "check.hpp"
#include "vramscope/errors.hpp"
#include "vramscope/growable_buffer.hpp"
#include "vramscope/simulated_backing.hpp"

using namespace vramscope;

namespace {

std::unique_ptr<simulated_backing> small_device(std::size_t capacity) {
  simulated_options o;
  o.capacity = capacity;
  return make_simulated_backing(o);
}

// A backing with plain regions only, as cuda_malloc is.
class regions_only_backing final : public backing {
 public:
  backing_kind kind() const noexcept override { return backing_kind::cuda_malloc; }
  bool is_device_memory() const noexcept override { return false; }
  address_t allocate_region(std::size_t) override { return 0x100000; }
  void free_region(address_t, std::size_t) override {}
  event_t record_event(stream_t) override { return 1; }
  bool event_complete(event_t) override { return true; }
  void wait_event(event_t) override {}
  void release_event(event_t) override {}
  void synchronize() override {}
  std::size_t capacity() const noexcept override { return 1 * GiB; }
  std::size_t available() const noexcept override { return 1 * GiB; }
};

TEST("growing from 1 MiB to 100 MiB maps granules at the end and never moves the buffer") {
  auto device = small_device(1 * GiB);
  const std::size_t g = device->granularity();
  growable_buffer buffer(*device, 256 * MiB);
  CHECK_EQ(buffer.mapped(), 0u);
  CHECK_EQ(device->physical_used(), 0u);
  const address_t at = buffer.address();
  CHECK(at != 0);
  CHECK_EQ(at % g, 0u);

  std::size_t maps_before = device->calls().map;
  for (std::size_t size = 1 * MiB; size <= 100 * MiB; size += 3 * MiB + 512) {
    std::size_t mapped_before = buffer.mapped();
    buffer.grow(size);
    CHECK_EQ(buffer.address(), at);
    CHECK_EQ(buffer.size(), size);
    CHECK_EQ(buffer.mapped(), align_up(size, g));
    CHECK_EQ(device->mapped_bytes(), buffer.mapped());
    // Only the new granules were mapped: a granule mapped twice would have thrown.
    CHECK(buffer.mapped() >= mapped_before);
  }
  buffer.grow(100 * MiB);
  CHECK_EQ(buffer.address(), at);
  CHECK_EQ(buffer.mapped(), align_up(100 * MiB, g));
  CHECK_EQ(device->calls().unmap, 0u);  // growth never unmaps (so never copies or moves)
  CHECK(device->calls().map > maps_before);
  CHECK_EQ(device->calls().va_reserve, 1u);  // one reservation for the buffer's whole life
}

TEST("grow to a smaller size changes nothing; resize lowers the size and keeps the mapping") {
  auto device = small_device(1 * GiB);
  growable_buffer buffer(*device, 64 * MiB);
  buffer.grow(10 * MiB);
  std::size_t mapped = buffer.mapped();
  buffer.grow(5 * MiB);
  CHECK_EQ(buffer.size(), 10 * MiB);
  buffer.resize(3 * MiB);
  CHECK_EQ(buffer.size(), 3 * MiB);
  CHECK_EQ(buffer.mapped(), mapped);
  buffer.shrink_to_fit();
  CHECK_EQ(buffer.mapped(), align_up(3 * MiB, buffer.granularity()));
  CHECK_EQ(device->mapped_bytes(), buffer.mapped());
  buffer.resize(20 * MiB);
  CHECK_EQ(buffer.size(), 20 * MiB);
  CHECK_EQ(buffer.mapped(), align_up(20 * MiB, buffer.granularity()));
}

TEST(
    "growing past the reservation or the device's memory throws out_of_memory and changes "
    "nothing") {
  auto device = small_device(16 * MiB);
  growable_buffer buffer(*device, 64 * MiB);
  buffer.grow(8 * MiB);
  const address_t at = buffer.address();
  CHECK_THROWS_AS(buffer.grow(64 * MiB + 1), out_of_memory);
  CHECK_EQ(buffer.size(), 8 * MiB);
  CHECK_THROWS_AS(buffer.grow(32 * MiB), out_of_memory);  // the device has 16 MiB
  CHECK_EQ(buffer.size(), 8 * MiB);
  CHECK_EQ(buffer.mapped(), 8 * MiB);
  CHECK_EQ(device->mapped_bytes(), 8 * MiB);
  buffer.grow(16 * MiB);  // what does fit still works, in place
  CHECK_EQ(buffer.address(), at);
  CHECK_EQ(device->mapped_bytes(), 16 * MiB);
}

TEST("the destructor unmaps and releases the reservation; a moved-from buffer owns nothing") {
  auto device = small_device(1 * GiB);
  {
    growable_buffer a(*device, 32 * MiB);
    a.grow(7 * MiB);
    const address_t at = a.address();
    growable_buffer b(std::move(a));
    CHECK_EQ(b.address(), at);
    CHECK_EQ(b.size(), 7 * MiB);
    CHECK(a.data() == nullptr);
    CHECK_EQ(a.mapped(), 0u);
    growable_buffer c(*device, 4 * MiB);
    c = std::move(b);  // c's own reservation goes back first
    CHECK_EQ(c.address(), at);
    CHECK_EQ(device->calls().va_release, 1u);
  }
  CHECK_EQ(device->physical_used(), 0u);
  CHECK_EQ(device->mapped_bytes(), 0u);
  CHECK_EQ(device->calls().va_release, device->calls().va_reserve);
}

TEST("a backing without virtual memory is refused as unsupported, and 0 bytes as invalid") {
  regions_only_backing plain;
  CHECK_THROWS_AS(growable_buffer(plain, 1 * MiB), unsupported);
  auto device = small_device(1 * GiB);
  CHECK_THROWS_AS(growable_buffer(*device, 0), invalid_argument);
}

}  // namespace

CHECK_MAIN
