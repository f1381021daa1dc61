// The worker process's entry for `vramscope serve`, bundled into one ES module (dist/worker/).
// Forked from the TypeScript sources, the worker loads tsx and compiles ~100 modules as it starts:
// 0.8–0.9 s before it answers its first call on the development machine, against 0.2–0.3 s for
// the bundle (docs/benchmarks.md, "Issue 17's first paint and maps, again"). A page waits on that
// start. Like the UI (renderer-build.ts), the bundle is built on the first serve and again when a
// source is newer; where it cannot be built, serve forks the sources as before.
import { closeSync, existsSync, mkdirSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import { newestMtime, REPO_ROOT } from './renderer-build.ts'

export const WORKER_BUNDLE = join(REPO_ROOT, 'dist', 'worker', 'worker.mjs')
const ENTRY = join(REPO_ROOT, 'src-main', 'utility', 'worker.ts')
/** What the worker is built from: any file here newer than the bundle builds it again. */
const SOURCES = ['src-main', 'src-shared', 'native/index.d.ts', 'package.json']

/** The bundle's first line: it names the checkout whose files its modules find beside them. */
const banner = () => `// vramscope worker, built from ${pathToFileURL(REPO_ROOT).href}`

/** Whether dist/worker/worker.mjs is missing, older than a source of it, or built in another checkout. */
export function workerIsStale(): boolean {
  if (!existsSync(WORKER_BUNDLE)) return true
  if (firstLine(WORKER_BUNDLE) !== banner()) return true
  const built = statSync(WORKER_BUNDLE).mtimeMs
  return SOURCES.some((s) => existsSync(join(REPO_ROOT, s)) && newestMtime(join(REPO_ROOT, s)) > built)
}

function firstLine(path: string): string {
  const fd = openSync(path, 'r')
  try {
    const head = Buffer.alloc(4096)
    return (
      head
        .subarray(0, readSync(fd, head, 0, head.length, 0))
        .toString('utf8')
        .split('\n')[0] ?? ''
    )
  } finally {
    closeSync(fd)
  }
}

/**
 * Builds the worker's bundle if it is stale and returns its path, or undefined (with the reason
 * told to `log`) when it cannot be built: serve then forks the TypeScript sources through tsx.
 *
 * Every module keeps its own `import.meta.url` (its source file's URL), so what a module finds
 * beside itself (the native addon in build/Release, the workload child next to its module) is
 * found as from the sources. Packages stay imports of node_modules, resolved from the checkout.
 */
export async function ensureWorkerBuilt(log: (line: string) => void = () => {}): Promise<string | undefined> {
  try {
    if (!workerIsStale()) return WORKER_BUNDLE
    const { build } = await import('esbuild')
    const dir = join(REPO_ROOT, 'dist', 'worker')
    mkdirSync(dir, { recursive: true })
    // Written beside and renamed into place: two serves starting together never run half a file.
    const partial = join(dir, `worker.${process.pid}.${Date.now()}.mjs`)
    try {
      await build({
        entryPoints: [ENTRY],
        outfile: partial,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        packages: 'external',
        logLevel: 'silent',
        banner: { js: banner() },
        plugins: [
          {
            name: 'vramscope:source-import-meta-url',
            setup(b) {
              b.onLoad({ filter: /\.[cm]?ts$/ }, async (args) => ({
                contents: (await readFile(args.path, 'utf8')).replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)),
                loader: 'ts',
              }))
            },
          },
        ],
      })
      renameSync(partial, WORKER_BUNDLE)
    } finally {
      rmSync(partial, { force: true })
    }
    return WORKER_BUNDLE
  } catch (e) {
    log(`the worker's bundle was not built (${(e as Error).message.split('\n')[0]}); its sources run through tsx instead`)
    return undefined
  }
}
