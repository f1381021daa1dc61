// The environment a worker process starts with. Its replays write tens to hundreds of megabytes
// into fresh memory (strategies' tables, layout columns), and on Linux a first touch of each 4 KiB
// page is a fault: glibc's malloc asked to advise transparent huge pages for its own mappings
// (the `glibc.malloc.hugetlb=1` tunable, glibc 2.35 and later; ignored by others) makes that a
// fault every 2 MiB. docs/benchmarks.md, "Replays in huge pages". The tunable is read only at the
// process's start, hence set for the child, never in this process. (Its replays run on the
// engine's own pool, a thread a core: docs/architecture.md, "One pool of replay threads"; libuv's
// pool is left to file reads.)

/** The glibc tunable that makes malloc advise transparent huge pages. */
const HUGE_PAGES = 'glibc.malloc.hugetlb'

/**
 * `base` with glibc's malloc asked for transparent huge pages, added to any GLIBC_TUNABLES the
 * user set (theirs wins where they set the same tunable).
 */
export function workerEnv(base: Record<string, string | undefined>): Record<string, string | undefined> {
  const tunables = base['GLIBC_TUNABLES'] ?? ''
  if (tunables.split(':').some((t) => t.split('=')[0] === HUGE_PAGES)) return { ...base }
  return { ...base, GLIBC_TUNABLES: tunables === '' ? `${HUGE_PAGES}=1` : `${tunables}:${HUGE_PAGES}=1` }
}
