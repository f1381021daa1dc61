// libvramscope_intercept.so: preloaded into any CUDA program (LD_PRELOAD), it records every device,
// managed and pinned-host allocation and free, and the virtual-memory calls (cuMemCreate, cuMemMap,
// cuMemUnmap, cuMemRelease), with thread, stream, time and host latency, into the fixed-size
// records of intercept_log.h. No CUDA header: the few types are declared here, and the real
// functions are found at run time, so the library loads into any program and costs nothing where
// VRAMSCOPE_INTERCEPT_LOG is unset.
//
// How calls reach it:
//  - the runtime (cudaMalloc...) and driver (cuMemAlloc_v2...) symbols are defined here, so a
//    program or library linked against a shared libcudart / libcuda calls these first;
//  - a program built with static cudart (nvcc's default) has the runtime inside itself and reaches
//    the driver through dlopen("libcuda.so.1") + dlsym("cuGetProcAddress..."), then asks
//    cuGetProcAddress for every entry point. dlsym and both cuGetProcAddress versions are therefore
//    defined here too, and hand out wrappers for the memory functions.
// A driver call made by a recorded runtime call (cudaMalloc calling cuMemAlloc) is not recorded a
// second time: a thread-local depth says the runtime is already being recorded.
//
// The hot path claims a slot of a lock-free ring (one fetch_add), writes 64 bytes and publishes
// them; a writer thread drains the ring to the file every VRAMSCOPE_INTERCEPT_FLUSH_MS (50 ms), so a
// program killed at any moment loses at most that much. A full ring makes callers drain it
// themselves. Only the first process that makes a CUDA memory call records (it creates the log with
// O_EXCL); forked children and other processes under the same preload pass calls through.
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>

#include "intercept_log.h"

#define VS_EXPORT extern "C" __attribute__((visibility("default")))
#define VS_TLS __attribute__((tls_model("initial-exec")))
#define VS_LIKELY(x) __builtin_expect(!!(x), 1)
#define VS_UNLIKELY(x) __builtin_expect(!!(x), 0)

namespace {

// --- the CUDA types this library needs, by value only ----------------------------------------------
using cuda_error = int;  // cudaError_t; 0 success, 2 cudaErrorMemoryAllocation
using cu_result = int;   // CUresult; 0 success, 2 CUDA_ERROR_OUT_OF_MEMORY
using cu_deviceptr = unsigned long long;
using cu_handle = unsigned long long;  // CUmemGenericAllocationHandle
using stream_handle = void*;           // cudaStream_t, CUstream
using pool_handle = void*;             // cudaMemPool_t, CUmemoryPool
constexpr int cuda_error_initialization = 3;
constexpr cu_result cu_error_not_found = 500;

// --- time and thread -------------------------------------------------------------------------------
inline std::uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// The hot path reads the CPU's counter, not the clock: clock_gettime costs 20-60 ns (more in some
// VMs), four of them a pair. The writer converts ticks to CLOCK_MONOTONIC nanoseconds as it drains,
// with a rate measured since the log was opened (it sharpens as the run goes on).
inline std::uint64_t now_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return now_ns();
#endif
}

VS_TLS thread_local std::uint32_t tls_thread_id = 0;
// >0 while this thread is inside a recorded runtime call: its driver calls are the runtime's own.
VS_TLS thread_local int tls_runtime_depth = 0;

inline std::uint32_t thread_id() noexcept {
  if (VS_UNLIKELY(tls_thread_id == 0))
    tls_thread_id = static_cast<std::uint32_t>(syscall(SYS_gettid));
  return tls_thread_id;
}

// --- the real dlsym ----------------------------------------------------------------------------------
using dlsym_fn = void* (*)(void*, const char*);

dlsym_fn real_dlsym() noexcept {
  static std::atomic<dlsym_fn> cached{nullptr};
  dlsym_fn f = cached.load(std::memory_order_acquire);
  if (VS_LIKELY(f != nullptr)) return f;
  // dlsym moved from libdl to libc in glibc 2.34; the base versions differ by architecture.
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"}) {
    f = reinterpret_cast<dlsym_fn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (f != nullptr) break;
  }
  cached.store(f, std::memory_order_release);
  return f;
}

template <class Fn>
Fn next_symbol(std::atomic<Fn>& slot, const char* name) noexcept {
  Fn f = slot.load(std::memory_order_acquire);
  if (VS_LIKELY(f != nullptr)) return f;
  dlsym_fn lookup = real_dlsym();
  f = lookup ? reinterpret_cast<Fn>(lookup(RTLD_NEXT, name)) : nullptr;
  if (f != nullptr) slot.store(f, std::memory_order_release);
  return f;
}

// --- the log --------------------------------------------------------------------------------------------
constexpr std::size_t ring_slots = 1u << 16;  // 4 MiB of records in flight
constexpr std::size_t drain_batch = 1024;

struct ring_slot {
  // Vyukov's bounded queue: == position when free for it, position + 1 once written.
  std::atomic<std::uint64_t> ready;
  vramscope_intercept_record record;
};

enum : int { state_unset = 0, state_recording = 1, state_passive = 2 };

struct log_state {
  std::atomic<int> state{state_unset};
  int fd = -1;
  std::uint32_t stack_depth = 0;
  std::uint32_t flush_ms = 50;
  ring_slot* ring = nullptr;
  std::atomic<std::uint64_t> head{0};
  std::uint64_t tail = 0;  // under drain_lock
  pthread_mutex_t drain_lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
  std::atomic<std::uint64_t> nested_driver_calls{0};
  std::atomic<std::uint64_t> unwrapped_proc_addresses{0};
  std::atomic<bool> stop{false};
  std::uint64_t origin_ticks = 0;  // read together with origin_ns when the log was opened
  std::uint64_t origin_ns = 0;
};

log_state g;

