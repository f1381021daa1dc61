// Basic vocabulary shared by every part of the allocator library: streams, sizes, alignment.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__GNUC__) || defined(__clang__)
#define VRAMSCOPE_LIKELY(x) __builtin_expect(!!(x), 1)
#define VRAMSCOPE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VRAMSCOPE_NOINLINE __attribute__((noinline))
#else
#define VRAMSCOPE_LIKELY(x) (x)
#define VRAMSCOPE_UNLIKELY(x) (x)
#define VRAMSCOPE_NOINLINE
#endif

#ifndef NDEBUG
#include <cassert>
#define VRAMSCOPE_ASSERT(x) assert(x)
#else
#define VRAMSCOPE_ASSERT(x) ((void)0)
#endif

namespace vramscope {

// A stream is an opaque handle: on CUDA backings it holds a cudaStream_t's value, on the simulated
// backing any number names a logical stream. 0 is the default (legacy) stream.
using stream_t = std::uintptr_t;

// Device addresses are numbers: on the simulated backing they are never dereferenced.
using address_t = std::uintptr_t;

// Every block any strategy hands out is aligned to at least this (as cudaMalloc's 256 B).
constexpr std::size_t min_alignment = 256;

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;
constexpr std::size_t GiB = 1024 * MiB;

constexpr std::size_t align_up(std::size_t n, std::size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}
constexpr std::size_t align_down(std::size_t n, std::size_t alignment) {
  return n / alignment * alignment;
}
constexpr bool is_power_of_two(std::size_t n) { return n != 0 && (n & (n - 1)) == 0; }
inline std::size_t next_power_of_two(std::size_t n) {
  if (n <= 1) return 1;
#if defined(__GNUC__) || defined(__clang__)
  return std::size_t{1} << (64 - __builtin_clzll(static_cast<unsigned long long>(n - 1)));
#else
  std::size_t p = 1;
  while (p < n) p <<= 1;
  return p;
#endif
}
inline unsigned log2_floor(std::size_t n) {
#if defined(__GNUC__) || defined(__clang__)
  return 63u - static_cast<unsigned>(__builtin_clzll(static_cast<unsigned long long>(n)));
#else
  unsigned r = 0;
  while (n >>= 1) ++r;
  return r;
#endif
}

}  // namespace vramscope
