// A stand-in for libcuda.so, for testing the interposer where there is no GPU: it exports the
// driver's memory functions and cuGetProcAddress (both versions) with the real signatures, hands out
// addresses from a fake address space (host memory for pinned allocations), and fails requests
// above 1 TiB with CUDA_ERROR_OUT_OF_MEMORY (2). As the real driver, cuGetProcAddress returns
// internal entry points, not the exported symbols, and a per-thread-default-stream variant of the
// stream-ordered functions when asked for one.
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using cu_result = int;
using cu_deviceptr = unsigned long long;
using cu_handle = unsigned long long;
constexpr cu_result out_of_memory = 2, invalid_value = 1, not_found = 500;
constexpr unsigned long long too_big = 1ull << 40;
constexpr unsigned ptds_flag = 1u << 1;  // CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

std::atomic<cu_deviceptr> next_address{0x7f0000000000ull};
std::atomic<cu_handle> next_handle{1};

cu_deviceptr take(std::size_t n) { return next_address.fetch_add((n + 511) / 512 * 512 + 512); }

cu_result mem_alloc(cu_deviceptr* p, std::size_t n) {
  if (p == nullptr || n == 0) return invalid_value;
  if (n > too_big) return out_of_memory;
  *p = take(n);
  return 0;
}
cu_result mem_free(cu_deviceptr p) { return p == 0 ? invalid_value : 0; }
cu_result mem_alloc_async(cu_deviceptr* p, std::size_t n, void*) { return mem_alloc(p, n); }
cu_result mem_alloc_async_ptsz(cu_deviceptr* p, std::size_t n, void*) { return mem_alloc(p, n); }
cu_result mem_free_async(cu_deviceptr p, void*) { return mem_free(p); }
cu_result mem_free_async_ptsz(cu_deviceptr p, void*) { return mem_free(p); }
cu_result mem_alloc_pool(cu_deviceptr* p, std::size_t n, void*, void*) { return mem_alloc(p, n); }
cu_result mem_alloc_managed(cu_deviceptr* p, std::size_t n, unsigned) { return mem_alloc(p, n); }
cu_result mem_alloc_host(void** p, std::size_t n) {
  if (p == nullptr) return invalid_value;
  if (n > too_big) return out_of_memory;
  *p = std::malloc(n == 0 ? 1 : n);
  return *p ? 0 : out_of_memory;
}
cu_result mem_host_alloc(void** p, std::size_t n, unsigned) { return mem_alloc_host(p, n); }
cu_result mem_free_host(void* p) {
  std::free(p);
  return 0;
}
cu_result mem_create(cu_handle* h, std::size_t n, const void*, unsigned long long) {
  if (h == nullptr) return invalid_value;
  if (n > too_big) return out_of_memory;
  *h = next_handle.fetch_add(1);
  return 0;
}
cu_result mem_release(cu_handle h) { return h == 0 ? invalid_value : 0; }
cu_result mem_map(cu_deviceptr p, std::size_t, std::size_t, cu_handle h, unsigned long long) {
  return p == 0 || h == 0 ? invalid_value : 0;
}
cu_result mem_unmap(cu_deviceptr p, std::size_t) { return p == 0 ? invalid_value : 0; }
cu_result mem_address_reserve(cu_deviceptr* p, std::size_t n, std::size_t, cu_deviceptr,
                              unsigned long long) {
  return mem_alloc(p, n);
}
cu_result mem_address_free(cu_deviceptr p, std::size_t) { return mem_free(p); }

cu_result get_proc_v1(const char* symbol, void** pfn, int version, std::uint64_t flags);
cu_result get_proc_v2(const char* symbol, void** pfn, int version, std::uint64_t flags,
                      void* status) {
  if (status != nullptr) *static_cast<int*>(status) = 0;
  return get_proc_v1(symbol, pfn, version, flags);
}