void write_all(int fd, const void* data, std::size_t bytes) noexcept {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // the disk is full or gone: the program itself must go on
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

// Writes every record published so far, in claim order. Returns whether it wrote any.
bool drain(bool wait_for_lock) noexcept {
  if (wait_for_lock) {
    pthread_mutex_lock(&g.drain_lock);
  } else if (pthread_mutex_trylock(&g.drain_lock) != 0) {
    return false;
  }
  vramscope_intercept_record batch[drain_batch];
  bool wrote = false;
  const std::uint64_t ticks_now = now_ticks(), ns_now = now_ns();
  const double ns_per_tick = ticks_now > g.origin_ticks && ns_now > g.origin_ns
                                 ? static_cast<double>(ns_now - g.origin_ns) /
                                       static_cast<double>(ticks_now - g.origin_ticks)
                                 : 1.0;
  for (;;) {
    std::size_t n = 0;
    while (n < drain_batch) {
      ring_slot& s = g.ring[g.tail & (ring_slots - 1)];
      if (s.ready.load(std::memory_order_acquire) != g.tail + 1) break;
      vramscope_intercept_record& r = batch[n++];
      r = s.record;
      s.ready.store(g.tail + ring_slots, std::memory_order_release);
      ++g.tail;
      // Ticks to nanoseconds (see now_ticks).
      const double since =
          static_cast<double>(static_cast<std::int64_t>(r.time_ns - g.origin_ticks)) * ns_per_tick;
      r.time_ns = g.origin_ns + static_cast<std::uint64_t>(since > 0 ? since : 0);
      const double took = static_cast<double>(r.duration_ns) * ns_per_tick;
      r.duration_ns = took >= 4294967295.0 ? 0xffffffffu : static_cast<std::uint32_t>(took);
    }
    if (n == 0) break;
    write_all(g.fd, batch, n * sizeof(vramscope_intercept_record));
    wrote = true;
  }
  pthread_mutex_unlock(&g.drain_lock);
  return wrote;
}

void* writer_thread(void*) {
  const timespec period{static_cast<time_t>(g.flush_ms / 1000),
                        static_cast<long>(g.flush_ms % 1000) * 1000000L};
  while (!g.stop.load(std::memory_order_acquire)) {
    timespec left = period;
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
    drain(true);
  }
  return nullptr;
}

void emit_note() noexcept;

void finish() noexcept {
  if (g.state.load(std::memory_order_acquire) != state_recording) return;
  // atexit and the library's destructor both call this; the first one writes the note.
  static std::atomic<bool> finished{false};
  if (finished.exchange(true)) {
    drain(true);
    return;
  }
  emit_note();
  g.stop.store(true, std::memory_order_release);
  drain(true);
}

void at_fork_child() noexcept {
  // The child has a copy of the ring but no writer thread, and shares the parent's file offset:
  // it passes calls through rather than interleave records with the parent's.
  if (g.state.load(std::memory_order_relaxed) == state_recording) g.state.store(state_passive);
  pthread_mutex_init(&g.drain_lock, nullptr);
  pthread_mutex_init(&g.init_lock, nullptr);
}

std::uint32_t env_number(const char* name, std::uint32_t fallback, std::uint32_t max) noexcept {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long n = strtoul(v, &end, 10);
  if (end == v) return fallback;
  return n > max ? max : static_cast<std::uint32_t>(n);
}

__attribute__((noinline)) void initialize() noexcept {
  pthread_mutex_lock(&g.init_lock);
  if (g.state.load(std::memory_order_relaxed) != state_unset) {
    pthread_mutex_unlock(&g.init_lock);
    return;
  }
  int next = state_passive;
  const char* path = getenv(VRAMSCOPE_INTERCEPT_ENV_LOG);
  if (path != nullptr && *path != '\0') {
    // O_EXCL: the first process to use CUDA under this preload records; any other passes through.
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    void* ring = fd >= 0 ? calloc(ring_slots, sizeof(ring_slot)) : nullptr;
    if (ring != nullptr) {
      g.fd = fd;
      g.ring = static_cast<ring_slot*>(ring);
      for (std::size_t i = 0; i < ring_slots; ++i)
        g.ring[i].ready.store(i, std::memory_order_relaxed);
      g.stack_depth = env_number(VRAMSCOPE_INTERCEPT_ENV_STACK, 0, 32);
      g.flush_ms = env_number(VRAMSCOPE_INTERCEPT_ENV_FLUSH_MS, 50, 100);
      if (g.flush_ms == 0) g.flush_ms = 1;
      vramscope_intercept_header h;
      std::memset(&h, 0, sizeof h);
      std::memcpy(h.magic, VRAMSCOPE_INTERCEPT_MAGIC, 8);
      h.version = VRAMSCOPE_INTERCEPT_VERSION;
      h.record_size = sizeof(vramscope_intercept_record);
      h.pid = static_cast<std::uint64_t>(getpid());
      g.origin_ticks = now_ticks();
      g.origin_ns = now_ns();
      h.start_monotonic_ns = g.origin_ns;
      timespec real;
      clock_gettime(CLOCK_REALTIME, &real);
      h.start_realtime_ns = static_cast<std::uint64_t>(real.tv_sec) * 1000000000ull + real.tv_nsec;
      h.stack_depth = g.stack_depth;
      write_all(fd, &h, sizeof h);
      pthread_atfork(nullptr, nullptr, at_fork_child);
      atexit(finish);
      pthread_t writer;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      if (pthread_create(&writer, &attr, writer_thread, nullptr) == 0) next = state_recording;
      pthread_attr_destroy(&attr);
      if (next != state_recording) {
        free(ring);
        g.ring = nullptr;
      }
    } else if (fd >= 0) {
      close(fd);
    }
  }
  g.state.store(next, std::memory_order_release);
  pthread_mutex_unlock(&g.init_lock);
}

inline bool recording() noexcept {
  int s = g.state.load(std::memory_order_acquire);
  if (VS_UNLIKELY(s == state_unset)) {
    initialize();
    s = g.state.load(std::memory_order_acquire);
  }
  return s == state_recording;
}

// Claims the next slot, waiting (and draining) while the ring is full.
inline ring_slot& claim(std::uint64_t& position) noexcept {
  position = g.head.fetch_add(1, std::memory_order_relaxed);
  ring_slot& s = g.ring[position & (ring_slots - 1)];
  while (VS_UNLIKELY(s.ready.load(std::memory_order_acquire) != position)) {
    if (!drain(false)) sched_yield();
  }
  return s;
}

__attribute__((noinline)) void emit_frames(std::uint64_t owner) noexcept {
  void* frames[34];
  // Two frames are this function's and the hook's own.
  int n = backtrace(frames, static_cast<int>(g.stack_depth) + 2);
  for (int i = 2; i < n; ++i) {
    std::uint64_t position;
    ring_slot& s = claim(position);
    vramscope_intercept_record& r = s.record;
    std::memset(&r, 0, sizeof r);
    r.time_ns = now_ticks();
    r.duration_ns = 0;
    r.address = reinterpret_cast<std::uint64_t>(frames[i]);
    r.size = static_cast<std::uint64_t>(i - 2);
    r.aux = owner;
    r.sequence = position;
    r.thread = thread_id();
    r.op = VRAMSCOPE_OP_FRAME;
    s.ready.store(position + 1, std::memory_order_release);
  }
}

inline void emit(std::uint16_t op, std::uint16_t flags, std::uint64_t start, std::uint64_t end,
                 int status, std::uint64_t address, std::uint64_t size, std::uint64_t stream,
                 std::uint64_t aux) noexcept {
  std::uint64_t position;
  ring_slot& s = claim(position);
  vramscope_intercept_record& r = s.record;
  r.time_ns = start;
  r.address = address;
  r.size = size;
  r.stream = stream;
  r.aux = aux;
  r.sequence = position;
  r.thread = thread_id();
  r.status = status;
  // In ticks until the writer converts it.
  const std::uint64_t d = end - start;
  r.duration_ns = d > 0xffffffffull ? 0xffffffffu : static_cast<std::uint32_t>(d);
  r.op = op;
  r.flags = flags;
  s.ready.store(position + 1, std::memory_order_release);
  if (VS_UNLIKELY(g.stack_depth != 0) && op != VRAMSCOPE_OP_NOTE) emit_frames(position);
}

void emit_note() noexcept {
  const std::uint64_t t = now_ticks();
  emit(VRAMSCOPE_OP_NOTE, 0, t, t, 0, 0, g.nested_driver_calls.load(), 0,
       g.unwrapped_proc_addresses.load());
}

inline std::uint64_t as_number(const void* p) noexcept {
  return reinterpret_cast<std::uint64_t>(p);
}

// A recorded runtime call: its own driver calls are not recorded again.
struct runtime_scope {
  runtime_scope() noexcept { ++tls_runtime_depth; }
  ~runtime_scope() { --tls_runtime_depth; }
};

// Whether a driver call should be recorded: recording, and not made by a recorded runtime call.
inline bool record_driver() noexcept {
  if (!recording()) return false;
  if (VS_UNLIKELY(tls_runtime_depth > 0)) {
    // A plain increment, not a locked one (20 ns in some VMs): exact unless threads race on it.
    g.nested_driver_calls.store(g.nested_driver_calls.load(std::memory_order_relaxed) + 1,
                                std::memory_order_relaxed);
    return false;
  }
  return true;
}

// --- driver functions: one real per way it was reached ----------------------------------------------
// The exported symbol calls `linked` (the next definition, libcuda's). cuGetProcAddress and dlsym
// may hand out other real functions for the same name (per-thread-default-stream variants, internal
// entry points): each distinct one gets a slot, and the slot's wrapper calls it.
constexpr int proc_slots = 4;

template <class Fn>
struct driver_fn {
  std::atomic<Fn> linked{nullptr};
  std::atomic<Fn> slots[proc_slots]{};
};

using cu_mem_alloc_fn = cu_result (*)(cu_deviceptr*, std::size_t);
using cu_mem_free_fn = cu_result (*)(cu_deviceptr);
using cu_mem_alloc_async_fn = cu_result (*)(cu_deviceptr*, std::size_t, stream_handle);
using cu_mem_free_async_fn = cu_result (*)(cu_deviceptr, stream_handle);
using cu_mem_alloc_pool_fn = cu_result (*)(cu_deviceptr*, std::size_t, pool_handle, stream_handle);
using cu_mem_alloc_managed_fn = cu_result (*)(cu_deviceptr*, std::size_t, unsigned);
using cu_mem_alloc_host_fn = cu_result (*)(void**, std::size_t);
using cu_mem_host_alloc_fn = cu_result (*)(void**, std::size_t, unsigned);
using cu_mem_free_host_fn = cu_result (*)(void*);
using cu_mem_create_fn = cu_result (*)(cu_handle*, std::size_t, const void*, unsigned long long);
using cu_mem_release_fn = cu_result (*)(cu_handle);
using cu_mem_map_fn = cu_result (*)(cu_deviceptr, std::size_t, std::size_t, cu_handle,
                                    unsigned long long);
using cu_mem_unmap_fn = cu_result (*)(cu_deviceptr, std::size_t);
using cu_mem_address_reserve_fn = cu_result (*)(cu_deviceptr*, std::size_t, std::size_t,
                                                cu_deviceptr, unsigned long long);
using cu_mem_address_free_fn = cu_result (*)(cu_deviceptr, std::size_t);
using cu_get_proc_address_v1_fn = cu_result (*)(const char*, void**, int, std::uint64_t);
using cu_get_proc_address_v2_fn = cu_result (*)(const char*, void**, int, std::uint64_t, void*);

driver_fn<cu_mem_alloc_fn> d_mem_alloc;
driver_fn<cu_mem_free_fn> d_mem_free;
driver_fn<cu_mem_alloc_async_fn> d_mem_alloc_async;
driver_fn<cu_mem_free_async_fn> d_mem_free_async;
driver_fn<cu_mem_alloc_pool_fn> d_mem_alloc_pool;
driver_fn<cu_mem_alloc_managed_fn> d_mem_alloc_managed;
driver_fn<cu_mem_alloc_host_fn> d_mem_alloc_host;
driver_fn<cu_mem_host_alloc_fn> d_mem_host_alloc;
driver_fn<cu_mem_free_host_fn> d_mem_free_host;
driver_fn<cu_mem_create_fn> d_mem_create;
driver_fn<cu_mem_release_fn> d_mem_release;
driver_fn<cu_mem_map_fn> d_mem_map;
driver_fn<cu_mem_unmap_fn> d_mem_unmap;
driver_fn<cu_mem_address_reserve_fn> d_mem_address_reserve;
driver_fn<cu_mem_address_free_fn> d_mem_address_free;
driver_fn<cu_get_proc_address_v1_fn> d_get_proc_v1;
driver_fn<cu_get_proc_address_v2_fn> d_get_proc_v2;

// The recording bodies, shared by the exported symbol and every slot's wrapper.
#define VS_TIMED(call)                  \
  if (!record_driver()) return (call);  \
  const std::uint64_t t0 = now_ticks(); \
  const cu_result r = (call);           \
  const std::uint64_t t1 = now_ticks();

cu_result rec_mem_alloc(cu_mem_alloc_fn real, std::uint16_t how, cu_deviceptr* p, std::size_t n) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n))
  emit(VRAMSCOPE_OP_CU_MEM_ALLOC, how, t0, t1, r, r == 0 && p ? *p : 0, n, 0, 0);
  return r;
}
cu_result rec_mem_free(cu_mem_free_fn real, std::uint16_t how, cu_deviceptr p) {
  if (real == nullptr) return cu_error_not_found;
  if (p == 0) return real(p);
  VS_TIMED(real(p))
  emit(VRAMSCOPE_OP_CU_MEM_FREE, how, t0, t1, r, p, 0, 0, 0);
  return r;
}
cu_result rec_mem_alloc_async(cu_mem_alloc_async_fn real, std::uint16_t how, cu_deviceptr* p,
                              std::size_t n, stream_handle s) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n, s))
  emit(VRAMSCOPE_OP_CU_MEM_ALLOC_ASYNC, how, t0, t1, r, r == 0 && p ? *p : 0, n, as_number(s), 0);
  return r;
}
cu_result rec_mem_free_async(cu_mem_free_async_fn real, std::uint16_t how, cu_deviceptr p,
                             stream_handle s) {
  if (real == nullptr) return cu_error_not_found;
  if (p == 0) return real(p, s);
  VS_TIMED(real(p, s))
  emit(VRAMSCOPE_OP_CU_MEM_FREE_ASYNC, how, t0, t1, r, p, 0, as_number(s), 0);
  return r;
}
cu_result rec_mem_alloc_pool(cu_mem_alloc_pool_fn real, std::uint16_t how, cu_deviceptr* p,
                             std::size_t n, pool_handle pool, stream_handle s) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n, pool, s))
  emit(VRAMSCOPE_OP_CU_MEM_ALLOC_FROM_POOL_ASYNC, how, t0, t1, r, r == 0 && p ? *p : 0, n,
       as_number(s), as_number(pool));
  return r;
}
cu_result rec_mem_alloc_managed(cu_mem_alloc_managed_fn real, std::uint16_t how, cu_deviceptr* p,
                                std::size_t n, unsigned flags) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n, flags))
  emit(VRAMSCOPE_OP_CU_MEM_ALLOC_MANAGED, how, t0, t1, r, r == 0 && p ? *p : 0, n, 0, flags);
  return r;
}
cu_result rec_mem_alloc_host(cu_mem_alloc_host_fn real, std::uint16_t how, void** p,
                             std::size_t n) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n))
  emit(VRAMSCOPE_OP_CU_MEM_ALLOC_HOST, how, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n, 0, 0);
  return r;
}
cu_result rec_mem_host_alloc(cu_mem_host_alloc_fn real, std::uint16_t how, void** p, std::size_t n,
                             unsigned flags) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n, flags))
  emit(VRAMSCOPE_OP_CU_MEM_ALLOC_HOST, how, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n, 0,
       flags);
  return r;
}
cu_result rec_mem_free_host(cu_mem_free_host_fn real, std::uint16_t how, void* p) {
  if (real == nullptr) return cu_error_not_found;
  if (p == nullptr) return real(p);
  VS_TIMED(real(p))
  emit(VRAMSCOPE_OP_CU_MEM_FREE_HOST, how, t0, t1, r, as_number(p), 0, 0, 0);
  return r;
}
cu_result rec_mem_create(cu_mem_create_fn real, std::uint16_t how, cu_handle* h, std::size_t n,
                         const void* prop, unsigned long long flags) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(h, n, prop, flags))
  emit(VRAMSCOPE_OP_CU_MEM_CREATE, how, t0, t1, r, r == 0 && h ? *h : 0, n, 0, 0);
  return r;
}
cu_result rec_mem_release(cu_mem_release_fn real, std::uint16_t how, cu_handle h) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(h))
  emit(VRAMSCOPE_OP_CU_MEM_RELEASE, how, t0, t1, r, h, 0, 0, 0);
  return r;
}
cu_result rec_mem_map(cu_mem_map_fn real, std::uint16_t how, cu_deviceptr p, std::size_t n,
                      std::size_t offset, cu_handle h, unsigned long long flags) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n, offset, h, flags))
  emit(VRAMSCOPE_OP_CU_MEM_MAP, how, t0, t1, r, p, n, 0, h);
  return r;
}
cu_result rec_mem_unmap(cu_mem_unmap_fn real, std::uint16_t how, cu_deviceptr p, std::size_t n) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n))
  emit(VRAMSCOPE_OP_CU_MEM_UNMAP, how, t0, t1, r, p, n, 0, 0);
  return r;
}
cu_result rec_mem_address_reserve(cu_mem_address_reserve_fn real, std::uint16_t how,
                                  cu_deviceptr* p, std::size_t n, std::size_t alignment,
                                  cu_deviceptr addr, unsigned long long flags) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n, alignment, addr, flags))
  emit(VRAMSCOPE_OP_CU_MEM_ADDRESS_RESERVE, how, t0, t1, r, r == 0 && p ? *p : 0, n, 0, alignment);
  return r;
}
cu_result rec_mem_address_free(cu_mem_address_free_fn real, std::uint16_t how, cu_deviceptr p,
                               std::size_t n) {
  if (real == nullptr) return cu_error_not_found;
  VS_TIMED(real(p, n))
  emit(VRAMSCOPE_OP_CU_MEM_ADDRESS_FREE, how, t0, t1, r, p, n, 0, 0);
  return r;
}
#undef VS_TIMED

