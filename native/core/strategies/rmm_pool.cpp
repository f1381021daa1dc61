// rmm_pool: RMM's pool_memory_resource, a coalescing best-fit pool per stream that grows from an
// initial size towards a maximum by asking the device for more (the model: rmm_pool_core.hpp;
// docs/strategies.md#rmm_pool).
#include <memory>
#include <string>

#include "rmm_pool_core.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

class rmm_pool final : public rmm_model::pool_owner {
 public:
  rmm_pool(backing& b, const params& p) : pool_owner("rmm_pool", b, p) { start_pool(); }

 private:
  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t&) override {
    if (bytes > rmm_model::largest_request) return refuse_request(bytes);
    const std::uint64_t size = rmm_model::align_up_256(bytes);
    const address_t a = pool_.allocate(size, stream);
    if (a == 0) return refuse_request(bytes);
    return {a, size};
  }

  allocation refuse_request(std::size_t bytes) const {
    return refuse(bytes, backing_available(), [&] {
      return "maximum pool size exceeded: the pool holds " + format_bytes(pool_.pool_size()) +
             (sizes_.maximum != 0 ? " of at most " + format_bytes(sizes_.maximum) : std::string()) +
             " and no free block of it fits";
    });
  }

  void do_deallocate(address_t a, std::uint64_t, std::uint32_t, stream_t stream) override {
    pool_.deallocate(a, stream);
  }

  void do_walk(layout_visitor& v) const override {
    for (auto& [a, n] : pool_.upstream()) v.region({a, n, true, 0});
    pool_.for_each_block([&](address_t a, std::uint64_t n, bool free) {
      v.block({a, n, free ? block_state::free : block_state::live, 0});
    });
  }

  bool do_was_freed(address_t a) const override { return pool_.in_free_block(a); }
};

const strategy_registration registration{
    {"rmm_pool",
     "RMM's pool_memory_resource: coalescing best fit per stream, grows towards a maximum",
     rmm_model::pool_params(), strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<rmm_pool>(b, p);
    }};

}  // namespace
}  // namespace vramscope
