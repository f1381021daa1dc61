// Probes how the driver's stream-ordered pool (cudaMemPool) reserves memory, to calibrate the
// simulated backing's model of it: for each pattern, bytes used and reserved as the pool reports
// them, and how many distinct 2 MiB-aligned chunks the blocks' addresses fall in.
// Build: nvcc -O2 -arch=sm_90 probe-mempool.cu -o probe-mempool
#include <cuda_runtime.h>

#include <cstdio>
#include <set>
#include <vector>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e = (x);                                                           \
    if (e != cudaSuccess) {                                                        \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

static unsigned long long attr(cudaMemPool_t pool, cudaMemPoolAttr a) {
  unsigned long long v = 0;
  cudaMemPoolGetAttribute(pool, a, &v);
  return v;
}

int main() {
  cudaMemPool_t pool;
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CK(cudaMemPoolCreate(&pool, &props));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  struct pattern {
    const char* name;
    size_t count, bytes;
  };
  const pattern patterns[] = {{"1 x 1 B", 1, 1},          {"1000 x 512 B", 1000, 512},
                              {"1000 x 1000 B", 1000, 1000}, {"100 x 64 KiB", 100, 64 << 10},
                              {"100 x 1 MiB", 100, 1 << 20}, {"50 x 3 MiB", 50, 3 << 20},
                              {"10 x 64 MiB", 10, 64 << 20}, {"1 x 100 MiB + 1", 1, (100 << 20) + 1}};
  std::printf("%-18s %14s %14s %14s %8s %s\n", "pattern", "requested", "used", "reserved", "chunks",
              "after free+sync: reserved (threshold 0)");
  for (const auto& p : patterns) {
    std::vector<void*> blocks(p.count);
    std::set<unsigned long long> chunks;
    for (auto& b : blocks) {
      CK(cudaMallocFromPoolAsync(&b, p.bytes, pool, s));
      chunks.insert(reinterpret_cast<unsigned long long>(b) >> 21);
    }
    CK(cudaStreamSynchronize(s));
    unsigned long long used = attr(pool, cudaMemPoolAttrUsedMemCurrent);
    unsigned long long reserved = attr(pool, cudaMemPoolAttrReservedMemCurrent);
    // Adjacent blocks: the gap between consecutive addresses tells the rounding.
    long long gap = blocks.size() > 1 ? (long long)((char*)blocks[1] - (char*)blocks[0]) : 0;
    for (auto& b : blocks) CK(cudaFreeAsync(b, s));
    CK(cudaStreamSynchronize(s));
    unsigned long long after = attr(pool, cudaMemPoolAttrReservedMemCurrent);
    std::printf("%-18s %14llu %14llu %14llu %8zu %llu   (gap between first two blocks %lld)\n", p.name,
                (unsigned long long)(p.count * p.bytes), used, reserved, chunks.size(), after, gap);
  }
  // Reuse without sync: free then allocate again on the same stream with a high threshold.
  unsigned long long threshold = ~0ull;
  CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  void* a;
  CK(cudaMallocFromPoolAsync(&a, 8 << 20, pool, s));
  CK(cudaFreeAsync(a, s));
  void* b;
  CK(cudaMallocFromPoolAsync(&b, 4 << 20, pool, s));
  CK(cudaStreamSynchronize(s));
  std::printf("free 8 MiB then 4 MiB on the same stream: %s address, reserved %llu\n",
              a == b ? "same" : "different", attr(pool, cudaMemPoolAttrReservedMemCurrent));
  CK(cudaFreeAsync(b, s));
  CK(cudaStreamSynchronize(s));
  CK(cudaMemPoolTrimTo(pool, 0));
  std::printf("after trim: reserved %llu\n", attr(pool, cudaMemPoolAttrReservedMemCurrent));
  return 0;
}