constexpr std::uint16_t via_proc = VRAMSCOPE_FLAG_FROM_PROC_ADDRESS;

// Slot wrappers: wrapper<S> calls the real function kept in slot S.
template <int S>
cu_result w_mem_alloc(cu_deviceptr* p, std::size_t n) {
  return rec_mem_alloc(d_mem_alloc.slots[S].load(std::memory_order_acquire), via_proc, p, n);
}
template <int S>
cu_result w_mem_free(cu_deviceptr p) {
  return rec_mem_free(d_mem_free.slots[S].load(std::memory_order_acquire), via_proc, p);
}
template <int S>
cu_result w_mem_alloc_async(cu_deviceptr* p, std::size_t n, stream_handle s) {
  return rec_mem_alloc_async(d_mem_alloc_async.slots[S].load(std::memory_order_acquire), via_proc,
                             p, n, s);
}
template <int S>
cu_result w_mem_free_async(cu_deviceptr p, stream_handle s) {
  return rec_mem_free_async(d_mem_free_async.slots[S].load(std::memory_order_acquire), via_proc, p,
                            s);
}
template <int S>
cu_result w_mem_alloc_pool(cu_deviceptr* p, std::size_t n, pool_handle pool, stream_handle s) {
  return rec_mem_alloc_pool(d_mem_alloc_pool.slots[S].load(std::memory_order_acquire), via_proc, p,
                            n, pool, s);
}
template <int S>
cu_result w_mem_alloc_managed(cu_deviceptr* p, std::size_t n, unsigned f) {
  return rec_mem_alloc_managed(d_mem_alloc_managed.slots[S].load(std::memory_order_acquire),
                               via_proc, p, n, f);
}
template <int S>
cu_result w_mem_alloc_host(void** p, std::size_t n) {
  return rec_mem_alloc_host(d_mem_alloc_host.slots[S].load(std::memory_order_acquire), via_proc, p,
                            n);
}
template <int S>
cu_result w_mem_host_alloc(void** p, std::size_t n, unsigned f) {
  return rec_mem_host_alloc(d_mem_host_alloc.slots[S].load(std::memory_order_acquire), via_proc, p,
                            n, f);
}
template <int S>
cu_result w_mem_free_host(void* p) {
  return rec_mem_free_host(d_mem_free_host.slots[S].load(std::memory_order_acquire), via_proc, p);
}
template <int S>
cu_result w_mem_create(cu_handle* h, std::size_t n, const void* prop, unsigned long long f) {
  return rec_mem_create(d_mem_create.slots[S].load(std::memory_order_acquire), via_proc, h, n, prop,
                        f);
}
template <int S>
cu_result w_mem_release(cu_handle h) {
  return rec_mem_release(d_mem_release.slots[S].load(std::memory_order_acquire), via_proc, h);
}
template <int S>
cu_result w_mem_map(cu_deviceptr p, std::size_t n, std::size_t o, cu_handle h,
                    unsigned long long f) {
  return rec_mem_map(d_mem_map.slots[S].load(std::memory_order_acquire), via_proc, p, n, o, h, f);
}
template <int S>
cu_result w_mem_unmap(cu_deviceptr p, std::size_t n) {
  return rec_mem_unmap(d_mem_unmap.slots[S].load(std::memory_order_acquire), via_proc, p, n);
}
template <int S>
cu_result w_mem_address_reserve(cu_deviceptr* p, std::size_t n, std::size_t a, cu_deviceptr at,
                                unsigned long long f) {
  return rec_mem_address_reserve(d_mem_address_reserve.slots[S].load(std::memory_order_acquire),
                                 via_proc, p, n, a, at, f);
}
template <int S>
cu_result w_mem_address_free(cu_deviceptr p, std::size_t n) {
  return rec_mem_address_free(d_mem_address_free.slots[S].load(std::memory_order_acquire), via_proc,
                              p, n);
}

