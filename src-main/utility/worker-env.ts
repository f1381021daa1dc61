// The environment a worker process starts with. Its replays write tens to hundreds of megabytes
// into fresh memory (strategies' tables, layout columns), and on Linux a first touch of each 4 KiB
// page is a fault: glibc's malloc asked to advise transparent huge pages for its own mappings
// (the `glibc.malloc.hugetlb=1` tunable, glibc 2.35 and later; ignored by others) makes that a
// fault every 2 MiB. docs/benchmarks.md, "Replays in huge pages". Its replays run on libuv's
// thread pool (each native replay is an AsyncWorker), four threads unless UV_THREADPOOL_SIZE says
// more: the what-if lab runs as many replays at once as there are cores, so the pool gets as many
// threads (threadPoolSize). Both are read only at the process's start, hence set for the child,
// never in this process.
import { availableParallelism } from 'node:os'

/** The glibc tunable that makes malloc advise transparent huge pages. */
const HUGE_PAGES = 'glibc.malloc.hugetlb'

/**
 * `base` with glibc's malloc asked for transparent huge pages, added to any GLIBC_TUNABLES the
 * user set (theirs wins where they set the same tunable), and libuv's pool sized to the cores
 * unless the user sized it (UV_THREADPOOL_SIZE).
 */
export function workerEnv(base: Record<string, string | undefined>): Record<string, string | undefined> {
  const tunables = base['GLIBC_TUNABLES'] ?? ''
  const pool = base['UV_THREADPOOL_SIZE'] ? {} : { UV_THREADPOOL_SIZE: String(threadPoolSize()) }
  if (tunables.split(':').some((t) => t.split('=')[0] === HUGE_PAGES)) return { ...base, ...pool }
  return { ...base, ...pool, GLIBC_TUNABLES: tunables === '' ? `${HUGE_PAGES}=1` : `${tunables}:${HUGE_PAGES}=1` }
}

/** libuv's threads for a process that replays: one a core, never fewer than libuv's own 4 (file reads share the pool), at most its 1024. */
export function threadPoolSize(cores = availableParallelism()): number {
  return Math.min(1024, Math.max(4, cores))
}
