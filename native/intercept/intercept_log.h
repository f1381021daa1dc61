/* The log libvramscope_intercept.so appends to: a 64-byte header, then fixed-size 64-byte records,
 * little-endian, in the order their calls returned (sequence numbers say so). Fixed sizes let a
 * reader tail the file while the program runs and stop at the last whole record when it was
 * killed. Read by src-main/services/import/intercept-log.ts and native/tests/intercept/; described
 * in docs/trace-format.md (Recording). Plain C so that any tool can include it. */
#ifndef VRAMSCOPE_INTERCEPT_LOG_H
#define VRAMSCOPE_INTERCEPT_LOG_H

#include <stdint.h>

#define VRAMSCOPE_INTERCEPT_MAGIC "VRSCPLOG"
#define VRAMSCOPE_INTERCEPT_VERSION 1u

/* Environment the library reads. */
#define VRAMSCOPE_INTERCEPT_ENV_LOG "VRAMSCOPE_INTERCEPT_LOG" /* log path; unset: pass-through */
#define VRAMSCOPE_INTERCEPT_ENV_STACK \
  "VRAMSCOPE_INTERCEPT_STACK" /* frames per call (0-32), default 0 */
#define VRAMSCOPE_INTERCEPT_ENV_FLUSH_MS \
  "VRAMSCOPE_INTERCEPT_FLUSH_MS" /* writer period, default 50 */

typedef struct vramscope_intercept_header {
  char magic[8];        /* "VRSCPLOG" */
  uint32_t version;     /* VRAMSCOPE_INTERCEPT_VERSION */
  uint32_t record_size; /* 64 */
  uint64_t pid;
  uint64_t start_monotonic_ns; /* CLOCK_MONOTONIC when the log was opened: records' time base */
  uint64_t start_realtime_ns;  /* CLOCK_REALTIME at the same moment */
  uint32_t stack_depth;        /* frames captured per call (0: none) */
  uint32_t reserved0;
  uint64_t reserved1[2];
} vramscope_intercept_header;

/* What a record is. Runtime calls 1-15, driver calls 16-47, bookkeeping 64-. */
enum vramscope_intercept_op {
  VRAMSCOPE_OP_CUDA_MALLOC = 1,         /* address = result, size */
  VRAMSCOPE_OP_CUDA_FREE = 2,           /* address */
  VRAMSCOPE_OP_CUDA_MALLOC_ASYNC = 3,   /* address, size, stream */
  VRAMSCOPE_OP_CUDA_FREE_ASYNC = 4,     /* address, stream */
  VRAMSCOPE_OP_CUDA_MALLOC_MANAGED = 5, /* address, size, aux = flags */
  VRAMSCOPE_OP_CUDA_MALLOC_HOST =
      6,                           /* address, size, aux = flags (cudaMallocHost, cudaHostAlloc) */
  VRAMSCOPE_OP_CUDA_FREE_HOST = 7, /* address */
  VRAMSCOPE_OP_CUDA_MALLOC_FROM_POOL_ASYNC = 8, /* address, size, stream, aux = pool */

  VRAMSCOPE_OP_CU_MEM_ALLOC = 16,         /* cuMemAlloc_v2: address, size */
  VRAMSCOPE_OP_CU_MEM_FREE = 17,          /* cuMemFree_v2: address */
  VRAMSCOPE_OP_CU_MEM_ALLOC_ASYNC = 18,   /* address, size, stream */
  VRAMSCOPE_OP_CU_MEM_FREE_ASYNC = 19,    /* address, stream */
  VRAMSCOPE_OP_CU_MEM_ALLOC_MANAGED = 20, /* address, size, aux = flags */
  VRAMSCOPE_OP_CU_MEM_ALLOC_HOST = 21,    /* cuMemAllocHost_v2, cuMemHostAlloc: address, size */
  VRAMSCOPE_OP_CU_MEM_FREE_HOST = 22,     /* address */
  VRAMSCOPE_OP_CU_MEM_ALLOC_FROM_POOL_ASYNC = 23, /* address, size, stream, aux = pool */
  VRAMSCOPE_OP_CU_MEM_CREATE = 32,                /* address = the handle, size */
  VRAMSCOPE_OP_CU_MEM_RELEASE = 33,               /* address = the handle */
  VRAMSCOPE_OP_CU_MEM_MAP = 34,                   /* address = va, size, aux = handle */
  VRAMSCOPE_OP_CU_MEM_UNMAP = 35,                 /* address = va, size */
  VRAMSCOPE_OP_CU_MEM_ADDRESS_RESERVE = 36,       /* address, size */
  VRAMSCOPE_OP_CU_MEM_ADDRESS_FREE = 37,          /* address, size */

  VRAMSCOPE_OP_FRAME = 64, /* one stack frame: address = return address, size = depth index,
                               aux = sequence of the call it belongs to (frames follow that call) */
  VRAMSCOPE_OP_NOTE = 65   /* bookkeeping at exit: size = driver calls not recorded because a
                               recorded runtime call made them, aux = calls passed through unwrapped */
};

enum vramscope_intercept_flags {
  VRAMSCOPE_FLAG_FROM_PROC_ADDRESS = 1, /* reached through cuGetProcAddress or dlsym, not linked */
};

typedef struct vramscope_intercept_record {
  uint64_t time_ns; /* CLOCK_MONOTONIC when the call started */
  uint64_t address;
  uint64_t size;
  uint64_t stream; /* cudaStream_t / CUstream value; 0 = the default stream */
  uint64_t aux;
  uint64_t sequence;    /* 0, 1, 2... in the order records were claimed */
  uint32_t thread;      /* Linux thread id */
  int32_t status;       /* the call's return code (0 = success; 2 = out of memory in both APIs) */
  uint32_t duration_ns; /* host time inside the real call, saturating */
  uint16_t op;          /* vramscope_intercept_op */
  uint16_t flags;
} vramscope_intercept_record;

#ifdef __cplusplus
static_assert(sizeof(vramscope_intercept_header) == 64, "header is 64 bytes");
static_assert(sizeof(vramscope_intercept_record) == 64, "records are 64 bytes");
#endif

#endif