// One row per function a caller may look up: the names it goes by, and how to wrap a real one.
struct wrappable {
  const char* proc_name;   // cuGetProcAddress's name
  const char* symbols[3];  // dlsym names (exported variants), nullptr-terminated
  int min_version;         // cuGetProcAddress versions below this give an older ABI: not wrapped
  void* (*wrap)(
      void* real);  // returns a wrapper calling `real`, or nullptr when the slots are full
};

template <class Fn, Fn (*Wrappers)[proc_slots]>
void* wrap_in_slot(driver_fn<Fn>& fn, void* real) noexcept {
  Fn r = reinterpret_cast<Fn>(real);
  for (int i = 0; i < proc_slots; ++i) {
    Fn current = fn.slots[i].load(std::memory_order_acquire);
    if (current == r) return reinterpret_cast<void*>((*Wrappers)[i]);
    if (current == nullptr) {
      Fn expected = nullptr;
      if (fn.slots[i].compare_exchange_strong(expected, r) || expected == r)
        return reinterpret_cast<void*>((*Wrappers)[i]);
    }
  }
  return nullptr;
}

#define VS_WRAPPER_TABLE(fn_type, table, wrapper, object)                       \
  fn_type table[proc_slots] = {wrapper<0>, wrapper<1>, wrapper<2>, wrapper<3>}; \
  void* wrap_##object(void* real) noexcept { return wrap_in_slot<fn_type, &table>(object, real); }

