// A plain CUDA program for the interposer on the GPU machine (gpu-record.sh builds it twice: with
// nvcc's default static cudart, which reaches the driver through cuGetProcAddress, and with a shared
// cudart). It allocates with cudaMalloc, cudaMallocAsync on two streams, cudaMallocManaged and
// cudaMallocHost, writes every block in a kernel, frees everything, and prints what the interposer
// should have seen: "expect allocs N frees N oom N". With an argument "loop" it allocates until
// killed (the kill -9 test).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

__global__ void touch(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = static_cast<unsigned char>(i);
}

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t s = (call);                                                               \
    if (s != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(s));                    \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(int argc, char** argv) {
  const bool loop = argc > 1 && std::strcmp(argv[1], "loop") == 0;
  int allocs = 0, frees = 0, ooms = 0;
  cudaStream_t a, b;
  CHECK(cudaStreamCreate(&a));
  CHECK(cudaStreamCreate(&b));
  for (long round = 0; loop || round < 20; ++round) {
    std::vector<void*> blocks;
    for (int i = 0; i < 10; ++i) {
      void* p = nullptr;
      const size_t n = (size_t(1) << 20) * (1 + (i + round) % 7) + 4096 * i;
      CHECK(cudaMalloc(&p, n));
      ++allocs;
      touch<<<64, 256>>>(static_cast<unsigned char*>(p), n);
      blocks.push_back(p);
    }
    void* q = nullptr;
    void* r = nullptr;
    CHECK(cudaMallocAsync(&q, 3 << 20, a));
    CHECK(cudaMallocAsync(&r, 5 << 20, b));
    allocs += 2;
    touch<<<64, 256, 0, a>>>(static_cast<unsigned char*>(q), 3 << 20);
    touch<<<64, 256, 0, b>>>(static_cast<unsigned char*>(r), 5 << 20);
    CHECK(cudaFreeAsync(q, a));
    CHECK(cudaFreeAsync(r, b));
    frees += 2;
    void* m = nullptr;
    CHECK(cudaMallocManaged(&m, 1 << 20));
    ++allocs;
    touch<<<64, 256>>>(static_cast<unsigned char*>(m), 1 << 20);
    void* h = nullptr;
    CHECK(cudaMallocHost(&h, 1 << 16));  // pinned host memory: counted, not a device allocation
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFreeHost(h));
    CHECK(cudaFree(m));
    ++frees;
    for (void* p : blocks) {
      CHECK(cudaFree(p));
      ++frees;
    }
    if (loop && round == 0) {
      std::printf("started\n");
      std::fflush(stdout);
    }
  }
  void* huge = nullptr;
  if (cudaMalloc(&huge, size_t(1) << 50) == cudaErrorMemoryAllocation) ++ooms;  // 1 PiB: fails
  (void)cudaGetLastError();
  std::printf("expect allocs %d frees %d oom %d\n", allocs, frees, ooms);
  return 0;
}
