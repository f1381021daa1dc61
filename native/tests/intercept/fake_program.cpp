// A "CUDA program" for the interposer's tests, linked against the fake runtime and driver
// (fake_cuda_runtime.cpp, fake_cuda_driver.cpp). It reaches memory functions every way a real one
// can: runtime symbols, driver symbols, dlopen + dlsym, cuGetProcAddress v1 and v2 (per-thread
// default stream too), from a second thread, from a forked child, and with a failing request.
//   fake_program script        prints "expect OP ADDRESS SIZE STREAM STATUS FLAGS THREAD" for each
//                              record the interposer must write, in order, then "nested N"
//   fake_program loop [US]     allocates and frees until killed, an op every US µs (default 200);
//                              prints "started", then "ops N" every 100 ops
//   fake_program measure N     N cudaMalloc + cudaFree pairs; prints "pair_ns X"
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>

extern "C" {
int cudaMalloc(void**, std::size_t);
int cudaFree(void*);
int cudaMallocAsync(void**, std::size_t, void*);
int cudaFreeAsync(void*, void*);
int cudaMallocManaged(void**, std::size_t, unsigned);
int cudaMallocHost(void**, std::size_t);
int cudaFreeHost(void*);
int cuMemAlloc_v2(unsigned long long*, std::size_t);
int cuMemFree_v2(unsigned long long);
int cuMemCreate(unsigned long long*, std::size_t, const void*, unsigned long long);
int cuMemRelease(unsigned long long);
int cuMemMap(unsigned long long, std::size_t, std::size_t, unsigned long long, unsigned long long);
int cuMemUnmap(unsigned long long, std::size_t);
int cuMemAddressReserve(unsigned long long*, std::size_t, std::size_t, unsigned long long,
                        unsigned long long);
int cuMemAddressFree(unsigned long long, std::size_t);
}

namespace {

using get_proc_v1 = int (*)(const char*, void**, int, std::uint64_t);
using get_proc_v2 = int (*)(const char*, void**, int, std::uint64_t, void*);
using mem_alloc_fn = int (*)(unsigned long long*, std::size_t);
using mem_free_fn = int (*)(unsigned long long);
using mem_alloc_async_fn = int (*)(unsigned long long*, std::size_t, void*);
using mem_free_async_fn = int (*)(unsigned long long, void*);

// Op codes of intercept_log.h, spelled out so that the expectations do not come from the header
// under test.
enum : int {
  cuda_malloc = 1,
  cuda_free = 2,
  cuda_malloc_async = 3,
  cuda_free_async = 4,
  cuda_malloc_managed = 5,
  cuda_malloc_host = 6,
  cuda_free_host = 7,
  cu_mem_alloc = 16,
  cu_mem_free = 17,
  cu_mem_alloc_async = 18,
  cu_mem_free_async = 19,
  cu_mem_create = 32,
  cu_mem_release = 33,
  cu_mem_map = 34,
  cu_mem_unmap = 35,
  cu_mem_address_reserve = 36,
  cu_mem_address_free = 37,
};

void expect(int op, std::uint64_t address, std::uint64_t size, std::uint64_t stream, int status,
            int flags, const char* thread) {
  std::printf("expect %d 0x%llx %llu 0x%llx %d %d %s\n", op,
              static_cast<unsigned long long>(address), static_cast<unsigned long long>(size),
              static_cast<unsigned long long>(stream), status, flags, thread);
}
std::uint64_t num(const void* p) { return reinterpret_cast<std::uint64_t>(p); }
void* stream_of(std::uint64_t s) { return reinterpret_cast<void*>(s); }

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fake_program: %s failed\n", what);
    std::exit(3);
  }
}