VS_WRAPPER_TABLE(cu_mem_alloc_fn, t_mem_alloc, w_mem_alloc, d_mem_alloc)
VS_WRAPPER_TABLE(cu_mem_free_fn, t_mem_free, w_mem_free, d_mem_free)
VS_WRAPPER_TABLE(cu_mem_alloc_async_fn, t_mem_alloc_async, w_mem_alloc_async, d_mem_alloc_async)
VS_WRAPPER_TABLE(cu_mem_free_async_fn, t_mem_free_async, w_mem_free_async, d_mem_free_async)
VS_WRAPPER_TABLE(cu_mem_alloc_pool_fn, t_mem_alloc_pool, w_mem_alloc_pool, d_mem_alloc_pool)
VS_WRAPPER_TABLE(cu_mem_alloc_managed_fn, t_mem_alloc_managed, w_mem_alloc_managed,
                 d_mem_alloc_managed)
VS_WRAPPER_TABLE(cu_mem_alloc_host_fn, t_mem_alloc_host, w_mem_alloc_host, d_mem_alloc_host)
VS_WRAPPER_TABLE(cu_mem_host_alloc_fn, t_mem_host_alloc, w_mem_host_alloc, d_mem_host_alloc)
VS_WRAPPER_TABLE(cu_mem_free_host_fn, t_mem_free_host, w_mem_free_host, d_mem_free_host)
VS_WRAPPER_TABLE(cu_mem_create_fn, t_mem_create, w_mem_create, d_mem_create)
VS_WRAPPER_TABLE(cu_mem_release_fn, t_mem_release, w_mem_release, d_mem_release)
VS_WRAPPER_TABLE(cu_mem_map_fn, t_mem_map, w_mem_map, d_mem_map)
VS_WRAPPER_TABLE(cu_mem_unmap_fn, t_mem_unmap, w_mem_unmap, d_mem_unmap)
VS_WRAPPER_TABLE(cu_mem_address_reserve_fn, t_mem_address_reserve, w_mem_address_reserve,
                 d_mem_address_reserve)
VS_WRAPPER_TABLE(cu_mem_address_free_fn, t_mem_address_free, w_mem_address_free, d_mem_address_free)

