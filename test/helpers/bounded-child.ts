// Runs a Node.js child under a wall-clock and a resident-memory limit, for tests that must see a
// hostile input end within bounds: the child is killed past either, and its peak resident memory
// is reported (polled from /proc where there is one, else the child's own report).
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'

export interface BoundedRun {
  stdout: string
  stderr: string
  code: number | null
  signal: string | null
  /** Why it was killed, if it was: past the time or the memory limit. */
  killed: 'time' | 'memory' | null
  /** Most resident memory seen, in bytes (0 where it cannot be read). */
  peakRss: number
  ms: number
}

/** A process's resident memory in bytes, from /proc (0 where there is none). */
export function residentBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m === null ? 0 : Number(m[1]) * 1024
  } catch {
    return 0
  }
}

/** Runs `node ...args`, killing it after `timeoutMs` or once its resident memory passes `maxRss` bytes. */
export async function runBounded(args: string[], timeoutMs: number, maxRss: number, env: Record<string, string> = {}): Promise<BoundedRun> {
  const started = performance.now()
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  let killed: BoundedRun['killed'] = null
  let peakRss = 0
  const poll = setInterval(() => {
    const rss = child.pid === undefined ? 0 : residentBytes(child.pid)
    peakRss = Math.max(peakRss, rss)
    if (rss > maxRss && killed === null) {
      killed = 'memory'
      child.kill('SIGKILL')
    }
  }, 50)
  const timer = setTimeout(() => {
    if (killed === null) killed = 'time'
    child.kill('SIGKILL')
  }, timeoutMs)
  const [code, signal] = (await once(child, 'exit')) as [number | null, string | null]
  clearInterval(poll)
  clearTimeout(timer)
  return { stdout, stderr, code, signal, killed, peakRss, ms: performance.now() - started }
}
