// A stand-in for a shared libcudart: the runtime's memory functions, implemented as the real
// runtime does, on the driver's entry points that it finds with dlopen + dlsym("cuGetProcAddress_v2")
// and then cuGetProcAddress. So a recorded cudaMalloc makes a driver call of its own, which the
// interposer must not record a second time. FAKE_CUDA_DRIVER is the fake driver's path.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using cuda_error = int;
using cu_result = int;
using cu_deviceptr = unsigned long long;
using get_proc_fn = cu_result (*)(const char*, void**, int, std::uint64_t, void*);

struct driver_table {
  cu_result (*mem_alloc)(cu_deviceptr*, std::size_t);
  cu_result (*mem_free)(cu_deviceptr);
  cu_result (*mem_alloc_async)(cu_deviceptr*, std::size_t, void*);
  cu_result (*mem_free_async)(cu_deviceptr, void*);
  cu_result (*mem_alloc_managed)(cu_deviceptr*, std::size_t, unsigned);
  cu_result (*mem_host_alloc)(void**, std::size_t, unsigned);
  cu_result (*mem_free_host)(void*);
};

template <class Fn>
void entry(get_proc_fn get, const char* name, Fn& into) {
  void* p = nullptr;
  if (get(name, &p, 12000, 0, nullptr) != 0 || p == nullptr) {
    std::fprintf(stderr, "fake cudart: no driver entry point %s\n", name);
    std::abort();
  }
  into = reinterpret_cast<Fn>(p);
}

const driver_table& driver() {
  static const driver_table table = [] {
    void* lib = dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "fake cudart: %s\n", dlerror());
      std::abort();
    }
    auto get = reinterpret_cast<get_proc_fn>(dlsym(lib, "cuGetProcAddress_v2"));
    driver_table t{};
    entry(get, "cuMemAlloc", t.mem_alloc);
    entry(get, "cuMemFree", t.mem_free);
    entry(get, "cuMemAllocAsync", t.mem_alloc_async);
    entry(get, "cuMemFreeAsync", t.mem_free_async);
    entry(get, "cuMemAllocManaged", t.mem_alloc_managed);
    entry(get, "cuMemHostAlloc", t.mem_host_alloc);
    entry(get, "cuMemFreeHost", t.mem_free_host);
    return t;
  }();
  return table;
}

}  // namespace

FAKE_EXPORT cuda_error cudaMalloc(void** p, std::size_t n) {
  return driver().mem_alloc(reinterpret_cast<cu_deviceptr*>(p), n);
}
FAKE_EXPORT cuda_error cudaFree(void* p) {
  return p == nullptr ? 0 : driver().mem_free(reinterpret_cast<cu_deviceptr>(p));
}
FAKE_EXPORT cuda_error cudaMallocAsync(void** p, std::size_t n, void* s) {
  return driver().mem_alloc_async(reinterpret_cast<cu_deviceptr*>(p), n, s);
}
FAKE_EXPORT cuda_error cudaFreeAsync(void* p, void* s) {
  return driver().mem_free_async(reinterpret_cast<cu_deviceptr>(p), s);
}
FAKE_EXPORT cuda_error cudaMallocManaged(void** p, std::size_t n, unsigned flags) {
  return driver().mem_alloc_managed(reinterpret_cast<cu_deviceptr*>(p), n, flags);
}
FAKE_EXPORT cuda_error cudaMallocHost(void** p, std::size_t n) {
  return driver().mem_host_alloc(p, n, 0);
}
FAKE_EXPORT cuda_error cudaHostAlloc(void** p, std::size_t n, unsigned flags) {
  return driver().mem_host_alloc(p, n, flags);
}
FAKE_EXPORT cuda_error cudaFreeHost(void* p) { return driver().mem_free_host(p); }