// cuGetProcAddress itself: what it returns for the memory functions (and for itself) is wrapped.
cu_result proc_v1(cu_get_proc_address_v1_fn real, const char* symbol, void** pfn, int version,
                  std::uint64_t flags);
cu_result proc_v2(cu_get_proc_address_v2_fn real, const char* symbol, void** pfn, int version,
                  std::uint64_t flags, void* status);
template <int S>
cu_result w_get_proc_v1(const char* symbol, void** pfn, int version, std::uint64_t flags) {
  return proc_v1(d_get_proc_v1.slots[S].load(std::memory_order_acquire), symbol, pfn, version,
                 flags);
}
template <int S>
cu_result w_get_proc_v2(const char* symbol, void** pfn, int version, std::uint64_t flags,
                        void* status) {
  return proc_v2(d_get_proc_v2.slots[S].load(std::memory_order_acquire), symbol, pfn, version,
                 flags, status);
}
VS_WRAPPER_TABLE(cu_get_proc_address_v1_fn, t_get_proc_v1, w_get_proc_v1, d_get_proc_v1)
VS_WRAPPER_TABLE(cu_get_proc_address_v2_fn, t_get_proc_v2, w_get_proc_v2, d_get_proc_v2)
#undef VS_WRAPPER_TABLE

// cuMemAlloc, cuMemFree and cuMemAllocHost took 32-bit sizes before CUDA 3.2 (3020): asked for an
// older version, cuGetProcAddress returns those, which are not wrapped.
const wrappable wrappables[] = {
    {"cuMemAlloc", {"cuMemAlloc_v2", nullptr, nullptr}, 3020, wrap_d_mem_alloc},
    {"cuMemFree", {"cuMemFree_v2", nullptr, nullptr}, 3020, wrap_d_mem_free},
    {"cuMemAllocAsync",
     {"cuMemAllocAsync", "cuMemAllocAsync_ptsz", nullptr},
     0,
     wrap_d_mem_alloc_async},
    {"cuMemFreeAsync",
     {"cuMemFreeAsync", "cuMemFreeAsync_ptsz", nullptr},
     0,
     wrap_d_mem_free_async},
    {"cuMemAllocFromPoolAsync",
     {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", nullptr},
     0,
     wrap_d_mem_alloc_pool},
    {"cuMemAllocManaged", {"cuMemAllocManaged", nullptr, nullptr}, 0, wrap_d_mem_alloc_managed},
    {"cuMemAllocHost", {"cuMemAllocHost_v2", nullptr, nullptr}, 3020, wrap_d_mem_alloc_host},
    {"cuMemHostAlloc", {"cuMemHostAlloc", nullptr, nullptr}, 0, wrap_d_mem_host_alloc},
    {"cuMemFreeHost", {"cuMemFreeHost", nullptr, nullptr}, 0, wrap_d_mem_free_host},
    {"cuMemCreate", {"cuMemCreate", nullptr, nullptr}, 0, wrap_d_mem_create},
    {"cuMemRelease", {"cuMemRelease", nullptr, nullptr}, 0, wrap_d_mem_release},
    {"cuMemMap", {"cuMemMap", nullptr, nullptr}, 0, wrap_d_mem_map},
    {"cuMemUnmap", {"cuMemUnmap", nullptr, nullptr}, 0, wrap_d_mem_unmap},
    {"cuMemAddressReserve",
     {"cuMemAddressReserve", nullptr, nullptr},
     0,
     wrap_d_mem_address_reserve},
    {"cuMemAddressFree", {"cuMemAddressFree", nullptr, nullptr}, 0, wrap_d_mem_address_free},
};

bool is_own_function(void* p) noexcept {
  static std::atomic<void*> own_base{nullptr};
  void* base = own_base.load(std::memory_order_acquire);
  if (base == nullptr) {
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&is_own_function), &self) == 0) return false;
    base = self.dli_fbase;
    own_base.store(base, std::memory_order_release);
  }
  Dl_info info;
  return dladdr(p, &info) != 0 && info.dli_fbase == base;
}

// What cuGetProcAddress hands back for `name`: a wrapper when it is a memory function.
void* wrap_proc_result(const char* name, void* real, int version) noexcept;

}  // namespace

// ==== exported: the runtime ============================================================================
namespace {
using cuda_malloc_fn = cuda_error (*)(void**, std::size_t);
using cuda_free_fn = cuda_error (*)(void*);
using cuda_malloc_async_fn = cuda_error (*)(void**, std::size_t, stream_handle);
using cuda_free_async_fn = cuda_error (*)(void*, stream_handle);
using cuda_malloc_pool_fn = cuda_error (*)(void**, std::size_t, pool_handle, stream_handle);
using cuda_malloc_managed_fn = cuda_error (*)(void**, std::size_t, unsigned);
using cuda_host_alloc_fn = cuda_error (*)(void**, std::size_t, unsigned);

std::atomic<cuda_malloc_fn> r_cuda_malloc{nullptr};
std::atomic<cuda_free_fn> r_cuda_free{nullptr};
std::atomic<cuda_malloc_async_fn> r_cuda_malloc_async{nullptr}, r_cuda_malloc_async_ptsz{nullptr};
std::atomic<cuda_free_async_fn> r_cuda_free_async{nullptr}, r_cuda_free_async_ptsz{nullptr};
std::atomic<cuda_malloc_pool_fn> r_cuda_malloc_pool{nullptr}, r_cuda_malloc_pool_ptsz{nullptr};
std::atomic<cuda_malloc_managed_fn> r_cuda_malloc_managed{nullptr};
std::atomic<cuda_malloc_fn> r_cuda_malloc_host{nullptr};
std::atomic<cuda_host_alloc_fn> r_cuda_host_alloc{nullptr};
std::atomic<cuda_free_fn> r_cuda_free_host{nullptr};

#define VS_RUNTIME(real, call)                           \
  if (real == nullptr) return cuda_error_initialization; \
  if (!recording()) return (call);                       \
  runtime_scope scope;                                   \
  const std::uint64_t t0 = now_ticks();                  \
  const cuda_error r = (call);                           \
  const std::uint64_t t1 = now_ticks();

cuda_error runtime_malloc_async(cuda_malloc_async_fn real, void** p, std::size_t n,
                                stream_handle s) {
  VS_RUNTIME(real, real(p, n, s))
  emit(VRAMSCOPE_OP_CUDA_MALLOC_ASYNC, 0, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n,
       as_number(s), 0);
  return r;
}
cuda_error runtime_free_async(cuda_free_async_fn real, void* p, stream_handle s) {
  if (p == nullptr && real != nullptr) return real(p, s);
  VS_RUNTIME(real, real(p, s))
  emit(VRAMSCOPE_OP_CUDA_FREE_ASYNC, 0, t0, t1, r, as_number(p), 0, as_number(s), 0);
  return r;
}
cuda_error runtime_malloc_pool(cuda_malloc_pool_fn real, void** p, std::size_t n, pool_handle pool,
                               stream_handle s) {
  VS_RUNTIME(real, real(p, n, pool, s))
  emit(VRAMSCOPE_OP_CUDA_MALLOC_FROM_POOL_ASYNC, 0, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n,
       as_number(s), as_number(pool));
  return r;
}
}  // namespace

