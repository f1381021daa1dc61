// A job of many ranks (issue 32): `vramscope whatif R0 ... R7 --json` (the default grid on every
// rank, one rank open at a time) beside `vramscope whatif R0 --json` (one rank), each timed as a
// whole process (Node's start included), run in turn (one, eight, one, eight, ...), medians. The
// ranks are the two of the torchrun job in test/fixtures/pytorch/field-gpu.tar.gz, copied under
// eight names (worker_r0 ... worker_r7: ranks from their names), rank 0's and rank 1's in turn.
// Target: eight ranks cost at most eight times one rank.
//   npx tsx scripts/bench/ranks-job.ts [--ranks N] [--runs N]
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { availableParallelism, tmpdir } from 'node:os'
import { join } from 'node:path'

const ROOT = join(import.meta.dirname, '..', '..')
const BIN = join(ROOT, 'bin', 'vramscope.mjs')
const arg = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback)
const RANKS = arg('--ranks', 8)
const RUNS = arg('--runs', 3)

const dir = mkdtempSync(join(tmpdir(), 'vramscope-ranks-job-'))
try {
  execFileSync('tar', [
    'xzf',
    join(ROOT, 'test/fixtures/pytorch/field-gpu.tar.gz'),
    '-C',
    dir,
    'field/ddp_rank0__default.pickle',
    'field/ddp_rank1__default.pickle',
  ])
  const job = join(dir, 'job')
  mkdirSync(job)
  const files: string[] = []
  for (let r = 0; r < RANKS; r++) {
    const file = join(job, `worker_r${r}.pickle`)
    copyFileSync(join(dir, 'field', `ddp_rank${r % 2}__default.pickle`), file)
    files.push(file)
  }
  const time = (args: string[]): number => {
    const t0 = performance.now()
    const r = spawnSync(process.execPath, [BIN, 'whatif', ...args, '--json'], { maxBuffer: 256 << 20, encoding: 'utf8' })
    if (r.status !== 0) throw new Error(`whatif ${args.join(' ')} failed (exit ${r.status}): ${r.stderr}`)
    return (performance.now() - t0) / 1000
  }
  const one: number[] = []
  const many: number[] = []
  for (let i = 0; i < RUNS; i++) {
    one.push(time([files[0]!]))
    many.push(time(files))
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const a = median(one)
  const b = median(many)
  console.log(`| what | median (s) | runs (s) |`)
  console.log(`|---|---:|---|`)
  console.log(`| one rank, the default grid | ${a.toFixed(2)} | ${one.map((t) => t.toFixed(2)).join(', ')} |`)
  console.log(`| ${RANKS} ranks, the default grid | ${b.toFixed(2)} | ${many.map((t) => t.toFixed(2)).join(', ')} |`)
  console.log('')
  console.log(`${RANKS} ranks cost ${(b / a).toFixed(2)}x one rank (target: at most ${RANKS}x) on ${availableParallelism()} cores, Node's start in both`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
