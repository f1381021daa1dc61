// A job of many ranks opened in the served app (issue 32): `vramscope serve`, each rank's file
// handed over as a page does (POST ranks:stage, the bytes as the body), then ranks:open until its
// summary is in; timed, and the host's memory (the server and its worker, resident, sampled every
// 50 ms) at its highest. Beside it, in the same run, a job of one rank: a job of N ranks holds one
// rank's input at a time, so its memory stays near one rank's whatever N is.
// The ranks are synthetic snapshots at a real recording's shapes (scripts/fixtures/make_large_snapshot.py,
// a real H100 recording repeated), two sizes taken in turn so the ranks differ.
//   npx tsx scripts/bench/ranks-open.ts [--ranks 64] [--megabytes 40] [--runs 3]
import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

const ROOT = join(import.meta.dirname, '..', '..')
const arg = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback)
const RANKS = arg('--ranks', 64)
const MEGABYTES = arg('--megabytes', 40)
const RUNS = arg('--runs', 3)

/** Resident bytes of a process and its descendants (Linux /proc). */
function treeRss(pid: number): number {
  let total = 0
  const stack = [pid]
  while (stack.length > 0) {
    const p = stack.pop()!
    try {
      const status = readFileSync(`/proc/${p}/status`, 'utf8')
      total += Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
      for (const t of readdirSync(`/proc/${p}/task`))
        stack.push(...readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number))
    } catch {
      // gone
    }
  }
  return total
}

async function openJob(files: string[]): Promise<{ ms: number; peakRss: number; idleRss: number; worst: number }> {
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'vramscope.mjs'), 'serve', '--json'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    const url = new URL(
      (JSON.parse(await new Promise<string>((resolve) => createInterface({ input: child.stdout! }).once('line', resolve))) as { url: string }).url,
    )
    const headers = { authorization: `Bearer ${url.searchParams.get('token')}`, 'x-vramscope-page': 'bench-page' }
    const call = async (channel: string, arg: unknown) => {
      const r = await fetch(new URL(`/api/${encodeURIComponent(channel)}`, url), {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify(arg),
      })
      const body = (await r.json()) as { ok: boolean; result: unknown; error?: { message: string } }
      if (!body.ok) throw new Error(`${channel}: ${body.error?.message}`)
      return body.result as Record<string, unknown>
    }
    // The worker starts with the first call.
    await call('app:info', undefined)
    const idleRss = treeRss(child.pid!)
    let peakRss = idleRss
    const sampler = setInterval(() => (peakRss = Math.max(peakRss, treeRss(child.pid!))), 50)
    const t0 = performance.now()
    const keys: string[] = []
    for (const f of files) {
      const r = await fetch(new URL(`/api/${encodeURIComponent('ranks:stage')}`, url), {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/octet-stream', 'x-file-name': encodeURIComponent(f.split('/').pop()!) },
        body: readFileSync(f),
      })
      keys.push(((await r.json()) as { result: { key: string } }).result.key)
    }
    const { jobId } = (await call('ranks:open', { keys })) as { jobId: string }
    for (;;) {
      const s = (await call('job:status', { jobId, waitMs: 1000 })) as { state: string; error?: { message: string } }
      if (s.state === 'done') break
      if (s.state === 'failed' || s.state === 'cancelled') throw new Error(`ranks:open ${s.state}: ${s.error?.message}`)
    }
    const job = (await call('ranks:result', { jobId })) as { ranks: unknown[]; worstRank: number }
    const ms = performance.now() - t0
    clearInterval(sampler)
    peakRss = Math.max(peakRss, treeRss(child.pid!))
    if (job.ranks.length !== files.length) throw new Error(`the job has ${job.ranks.length} ranks, not ${files.length}`)
    return { ms, peakRss, idleRss, worst: job.worstRank }
  } finally {
    child.kill('SIGTERM')
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`

const dir = mkdtempSync(join(tmpdir(), 'vramscope-ranks-open-'))
try {
  const sources = [MEGABYTES, MEGABYTES * 0.75].map((m, i) => {
    const out = join(dir, `source${i}.pickle`)
    execFileSync('python3', [join(ROOT, 'scripts', 'fixtures', 'make_large_snapshot.py'), '--megabytes', String(m), '--out', out], { stdio: 'ignore' })
    return out
  })
  const files = Array.from({ length: RANKS }, (_, r) => {
    const f = join(dir, `rank${r}.pickle`)
    copyFileSync(sources[r % 2]!, f)
    return f
  })
  const one: Awaited<ReturnType<typeof openJob>>[] = []
  const many: Awaited<ReturnType<typeof openJob>>[] = []
  for (let i = 0; i < RUNS; i++) {
    one.push(await openJob(files.slice(0, 1)))
    many.push(await openJob(files))
  }
  console.log(`a job of ranks opened in the served app: ${RANKS} ranks of ${MEGABYTES} and ${MEGABYTES * 0.75} MB snapshots, ${RUNS} runs in turn, medians`)
  console.log(`| job | open (stage + read) | host memory at its highest | host memory before |`)
  console.log(`|---|---|---|---|`)
  for (const [name, rs] of [
    ['1 rank', one],
    [`${RANKS} ranks`, many],
  ] as const)
    console.log(
      `| ${name} | ${(median(rs.map((r) => r.ms)) / 1000).toFixed(2)} s | ${mb(median(rs.map((r) => r.peakRss)))} | ${mb(median(rs.map((r) => r.idleRss)))} |`,
    )
  console.log(`target: ${RANKS} ranks under 2 GiB of host memory: ${median(many.map((r) => r.peakRss)) < 2 * 2 ** 30 ? 'met' : 'NOT met'}`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
