// rmm_binning: RMM's binning_memory_resource over a pool_memory_resource, as RMM's replay benchmark
// builds it (rapidsai/rmm: mr/binning_memory_resource.hpp, mr/fixed_size_memory_resource.hpp,
// detail/fixed_size_memory_resource_impl, detail/fixed_size_free_list.hpp,
// benchmarks/replay/replay.cpp). Facts from RMM's source, our own code:
//  - each bin is a fixed_size_memory_resource: blocks of one size (aligned up to 256 B), taken
//    from the upstream pool in chunks of blocks_to_preallocate blocks (128), the first chunk at
//    construction; a request goes to the smallest bin at least its size (so with bins from 256 KiB
//    a 1 KiB request takes a 256 KiB block), a request larger than every bin to the pool itself;
//  - a bin's free blocks are kept per stream, first in first out (a freed block goes to the back,
//    a request takes the front); where its stream's list is empty a request takes another
//    stream's front block, else the bin takes another chunk from the pool;
//  - chunks are never given back before the resource is destroyed;
//  - the upstream is the pool model of rmm_pool_core.hpp, with rmm_pool's parameters.
// Where the pool cannot hold a bin's first chunk at construction (RMM's constructor would throw),
// the bin starts with none and takes one at its first request.
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rmm_pool_core.hpp"
#include "vramscope/allocator.hpp"

namespace vramscope {
namespace {

class rmm_binning final : public rmm_model::pool_owner {
 public:
  rmm_binning(backing& b, const params& p) : pool_owner("rmm_binning", b, p) {
    std::vector<std::uint64_t> bins =
        p.get_size_list("bins", {256 * KiB, 512 * KiB, 1 * MiB, 2 * MiB, 4 * MiB});
    blocks_per_chunk_ = p.get_uint("blocks_to_preallocate", 128);
    if (blocks_per_chunk_ == 0 || blocks_per_chunk_ > (std::uint64_t{1} << 20))
      throw invalid_argument(
          "rmm_binning: parameter 'blocks_to_preallocate' must be from 1 to 2^20, got " +
          std::to_string(blocks_per_chunk_));
    for (std::uint64_t& s : bins) {
      if (s == 0 || s > (std::uint64_t{1} << 40))
        throw invalid_argument("rmm_binning: parameter 'bins': a bin of " + format_bytes(s) +
                               " (bins are from 1 B to 1 TiB)");
      s = rmm_model::align_up_256(s);  // add_bin aligns each size up to 256 B
    }
    std::sort(bins.begin(), bins.end());
    bins.erase(std::unique(bins.begin(), bins.end()), bins.end());
    for (std::uint64_t s : bins) bins_.push_back(bin{s, {}});
    start_pool();
    for (std::uint32_t i = 0; i < bins_.size(); ++i) add_chunk(i, 0);
  }

 private:
  struct slot {
    address_t address;
    std::uint32_t chunk;
  };
  struct bin {
    std::uint64_t size;
    std::map<stream_t, std::deque<slot>> free;  // per stream, first in first out
  };
  struct chunk {
    address_t address;
    std::uint32_t bin;
    std::vector<std::uint8_t> live;  // per block
  };

  // cookie: 0 for a block of the pool itself, else its chunk's index + 1.
  allocation do_allocate(std::size_t bytes, stream_t stream, std::uint32_t& cookie) override {
    auto b = std::lower_bound(bins_.begin(), bins_.end(), bytes,
                              [](const bin& x, std::uint64_t n) { return x.size < n; });
    if (b == bins_.end()) {
      if (bytes > rmm_model::largest_request) return refuse_request(bytes, "the pool");
      const std::uint64_t size = rmm_model::align_up_256(bytes);
      const address_t a = pool_.allocate(size, stream);
      if (a == 0) return refuse_request(bytes, "the pool");
      return {a, size};
    }
    const std::uint32_t index = static_cast<std::uint32_t>(b - bins_.begin());
    std::deque<slot>* list = nullptr;
    auto own = b->free.find(stream);
    if (own != b->free.end() && !own->second.empty()) list = &own->second;
    for (auto it = b->free.begin(); list == nullptr && it != b->free.end(); ++it)
      if (!it->second.empty()) list = &it->second;
    if (list == nullptr) {
      if (!add_chunk(index, stream)) return refuse_request(bytes, "a bin's new chunk");
      list = &b->free[stream];
    }
    const slot s = list->front();
    list->pop_front();
    chunk& c = chunks_[s.chunk];
    c.live[(s.address - c.address) / b->size] = 1;
    cookie = s.chunk + 1;
    return {s.address, b->size};
  }