int script() {
  int nested = 0;
  require(cudaFree(nullptr) == 0, "cudaFree(nullptr)");  // context creation: not recorded

  void* a = nullptr;
  require(cudaMalloc(&a, 1000) == 0, "cudaMalloc");
  expect(cuda_malloc, num(a), 1000, 0, 0, 0, "main"), ++nested;
  void* b = nullptr;
  require(cudaMallocAsync(&b, 2048, stream_of(0x10)) == 0, "cudaMallocAsync");
  expect(cuda_malloc_async, num(b), 2048, 0x10, 0, 0, "main"), ++nested;
  require(cudaFreeAsync(b, stream_of(0x20)) == 0, "cudaFreeAsync");
  expect(cuda_free_async, num(b), 0, 0x20, 0, 0, "main"), ++nested;
  void* c = nullptr;
  require(cudaMallocManaged(&c, 4096, 1) == 0, "cudaMallocManaged");
  expect(cuda_malloc_managed, num(c), 4096, 0, 0, 0, "main"), ++nested;
  void* h = nullptr;
  require(cudaMallocHost(&h, 512) == 0, "cudaMallocHost");
  expect(cuda_malloc_host, num(h), 512, 0, 0, 0, "main"), ++nested;

  std::uint64_t on_other_thread = 0;
  std::thread other([&on_other_thread] {
    void* t = nullptr;
    require(cudaMalloc(&t, 777) == 0, "cudaMalloc on another thread");
    require(cudaFree(t) == 0, "cudaFree on another thread");
    on_other_thread = num(t);
  });
  other.join();
  expect(cuda_malloc, on_other_thread, 777, 0, 0, 0, "other"), ++nested;
  expect(cuda_free, on_other_thread, 0, 0, 0, 0, "other"), ++nested;

  void* huge = nullptr;
  require(cudaMalloc(&huge, 2ull << 40) == 2, "a 2 TiB cudaMalloc failing with out of memory");
  expect(cuda_malloc, 0, 2ull << 40, 0, 2, 0, "main"), ++nested;
  require(cudaFree(a) == 0 && cudaFree(c) == 0 && cudaFreeHost(h) == 0, "frees");
  expect(cuda_free, num(a), 0, 0, 0, 0, "main"), ++nested;
  expect(cuda_free, num(c), 0, 0, 0, 0, "main"), ++nested;
  expect(cuda_free_host, num(h), 0, 0, 0, 0, "main"), ++nested;

  // The driver, linked.
  unsigned long long d = 0;
  require(cuMemAlloc_v2(&d, 3000) == 0 && cuMemFree_v2(d) == 0, "cuMemAlloc_v2/cuMemFree_v2");
  expect(cu_mem_alloc, d, 3000, 0, 0, 0, "main");
  expect(cu_mem_free, d, 0, 0, 0, 0, "main");

  // Virtual memory, as PyTorch's expandable segments use it.
  unsigned long long va = 0, handle = 0;
  require(cuMemAddressReserve(&va, 4 << 20, 0, 0, 0) == 0, "cuMemAddressReserve");
  expect(cu_mem_address_reserve, va, 4 << 20, 0, 0, 0, "main");
  require(cuMemCreate(&handle, 2 << 20, nullptr, 0) == 0, "cuMemCreate");
  expect(cu_mem_create, handle, 2 << 20, 0, 0, 0, "main");
  require(cuMemMap(va, 2 << 20, 0, handle, 0) == 0, "cuMemMap");
  expect(cu_mem_map, va, 2 << 20, 0, 0, 0, "main");
  require(cuMemUnmap(va, 2 << 20) == 0, "cuMemUnmap");
  expect(cu_mem_unmap, va, 2 << 20, 0, 0, 0, "main");
  require(cuMemRelease(handle) == 0, "cuMemRelease");
  expect(cu_mem_release, handle, 0, 0, 0, 0, "main");
  require(cuMemAddressFree(va, 4 << 20) == 0, "cuMemAddressFree");
  expect(cu_mem_address_free, va, 4 << 20, 0, 0, 0, "main");

  // As a program with static cudart: dlopen the driver, dlsym cuGetProcAddress, ask it for the rest.
  void* lib = dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_LOCAL);
  require(lib != nullptr, "dlopen of the fake driver");
  auto get1 = reinterpret_cast<get_proc_v1>(dlsym(lib, "cuGetProcAddress"));
  require(get1 != nullptr, "dlsym cuGetProcAddress");
  mem_alloc_fn alloc = nullptr;
  mem_free_fn free_fn = nullptr;
  require(get1("cuMemAlloc", reinterpret_cast<void**>(&alloc), 12000, 0) == 0,
          "cuGetProcAddress(cuMemAlloc)");
  require(get1("cuMemFree", reinterpret_cast<void**>(&free_fn), 12000, 0) == 0,
          "cuGetProcAddress(cuMemFree)");
  unsigned long long e = 0;
  require(alloc(&e, 5000) == 0, "cuMemAlloc through cuGetProcAddress");
  expect(cu_mem_alloc, e, 5000, 0, 0, 1, "main");
  get_proc_v2 get2 = nullptr;
  require(get1("cuGetProcAddress", reinterpret_cast<void**>(&get2), 12000, 0) == 0,
          "cuGetProcAddress(cuGetProcAddress)");
  mem_alloc_async_fn alloc_async = nullptr;
  mem_free_async_fn free_async = nullptr;
  constexpr std::uint64_t ptds = 1u << 1;
  require(
      get2("cuMemAllocAsync", reinterpret_cast<void**>(&alloc_async), 12000, ptds, nullptr) == 0,
      "v2(cuMemAllocAsync)");
  require(get2("cuMemFreeAsync", reinterpret_cast<void**>(&free_async), 12000, ptds, nullptr) == 0,
          "v2(cuMemFreeAsync)");
  unsigned long long f = 0;
  require(alloc_async(&f, 6000, stream_of(0x30)) == 0 && free_async(f, stream_of(0x30)) == 0,
          "async pair through v2");
  expect(cu_mem_alloc_async, f, 6000, 0x30, 0, 1, "main");
  expect(cu_mem_free_async, f, 0, 0x30, 0, 1, "main");
  require(free_fn(e) == 0, "cuMemFree through cuGetProcAddress");
  expect(cu_mem_free, e, 0, 0, 0, 1, "main");
  auto alloc_sym = reinterpret_cast<mem_alloc_fn>(dlsym(lib, "cuMemAlloc_v2"));
  auto free_sym = reinterpret_cast<mem_free_fn>(dlsym(lib, "cuMemFree_v2"));
  unsigned long long g = 0;
  require(alloc_sym(&g, 7000) == 0 && free_sym(g) == 0, "cuMemAlloc_v2 through dlsym");
  expect(cu_mem_alloc, g, 7000, 0, 0, 1, "main");
  expect(cu_mem_free, g, 0, 0, 0, 1, "main");

  // A forked child's calls are its own process's: not in this log.
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    void* x = nullptr;
    int ok = cudaMalloc(&x, 999) == 0 && cudaFree(x) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  require(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child's cudaMalloc");

  std::printf("nested %d\n", nested);
  return 0;
}

