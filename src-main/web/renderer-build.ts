// The built renderer that the web host serves (dist/renderer). A checkout has only the sources;
// the first `vramscope serve` (and `npm test`) builds it with Vite, and builds again when a
// source is newer than the build, so nobody serves a stale UI.
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url))
export const RENDERER_DIR = join(REPO_ROOT, 'dist', 'renderer')
const SOURCES = ['src-renderer', 'src-main/ipc', 'vite.renderer.config.ts']

/** The newest modification time of a file, or of anything below a directory. */
export function newestMtime(path: string): number {
  const s = statSync(path)
  if (!s.isDirectory()) return s.mtimeMs
  let newest = s.mtimeMs
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)))
  return newest
}

/** Whether dist/renderer is missing or older than a source of it. */
export function rendererIsStale(): boolean {
  const index = join(RENDERER_DIR, 'index.html')
  if (!existsSync(index)) return true
  const built = statSync(index).mtimeMs
  return SOURCES.some((s) => existsSync(join(REPO_ROOT, s)) && newestMtime(join(REPO_ROOT, s)) > built)
}

/** Builds the renderer if it is stale; `log` hears what happens. Rejects with Vite's output on failure. */
export async function ensureRendererBuilt(log: (line: string) => void = () => {}): Promise<void> {
  if (!rendererIsStale()) return
  if (!existsSync(join(REPO_ROOT, 'src-renderer'))) throw new Error(`no built UI at ${RENDERER_DIR} and no sources to build it from`)
  log('building the UI (vite build)…')
  const vite = join(REPO_ROOT, 'node_modules', 'vite', 'bin', 'vite.js')
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [vite, 'build', '-c', 'vite.renderer.config.ts', '--logLevel', 'warn'], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let output = ''
    child.stdout.on('data', (d: Buffer) => (output += d.toString()))
    child.stderr.on('data', (d: Buffer) => (output += d.toString()))
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`building the UI failed (vite exited ${code}):\n${output}`))))
  })
}
