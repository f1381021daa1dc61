// Merging a job's ranks (issue 32): `vramscope ranks DIR/*.json --json` on 64 per-rank what-if
// results, timed as a whole process (Node's start included), median of 5. The results are copies
// of a real one, rank 0 of the torchrun job in test/fixtures/pytorch/field-gpu.tar.gz run through
// `whatif FILE --json` (the default grid), each given its rank 0..63 and its peak figures varied a
// little (up to +3 %), so that the ranks differ and the worst rank is a real choice.
//   npx tsx scripts/bench/ranks-merge.ts [--ranks N] [--runs N]
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'

const ROOT = join(import.meta.dirname, '..', '..')
const BIN = join(ROOT, 'bin', 'vramscope.mjs')
const arg = (name: string, fallback: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : fallback)
const RANKS = arg('--ranks', 64)
const RUNS = arg('--runs', 5)

const dir = mkdtempSync(join(tmpdir(), 'vramscope-ranks-merge-'))
try {
  execFileSync('tar', [
    'xzf',
    join(ROOT, 'test/fixtures/pytorch/field-gpu.tar.gz'),
    '-C',
    dir,
    'field/ddp_rank0__default.pickle',
    'field/ddp_rank0__default.stats.json',
  ])
  const snapshot = join(dir, 'field', 'ddp_rank0__default.pickle')
  console.error(`whatif ${snapshot} --json (the default grid) ...`)
  const base = JSON.parse(execFileSync(process.execPath, [BIN, 'whatif', snapshot, '--json'], { maxBuffer: 256 << 20, encoding: 'utf8' })) as {
    rank: number
    configs: { peakReserved: number; peakAllocated: number; smallestFittingBytes: number | null }[]
  }
  // A small deterministic generator: the same figures every run.
  let seed = 1
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
  const results = join(dir, 'results')
  mkdirSync(results)
  for (let rank = 0; rank < RANKS; rank++) {
    const vary = 1 + random() * 0.03
    const configs = base.configs.map((c) => ({
      ...c,
      peakReserved: Math.round(c.peakReserved * vary),
      peakAllocated: Math.round(c.peakAllocated * vary),
      smallestFittingBytes: c.smallestFittingBytes === null ? null : Math.round(c.smallestFittingBytes * vary),
    }))
    writeFileSync(join(results, `rank${rank}.json`), JSON.stringify({ ...base, rank, rankFrom: 'name', configs }, null, 2))
  }
  const size = statSync(join(results, 'rank0.json')).size
  const times: number[] = []
  let merged: { ranks: unknown[]; worstRank: number; configs: unknown[] } | undefined
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now()
    const r = spawnSync(process.execPath, [BIN, 'ranks', join(results, '*.json'), '--json'], { maxBuffer: 256 << 20, encoding: 'utf8' })
    times.push((performance.now() - t0) / 1000)
    if (r.status !== 0) throw new Error(`ranks failed (exit ${r.status}): ${r.stderr}`)
    merged = JSON.parse(r.stdout) as typeof merged
  }
  if (merged!.ranks.length !== RANKS) throw new Error(`merged ${merged!.ranks.length} ranks, not ${RANKS}`)
  const median = [...times].sort((a, b) => a - b)[Math.floor(times.length / 2)]!
  console.log(
    `ranks of ${RANKS} results (${base.configs.length} configurations each, ${(size / 1024).toFixed(0)} KiB a result): ` +
      `median ${median.toFixed(2)} s of ${RUNS} (${times.map((t) => t.toFixed(2)).join(', ')}) on ${cpus().length} cores, Node ${process.versions.node}; ` +
      `worst rank ${merged!.worstRank}`,
  )
  console.log(median <= 2 ? 'within the 2 s target' : 'OVER the 2 s target')
} finally {
  rmSync(dir, { recursive: true, force: true })
}