  allocation refuse_request(std::size_t bytes, const char* what) const {
    return refuse(bytes, backing_available(), [&] {
      return std::string("maximum pool size exceeded: no room in ") + what + " (the pool holds " +
             format_bytes(pool_.pool_size()) + ")";
    });
  }

  void do_deallocate(address_t a, std::uint64_t, std::uint32_t cookie, stream_t stream) override {
    if (cookie == 0) {
      pool_.deallocate(a, stream);
      return;
    }
    chunk& c = chunks_[cookie - 1];
    bin& b = bins_[c.bin];
    c.live[(a - c.address) / b.size] = 0;
    b.free[stream].push_back({a, cookie - 1});
  }

  // Another chunk of the bin's blocks from the pool, into the stream's list.
  bool add_chunk(std::uint32_t index, stream_t stream) {
    bin& b = bins_[index];
    const std::uint64_t bytes = b.size * blocks_per_chunk_;
    const address_t a = pool_.allocate(bytes, stream);
    if (a == 0) return false;
    const std::uint32_t id = static_cast<std::uint32_t>(chunks_.size());
    chunks_.push_back({a, index, std::vector<std::uint8_t>(blocks_per_chunk_, 0)});
    chunk_at_.emplace(a, id);
    std::deque<slot>& list = b.free[stream];
    for (std::uint64_t i = 0; i < blocks_per_chunk_; ++i) list.push_back({a + i * b.size, id});
    return true;
  }

  void do_walk(layout_visitor& v) const override {
    for (auto& [a, n] : pool_.upstream()) v.region({a, n, true, 0});
    pool_.for_each_block([&](address_t a, std::uint64_t n, bool free) {
      auto c = free ? chunk_at_.end() : chunk_at_.find(a);
      if (c == chunk_at_.end()) {
        v.block({a, n, free ? block_state::free : block_state::live, 0});
        return;
      }
      // A chunk: its bin's blocks, each live or free (aux: the bin's number + 1).
      const chunk& k = chunks_[c->second];
      const std::uint64_t size = bins_[k.bin].size;
      for (std::size_t i = 0; i < k.live.size(); ++i)
        v.block({a + i * size, size, k.live[i] ? block_state::live : block_state::free, k.bin + 1});
    });
  }

  bool do_was_freed(address_t a) const override {
    auto c = chunk_at_.upper_bound(a);
    if (c != chunk_at_.begin()) {
      --c;
      const chunk& k = chunks_[c->second];
      const std::uint64_t size = bins_[k.bin].size;
      if (a < k.address + size * k.live.size())
        return (a - k.address) % size == 0 && k.live[(a - k.address) / size] == 0;
    }
    return pool_.in_free_block(a);
  }

  std::vector<bin> bins_;  // by size
  std::vector<chunk> chunks_;
  std::map<address_t, std::uint32_t> chunk_at_;
  std::uint64_t blocks_per_chunk_ = 128;
};

std::vector<param_info> binning_params() {
  std::vector<param_info> p = {
      {"bins", "size_list", "256KiB,512KiB,1MiB,2MiB,4MiB",
       "bin sizes (each a fixed_size_memory_resource; a request goes to the smallest bin that "
       "holds it): RMM's replay benchmark adds 2^18 to 2^22"},
      {"blocks_to_preallocate", "uint", "128",
       "blocks a bin takes from the pool at a time (fixed_size_memory_resource's default)"}};
  for (param_info& q : rmm_model::pool_params()) {
    q.description = "the upstream pool: " + q.description;
    p.push_back(q);
  }
  return p;
}

const strategy_registration registration{
    {"rmm_binning",
     "RMM's binning_memory_resource: fixed-size bins for small requests over an RMM pool",
     binning_params(), strategy_traits().runs_on(backing_kind::cuda_malloc)},
    [](backing& b, const params& p) -> std::unique_ptr<allocator> {
      return std::make_unique<rmm_binning>(b, p);
    }};

}  // namespace
}  // namespace vramscope