int loop(long interval_us) {
  std::printf("started\n");
  std::fflush(stdout);
  std::deque<void*> live;
  const timespec pause{interval_us / 1000000, (interval_us % 1000000) * 1000};
  for (unsigned long i = 1;; ++i) {
    void* p = nullptr;
    if (cudaMalloc(&p, 4096 + (i % 64) * 256) != 0) return 4;
    live.push_back(p);
    if (live.size() > 32) {
      cudaFree(live.front());
      live.pop_front();
    }
    if (i % 100 == 0) {
      std::printf("ops %lu\n", i);
      std::fflush(stdout);
    }
    if (interval_us > 0) nanosleep(&pause, nullptr);
  }
}

int measure(long pairs) {
  void* p = nullptr;
  for (int i = 0; i < 1000; ++i) cudaMalloc(&p, 256), cudaFree(p);  // warm: first-call setup
  timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long i = 0; i < pairs; ++i) {
    cudaMalloc(&p, 256);
    cudaFree(p);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
  std::printf("pair_ns %.2f\n", ns / static_cast<double>(pairs));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "script") return script();
  if (mode == "loop") return loop(argc > 2 ? std::atol(argv[2]) : 200);
  if (mode == "measure") return measure(argc > 2 ? std::atol(argv[2]) : 1000000);
  std::fprintf(stderr, "usage: fake_program script | loop [US] | measure [N]\n");
  return 2;
}