VS_EXPORT cuda_error cudaMalloc(void** p, std::size_t n) {
  cuda_malloc_fn real = next_symbol(r_cuda_malloc, "cudaMalloc");
  VS_RUNTIME(real, real(p, n))
  emit(VRAMSCOPE_OP_CUDA_MALLOC, 0, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n, 0, 0);
  return r;
}
VS_EXPORT cuda_error cudaFree(void* p) {
  cuda_free_fn real = next_symbol(r_cuda_free, "cudaFree");
  // cudaFree(0) is the customary way to create the context: no free to record.
  if (p == nullptr && real != nullptr) return real(p);
  VS_RUNTIME(real, real(p))
  emit(VRAMSCOPE_OP_CUDA_FREE, 0, t0, t1, r, as_number(p), 0, 0, 0);
  return r;
}
VS_EXPORT cuda_error cudaMallocAsync(void** p, std::size_t n, stream_handle s) {
  return runtime_malloc_async(next_symbol(r_cuda_malloc_async, "cudaMallocAsync"), p, n, s);
}
VS_EXPORT cuda_error cudaMallocAsync_ptsz(void** p, std::size_t n, stream_handle s) {
  return runtime_malloc_async(next_symbol(r_cuda_malloc_async_ptsz, "cudaMallocAsync_ptsz"), p, n,
                              s);
}
VS_EXPORT cuda_error cudaFreeAsync(void* p, stream_handle s) {
  return runtime_free_async(next_symbol(r_cuda_free_async, "cudaFreeAsync"), p, s);
}
VS_EXPORT cuda_error cudaFreeAsync_ptsz(void* p, stream_handle s) {
  return runtime_free_async(next_symbol(r_cuda_free_async_ptsz, "cudaFreeAsync_ptsz"), p, s);
}
VS_EXPORT cuda_error cudaMallocFromPoolAsync(void** p, std::size_t n, pool_handle pool,
                                             stream_handle s) {
  return runtime_malloc_pool(next_symbol(r_cuda_malloc_pool, "cudaMallocFromPoolAsync"), p, n, pool,
                             s);
}
VS_EXPORT cuda_error cudaMallocFromPoolAsync_ptsz(void** p, std::size_t n, pool_handle pool,
                                                  stream_handle s) {
  return runtime_malloc_pool(next_symbol(r_cuda_malloc_pool_ptsz, "cudaMallocFromPoolAsync_ptsz"),
                             p, n, pool, s);
}
VS_EXPORT cuda_error cudaMallocManaged(void** p, std::size_t n, unsigned flags) {
  cuda_malloc_managed_fn real = next_symbol(r_cuda_malloc_managed, "cudaMallocManaged");
  VS_RUNTIME(real, real(p, n, flags))
  emit(VRAMSCOPE_OP_CUDA_MALLOC_MANAGED, 0, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n, 0,
       flags);
  return r;
}
VS_EXPORT cuda_error cudaMallocHost(void** p, std::size_t n) {
  cuda_malloc_fn real = next_symbol(r_cuda_malloc_host, "cudaMallocHost");
  VS_RUNTIME(real, real(p, n))
  emit(VRAMSCOPE_OP_CUDA_MALLOC_HOST, 0, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n, 0, 0);
  return r;
}
VS_EXPORT cuda_error cudaHostAlloc(void** p, std::size_t n, unsigned flags) {
  cuda_host_alloc_fn real = next_symbol(r_cuda_host_alloc, "cudaHostAlloc");
  VS_RUNTIME(real, real(p, n, flags))
  emit(VRAMSCOPE_OP_CUDA_MALLOC_HOST, 0, t0, t1, r, r == 0 && p ? as_number(*p) : 0, n, 0, flags);
  return r;
}
VS_EXPORT cuda_error cudaFreeHost(void* p) {
  cuda_free_fn real = next_symbol(r_cuda_free_host, "cudaFreeHost");
  if (p == nullptr && real != nullptr) return real(p);
  VS_RUNTIME(real, real(p))
  emit(VRAMSCOPE_OP_CUDA_FREE_HOST, 0, t0, t1, r, as_number(p), 0, 0, 0);
  return r;
}
#undef VS_RUNTIME