cu_result get_proc_v1(const char* symbol, void** pfn, int version, std::uint64_t flags) {
  if (symbol == nullptr || pfn == nullptr) return invalid_value;
  const bool ptds = (flags & ptds_flag) != 0;
  struct entry {
    const char* name;
    void* plain;
    void* ptds;
  };
  const entry entries[] = {
      {"cuMemAlloc", reinterpret_cast<void*>(&mem_alloc), nullptr},
      {"cuMemFree", reinterpret_cast<void*>(&mem_free), nullptr},
      {"cuMemAllocAsync", reinterpret_cast<void*>(&mem_alloc_async),
       reinterpret_cast<void*>(&mem_alloc_async_ptsz)},
      {"cuMemFreeAsync", reinterpret_cast<void*>(&mem_free_async),
       reinterpret_cast<void*>(&mem_free_async_ptsz)},
      {"cuMemAllocFromPoolAsync", reinterpret_cast<void*>(&mem_alloc_pool), nullptr},
      {"cuMemAllocManaged", reinterpret_cast<void*>(&mem_alloc_managed), nullptr},
      {"cuMemAllocHost", reinterpret_cast<void*>(&mem_alloc_host), nullptr},
      {"cuMemHostAlloc", reinterpret_cast<void*>(&mem_host_alloc), nullptr},
      {"cuMemFreeHost", reinterpret_cast<void*>(&mem_free_host), nullptr},
      {"cuMemCreate", reinterpret_cast<void*>(&mem_create), nullptr},
      {"cuMemRelease", reinterpret_cast<void*>(&mem_release), nullptr},
      {"cuMemMap", reinterpret_cast<void*>(&mem_map), nullptr},
      {"cuMemUnmap", reinterpret_cast<void*>(&mem_unmap), nullptr},
      {"cuMemAddressReserve", reinterpret_cast<void*>(&mem_address_reserve), nullptr},
      {"cuMemAddressFree", reinterpret_cast<void*>(&mem_address_free), nullptr},
      {"cuGetProcAddress",
       version >= 12000 ? reinterpret_cast<void*>(&get_proc_v2)
                        : reinterpret_cast<void*>(&get_proc_v1),
       nullptr},
  };
  for (const entry& e : entries) {
    if (std::strcmp(e.name, symbol) != 0) continue;
    *pfn = ptds && e.ptds ? e.ptds : e.plain;
    return 0;
  }
  *pfn = nullptr;
  return not_found;
}

}  // namespace

FAKE_EXPORT cu_result cuMemAlloc_v2(cu_deviceptr* p, std::size_t n) { return mem_alloc(p, n); }
FAKE_EXPORT cu_result cuMemFree_v2(cu_deviceptr p) { return mem_free(p); }
FAKE_EXPORT cu_result cuMemAllocAsync(cu_deviceptr* p, std::size_t n, void* s) {
  return mem_alloc_async(p, n, s);
}
FAKE_EXPORT cu_result cuMemFreeAsync(cu_deviceptr p, void* s) { return mem_free_async(p, s); }
FAKE_EXPORT cu_result cuMemAllocFromPoolAsync(cu_deviceptr* p, std::size_t n, void* pool, void* s) {
  return mem_alloc_pool(p, n, pool, s);
}
FAKE_EXPORT cu_result cuMemAllocManaged(cu_deviceptr* p, std::size_t n, unsigned f) {
  return mem_alloc_managed(p, n, f);
}
FAKE_EXPORT cu_result cuMemAllocHost_v2(void** p, std::size_t n) { return mem_alloc_host(p, n); }
FAKE_EXPORT cu_result cuMemHostAlloc(void** p, std::size_t n, unsigned f) {
  return mem_host_alloc(p, n, f);
}
FAKE_EXPORT cu_result cuMemFreeHost(void* p) { return mem_free_host(p); }
FAKE_EXPORT cu_result cuMemCreate(cu_handle* h, std::size_t n, const void* prop,
                                  unsigned long long f) {
  return mem_create(h, n, prop, f);
}
FAKE_EXPORT cu_result cuMemRelease(cu_handle h) { return mem_release(h); }
FAKE_EXPORT cu_result cuMemMap(cu_deviceptr p, std::size_t n, std::size_t o, cu_handle h,
                               unsigned long long f) {
  return mem_map(p, n, o, h, f);
}
FAKE_EXPORT cu_result cuMemUnmap(cu_deviceptr p, std::size_t n) { return mem_unmap(p, n); }
FAKE_EXPORT cu_result cuMemAddressReserve(cu_deviceptr* p, std::size_t n, std::size_t a,
                                          cu_deviceptr at, unsigned long long f) {
  return mem_address_reserve(p, n, a, at, f);
}
FAKE_EXPORT cu_result cuMemAddressFree(cu_deviceptr p, std::size_t n) {
  return mem_address_free(p, n);
}
FAKE_EXPORT cu_result cuGetProcAddress(const char* symbol, void** pfn, int version,
                                       std::uint64_t flags) {
  return get_proc_v1(symbol, pfn, version, flags);
}
FAKE_EXPORT cu_result cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                          std::uint64_t flags, void* status) {
  return get_proc_v2(symbol, pfn, version, flags, status);
}
