// What the GPU suites share: kernels that write a per-block pattern (a cookie derived from the
// block's address and serial number) into every requested byte of every live block and verify it,
// so that two blocks that overlap show up as real corruption; a kernel that holds a stream busy for
// a set time; and a main that first says which device, driver and runtime it runs on. With no
// device the binaries fail: they are meant to run on the GPU machine only, as
//   cmake -S native -B native/build-gpu -DVRAMSCOPE_CUDA=ON && cmake --build native/build-gpu -j16
//   ctest --test-dir native/build-gpu -L GPU --output-on-failure
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "check.hpp"
#include "vramscope/allocator.hpp"
#include "vramscope/cuda_backing.hpp"

namespace gpu {

// A CUDA call in a test: failure is reported with its text and ends the case.
#define GPU_CHECK(call)                                                                  \
  do {                                                                                   \
    cudaError_t gpu_status_ = (call);                                                    \
    if (gpu_status_ != cudaSuccess) {                                                    \
      ::check::report(__FILE__, __LINE__,                                                \
                      std::string(#call " failed: ") + cudaGetErrorString(gpu_status_)); \
      throw ::check::fatal{};                                                            \
    }                                                                                    \
  } while (0)

struct block_desc {
  unsigned long long address;
  unsigned long long bytes;  // the requested size: the bytes the caller may touch
  unsigned int serial;       // distinguishes a block from an earlier one at the same address
};

__host__ __device__ inline unsigned int cookie_of(unsigned long long address, unsigned int serial) {
  unsigned long long h = (address >> 8) * 0x9E3779B97F4A7C15ull ^ (serial * 0xBF58476D1CE4E5B9ull);
  h ^= h >> 31;
  return static_cast<unsigned int>(h) | 1u;
}
__host__ __device__ inline unsigned int word_pattern(unsigned int cookie, unsigned long long i) {
  return cookie ^ static_cast<unsigned int>(i * 0x85EBCA6Bull);
}
__host__ __device__ inline unsigned char byte_pattern(unsigned int cookie, unsigned long long i) {
  return static_cast<unsigned char>(cookie >> (8 * (i & 3))) ^ static_cast<unsigned char>(i);
}

// One CUDA block per memory block (striding over them); threads stride over the words, then over
// the tail bytes a size that is not a multiple of 4 leaves.
__global__ void fill_blocks(const block_desc* blocks, int count) {
  for (int b = blockIdx.x; b < count; b += gridDim.x) {
    const block_desc d = blocks[b];
    const unsigned int c = cookie_of(d.address, d.serial);
    unsigned int* words = reinterpret_cast<unsigned int*>(d.address);
    const unsigned long long n_words = d.bytes / 4;
    for (unsigned long long i = threadIdx.x; i < n_words; i += blockDim.x)
      words[i] = word_pattern(c, i);
    unsigned char* bytes = reinterpret_cast<unsigned char*>(d.address);
    for (unsigned long long i = n_words * 4 + threadIdx.x; i < d.bytes; i += blockDim.x)
      bytes[i] = byte_pattern(c, i);
  }
}

__global__ void verify_blocks(const block_desc* blocks, int count, unsigned long long* bad_bytes,
                              int* first_bad_block) {
  for (int b = blockIdx.x; b < count; b += gridDim.x) {
    const block_desc d = blocks[b];
    const unsigned int c = cookie_of(d.address, d.serial);
    const unsigned int* words = reinterpret_cast<const unsigned int*>(d.address);
    const unsigned long long n_words = d.bytes / 4;
    unsigned long long bad = 0;
    for (unsigned long long i = threadIdx.x; i < n_words; i += blockDim.x)
      if (words[i] != word_pattern(c, i)) bad += 4;
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(d.address);
    for (unsigned long long i = n_words * 4 + threadIdx.x; i < d.bytes; i += blockDim.x)
      if (bytes[i] != byte_pattern(c, i)) ++bad;
    if (bad != 0) {
      atomicAdd(bad_bytes, bad);
      atomicMin(first_bad_block, b);
    }
  }
}

__device__ inline unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Holds its stream for `busy_ns`, then fills the block: the write lands after the host has long
// since moved on, as with any slow kernel.
__global__ void busy_then_fill(block_desc d, unsigned long long busy_ns) {
  if (threadIdx.x == 0) {
    const unsigned long long start = global_timer_ns();
    while (global_timer_ns() - start < busy_ns) {
    }
  }
  __syncthreads();
  const unsigned int c = cookie_of(d.address, d.serial);
  unsigned int* words = reinterpret_cast<unsigned int*>(d.address);
  for (unsigned long long i = threadIdx.x; i < d.bytes / 4; i += blockDim.x)
    words[i] = word_pattern(c, i);
}

// Launches fill/verify over a host list of blocks, through a descriptor buffer of its own (device
// memory from cudaMalloc directly, so it never counts against the allocator under test).
class pattern_checker {
 public:
  pattern_checker() { GPU_CHECK(cudaMalloc(&counters_, sizeof(unsigned long long) + sizeof(int))); }
  ~pattern_checker() {
    cudaFree(descs_);
    cudaFree(counters_);
  }
  pattern_checker(const pattern_checker&) = delete;
  pattern_checker& operator=(const pattern_checker&) = delete;

  void fill(const std::vector<block_desc>& blocks, cudaStream_t stream = 0) {
    if (blocks.empty()) return;
    upload(blocks, stream);
    fill_blocks<<<grid(blocks.size()), 256, 0, stream>>>(descs_, static_cast<int>(blocks.size()));
    GPU_CHECK(cudaGetLastError());
    GPU_CHECK(cudaStreamSynchronize(stream));
  }

  // Bytes that do not hold their block's pattern; `first_bad` gets the index of one such block.
  unsigned long long verify(const std::vector<block_desc>& blocks, int* first_bad = nullptr,
                            cudaStream_t stream = 0) {
    if (blocks.empty()) return 0;
    upload(blocks, stream);
    unsigned char init[sizeof(unsigned long long) + sizeof(int)];
    unsigned long long zero = 0;
    int none = 0x7fffffff;
    std::memcpy(init, &zero, sizeof zero);
    std::memcpy(init + sizeof zero, &none, sizeof none);
    GPU_CHECK(cudaMemcpyAsync(counters_, init, sizeof init, cudaMemcpyHostToDevice, stream));
    auto* bad = static_cast<unsigned long long*>(counters_);
    auto* first = reinterpret_cast<int*>(static_cast<unsigned char*>(counters_) + sizeof zero);
    verify_blocks<<<grid(blocks.size()), 256, 0, stream>>>(descs_, static_cast<int>(blocks.size()),
                                                           bad, first);
    GPU_CHECK(cudaGetLastError());
    GPU_CHECK(cudaMemcpyAsync(init, counters_, sizeof init, cudaMemcpyDeviceToHost, stream));
    GPU_CHECK(cudaStreamSynchronize(stream));
    std::memcpy(&zero, init, sizeof zero);
    std::memcpy(&none, init + sizeof zero, sizeof none);
    if (first_bad) *first_bad = none;
    return zero;
  }

 private:
  static unsigned grid(std::size_t n) { return static_cast<unsigned>(n < 1024 ? n : 1024); }
  void upload(const std::vector<block_desc>& blocks, cudaStream_t stream) {
    if (blocks.size() > capacity_) {
      cudaFree(descs_);
      capacity_ = blocks.size() * 2;
      GPU_CHECK(cudaMalloc(&descs_, capacity_ * sizeof(block_desc)));
    }
    GPU_CHECK(cudaMemcpyAsync(descs_, blocks.data(), blocks.size() * sizeof(block_desc),
                              cudaMemcpyHostToDevice, stream));
  }

  block_desc* descs_ = nullptr;
  std::size_t capacity_ = 0;
  void* counters_ = nullptr;
};

inline cudaStream_t new_stream() {
  cudaStream_t s = nullptr;
  GPU_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}
inline vramscope::stream_t as_stream(cudaStream_t s) {
  return reinterpret_cast<vramscope::stream_t>(s);
}

// The GPU suites' main: which device, driver and runtime first; no device is a failure.
inline int run_on_device(int argc, char** argv) {
  std::string reason;
  if (!vramscope::cuda_device_available(&reason)) {
    std::printf("no CUDA device: %s\n0 passed, 1 failed\n", reason.c_str());
    return 1;
  }
  std::printf("device 0: %s\n", vramscope::describe_cuda_device(0).c_str());
  return ::check::run_all(argc, argv);
}

}  // namespace gpu

#define GPU_MAIN \
  int main(int argc, char** argv) { return ::gpu::run_on_device(argc, argv); }