// ==== exported: the driver ===============================================================================
VS_EXPORT cu_result cuMemAlloc_v2(cu_deviceptr* p, std::size_t n) {
  return rec_mem_alloc(next_symbol(d_mem_alloc.linked, "cuMemAlloc_v2"), 0, p, n);
}
VS_EXPORT cu_result cuMemFree_v2(cu_deviceptr p) {
  return rec_mem_free(next_symbol(d_mem_free.linked, "cuMemFree_v2"), 0, p);
}
VS_EXPORT cu_result cuMemAllocAsync(cu_deviceptr* p, std::size_t n, stream_handle s) {
  return rec_mem_alloc_async(next_symbol(d_mem_alloc_async.linked, "cuMemAllocAsync"), 0, p, n, s);
}
VS_EXPORT cu_result cuMemFreeAsync(cu_deviceptr p, stream_handle s) {
  return rec_mem_free_async(next_symbol(d_mem_free_async.linked, "cuMemFreeAsync"), 0, p, s);
}
VS_EXPORT cu_result cuMemAllocFromPoolAsync(cu_deviceptr* p, std::size_t n, pool_handle pool,
                                            stream_handle s) {
  return rec_mem_alloc_pool(next_symbol(d_mem_alloc_pool.linked, "cuMemAllocFromPoolAsync"), 0, p,
                            n, pool, s);
}
VS_EXPORT cu_result cuMemAllocManaged(cu_deviceptr* p, std::size_t n, unsigned flags) {
  return rec_mem_alloc_managed(next_symbol(d_mem_alloc_managed.linked, "cuMemAllocManaged"), 0, p,
                               n, flags);
}
VS_EXPORT cu_result cuMemAllocHost_v2(void** p, std::size_t n) {
  return rec_mem_alloc_host(next_symbol(d_mem_alloc_host.linked, "cuMemAllocHost_v2"), 0, p, n);
}
VS_EXPORT cu_result cuMemHostAlloc(void** p, std::size_t n, unsigned flags) {
  return rec_mem_host_alloc(next_symbol(d_mem_host_alloc.linked, "cuMemHostAlloc"), 0, p, n, flags);
}
VS_EXPORT cu_result cuMemFreeHost(void* p) {
  return rec_mem_free_host(next_symbol(d_mem_free_host.linked, "cuMemFreeHost"), 0, p);
}
VS_EXPORT cu_result cuMemCreate(cu_handle* h, std::size_t n, const void* prop,
                                unsigned long long flags) {
  return rec_mem_create(next_symbol(d_mem_create.linked, "cuMemCreate"), 0, h, n, prop, flags);
}
VS_EXPORT cu_result cuMemRelease(cu_handle h) {
  return rec_mem_release(next_symbol(d_mem_release.linked, "cuMemRelease"), 0, h);
}
VS_EXPORT cu_result cuMemMap(cu_deviceptr p, std::size_t n, std::size_t offset, cu_handle h,
                             unsigned long long flags) {
  return rec_mem_map(next_symbol(d_mem_map.linked, "cuMemMap"), 0, p, n, offset, h, flags);
}
VS_EXPORT cu_result cuMemUnmap(cu_deviceptr p, std::size_t n) {
  return rec_mem_unmap(next_symbol(d_mem_unmap.linked, "cuMemUnmap"), 0, p, n);
}
VS_EXPORT cu_result cuMemAddressReserve(cu_deviceptr* p, std::size_t n, std::size_t alignment,
                                        cu_deviceptr addr, unsigned long long flags) {
  return rec_mem_address_reserve(next_symbol(d_mem_address_reserve.linked, "cuMemAddressReserve"),
                                 0, p, n, alignment, addr, flags);
}
VS_EXPORT cu_result cuMemAddressFree(cu_deviceptr p, std::size_t n) {
  return rec_mem_address_free(next_symbol(d_mem_address_free.linked, "cuMemAddressFree"), 0, p, n);
}

VS_EXPORT cu_result cuGetProcAddress(const char* symbol, void** pfn, int version,
                                     std::uint64_t flags) {
  return proc_v1(next_symbol(d_get_proc_v1.linked, "cuGetProcAddress"), symbol, pfn, version,
                 flags);
}
VS_EXPORT cu_result cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                        std::uint64_t flags, void* status) {
  return proc_v2(next_symbol(d_get_proc_v2.linked, "cuGetProcAddress_v2"), symbol, pfn, version,
                 flags, status);
}

namespace {

cu_result proc_v1(cu_get_proc_address_v1_fn real, const char* symbol, void** pfn, int version,
                  std::uint64_t flags) {
  if (real == nullptr) return cu_error_not_found;
  const cu_result r = real(symbol, pfn, version, flags);
  if (r == 0 && pfn != nullptr && *pfn != nullptr && symbol != nullptr)
    *pfn = wrap_proc_result(symbol, *pfn, version);
  return r;
}
cu_result proc_v2(cu_get_proc_address_v2_fn real, const char* symbol, void** pfn, int version,
                  std::uint64_t flags, void* status) {
  if (real == nullptr) return cu_error_not_found;
  const cu_result r = real(symbol, pfn, version, flags, status);
  if (r == 0 && pfn != nullptr && *pfn != nullptr && symbol != nullptr)
    *pfn = wrap_proc_result(symbol, *pfn, version);
  return r;
}

void* with_wrapper(void* wrapper, void* real) noexcept {
  if (wrapper != nullptr) return wrapper;
  g.unwrapped_proc_addresses.fetch_add(1, std::memory_order_relaxed);
  return real;
}

void* wrap_proc_result(const char* name, void* real, int version) noexcept {
  if (std::strncmp(name, "cu", 2) != 0 || is_own_function(real)) return real;
  // The driver's own cuGetProcAddress: the ABI it has follows the version asked for (v2 from 12.0).
  if (std::strcmp(name, "cuGetProcAddress") == 0)
    return with_wrapper(version >= 12000 ? wrap_d_get_proc_v2(real) : wrap_d_get_proc_v1(real),
                        real);
  for (const wrappable& w : wrappables) {
    if (std::strcmp(name, w.proc_name) != 0) continue;
    if (version < w.min_version) return real;
    return with_wrapper(w.wrap(real), real);
  }
  return real;
}

// What dlsym hands back for a driver symbol looked up in a library (libcuda.so.1, usually).
void* wrap_dlsym_result(const char* name, void* real) noexcept {
  if (is_own_function(real)) return real;
  if (std::strcmp(name, "cuGetProcAddress") == 0)
    return with_wrapper(wrap_d_get_proc_v1(real), real);
  if (std::strcmp(name, "cuGetProcAddress_v2") == 0)
    return with_wrapper(wrap_d_get_proc_v2(real), real);
  for (const wrappable& w : wrappables) {
    for (const char* symbol : w.symbols) {
      if (symbol == nullptr || std::strcmp(name, symbol) != 0) continue;
      return with_wrapper(w.wrap(real), real);
    }
  }
  return real;
}

}  // namespace

// dlsym itself: a static cudart finds the driver with dlopen + dlsym. Only the driver's memory
// functions and cuGetProcAddress are changed; everything else is the real dlsym's answer. (A lookup
// with RTLD_NEXT is resolved relative to this library, which comes first: the answer is the same
// for every caller except another preloaded interposer of these very names.)
VS_EXPORT void* dlsym(void* __restrict handle, const char* __restrict name) noexcept {
  dlsym_fn real = real_dlsym();
  if (real == nullptr) return nullptr;
  void* p = real(handle, name);
  if (p == nullptr || handle == RTLD_NEXT) return p;
  if (name[0] != 'c' || name[1] != 'u' ||
      (std::strncmp(name, "cuMem", 5) != 0 && std::strncmp(name, "cuGetProc", 9) != 0))
    return p;
  return wrap_dlsym_result(name, p);
}

__attribute__((destructor)) static void vramscope_intercept_fini() { finish(); }
