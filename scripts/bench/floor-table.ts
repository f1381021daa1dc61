// Benchmark: how far each allocator is from the floor on every real PyTorch fixture (issue 31): the
// floor (the most live at once, each block rounded to 512 B), the static plan, the recorded settings
// (PyTorch's defaults where the program set none), the lab's best-ranked PyTorch setting, and
// GMLake-style stitching, each as `vramscope whatif FILE --json` reports it (one CLI run a file, as a
// user runs it): the least device memory each runs the whole trace in (its smallest fitting limit,
// so a trace that ended in an out-of-memory compares as one that did not), with the share of it
// lost above the floor. A fixture in both real/ and the what-if data set is counted once. Then the average
// reduction stitching makes against the recorded settings, printed beside GMLake's published
// reductions (ASPLOS 2024: 9.2 GB less reserved on average, up to 25 GB, and 15 % less
// fragmentation on average, up to 33 %, on eight LLMs on an A100-80GB) as a comparison, not a target.
//   npx tsx scripts/bench/floor-table.ts [--json FILE]
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'

const ROOT = join(import.meta.dirname, '..', '..')
const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`)
  return i < 0 ? undefined : process.argv[i + 1]
}
const MiB = 1024 * 1024

interface Row {
  rank: number
  label: string
  conf?: string
  kind: string
  strategy?: string
  peakReserved: number
  smallestFittingBytes: number | null
  failures: number
}
interface Report {
  events: number
  floor: { peakLiveBytes: number; peakLiveRoundedBytes: number; plannedBytes: number }
  configs: Row[]
}

function whatif(file: string): Report {
  const out = execFileSync(process.execPath, [join(ROOT, 'bin', 'vramscope.mjs'), 'whatif', file, '--json'], { encoding: 'utf8', maxBuffer: 64 * MiB })
  return JSON.parse(out) as Report
}

const dir = mkdtempSync(join(tmpdir(), 'vramscope-floor-table-'))
try {
  execFileSync('tar', ['xzf', join(ROOT, 'test', 'fixtures', 'pytorch', 'whatif-suite.tar.gz'), '-C', dir])
  const real = join(ROOT, 'test', 'fixtures', 'pytorch', 'real')
  const files = [
    ...readdirSync(real)
      .filter((f) => f.endsWith('.pickle'))
      .map((f) => join(real, f)),
    ...readdirSync(join(dir, 'whatif'))
      .filter((f) => f.endsWith('.pickle'))
      .map((f) => join(dir, 'whatif', f)),
  ]
    .filter((f, i, all) => all.findIndex((g) => basename(g) === basename(f)) === i)
    .sort((a, b) => basename(a).localeCompare(basename(b)))
  const mib = (b: number) => (b / MiB).toFixed(0)
  const over = (b: number, floor: number) => `${(((b - floor) / b) * 100).toFixed(1)} %`
  console.log(
    '| fixture | events | floor (512 B) MiB | planned MiB | recorded settings MiB (lost) | best PyTorch setting | it needs MiB (lost) | stitching MiB (lost) | stitching − recorded |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|')
  const reductions: { bytes: number; lostPoints: number }[] = []
  const out: unknown[] = []
  for (const file of files) {
    const r = whatif(file)
    const floor = r.floor.peakLiveRoundedBytes
    const recorded = r.configs.find((c) => c.kind === 'recorded')
    const best = r.configs.find((c) => c.rank === 1)
    const stitching = r.configs.find((c) => c.strategy === 'stitching')
    if (!recorded || !best || !stitching) {
      console.log(`| ${basename(file)} | ${r.events} | ${mib(floor)} | — | (no recorded, best or stitching row) | | | | |`)
      continue
    }
    // The least memory each runs the trace in: its smallest fitting limit (its peak reserved where none was searched).
    const needs = (c: Row) => c.smallestFittingBytes ?? c.peakReserved
    const [rec, bst, sti] = [needs(recorded), needs(best), needs(stitching)]
    reductions.push({ bytes: rec - sti, lostPoints: ((rec - floor) / rec - (sti - floor) / sti) * 100 })
    console.log(
      `| ${basename(file)} | ${r.events} | ${mib(floor)} | ${mib(r.floor.plannedBytes)} | ${mib(rec)} (${over(rec, floor)}) | ${best.conf || best.label} | ${mib(bst)} (${over(bst, floor)}) | ${mib(sti)} (${over(sti, floor)}) | ${mib(sti - rec)} MiB |`,
    )
    out.push({
      file: basename(file),
      events: r.events,
      floor: r.floor,
      recorded: { peakReserved: recorded.peakReserved, needs: rec },
      best: { conf: best.conf || best.label, peakReserved: best.peakReserved, needs: bst },
      stitching: { peakReserved: stitching.peakReserved, needs: sti },
    })
  }
  const n = reductions.length
  const meanBytes = reductions.reduce((a, r) => a + r.bytes, 0) / Math.max(1, n)
  const maxBytes = Math.max(0, ...reductions.map((r) => r.bytes))
  const meanPoints = reductions.reduce((a, r) => a + r.lostPoints, 0) / Math.max(1, n)
  const maxPoints = Math.max(0, ...reductions.map((r) => r.lostPoints))
  console.log(
    `\nstitching against the recorded settings, ${n} fixtures: ${mib(meanBytes)} MiB less needed on average (up to ${mib(maxBytes)} MiB); the share lost above the floor ${meanPoints.toFixed(1)} points lower on average (up to ${maxPoints.toFixed(1)})` +
      `\nGMLake, published (8 LLMs, A100-80GB; a comparison, not a target): 9.2 GB less on average (up to 25 GB); fragmentation 15 % lower on average (up to 33 %)`,
  )
  const json = arg('json')
  if (json) writeFileSync(json, JSON.stringify({ fixtures: out, meanReductionBytes: meanBytes, meanLostPointsReduction: meanPoints }, null, 2))
} finally {
  rmSync(dir, { recursive: true, force: true })
}
