// The fidelity table (docs/fidelity.md): each recorded run of the what-if data set
// (test/fixtures/pytorch/whatif-suite.tar.gz) put through the what-if lab
// (src-main/services/whatif/whatif.ts), against torch.cuda.memory_stats() of the same run: (1) the
// run's own snapshot replayed under the settings it recorded (`--conf recorded`) and the limit it
// ran under, peak reserved, segments obtained, and the recorded out-of-memory reproduced or not;
// (2) the same program's default-settings snapshot replayed under this run's PYTORCH_ALLOC_CONF:
// the prediction a user gets without rerunning the job. Prints a markdown table and the counts;
// then (3) each run as a late or overflowed recording: its first half of trace entries dropped and
// its final segments kept (scripts/fixtures/cut-snapshot.ts), replayed under its recorded settings
// from the recorded state at the window's opening, beside the same replay started empty (the
// blocks live then allocated at t = 0, as before the recorded state was replayed), against the
// recorded layout of the window (the whole run's peak may lie in the entries dropped).
//   npx tsx scripts/bench/fidelity.ts [--only PROGRAM,...] [--dir DIR]
// --dir: the runs in DIR (PROGRAM__SETTING.pickle beside PROGRAM__SETTING.stats.json, as
// scripts/gpu/field-runs.sh gathers `record --pytorch` recordings) instead of the bundled data set.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { withLayoutMetrics } from '../../src-main/services/analysis/layout-metrics.ts'
import { openInput, type OpenedInput } from '../../src-main/services/import/open-input.ts'
import { STAND_IN_ROWS } from '../../src-main/services/import/pytorch/types.ts'
import { runWhatif } from '../../src-main/services/whatif/whatif.ts'
import { cutSnapshot, plainSnapshot } from '../fixtures/cut-snapshot.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1]!.split(',') : undefined
const givenDir = process.argv.includes('--dir') ? process.argv[process.argv.indexOf('--dir') + 1] : undefined

interface Stats {
  conf: string
  limit_bytes?: number | null
  memory_stats: Record<string, number>
  oom: { happened: boolean }
}

const opened = new Map<string, OpenedInput>()
async function open(path: string): Promise<OpenedInput> {
  let input = opened.get(path)
  if (!input) opened.set(path, (input = await openInput(path)))
  return input
}

const refusal = (e: unknown): string => `refused: ${((e as { problem?: string }).problem ?? (e as Error).message).slice(0, 90)}`

const dir = mkdtempSync(join(tmpdir(), 'vramscope-fidelity-'))
try {
  if (!givenDir) execFileSync('tar', ['xzf', join(ROOT, 'test', 'fixtures', 'pytorch', 'whatif-suite.tar.gz'), '-C', dir])
  const runs = givenDir ?? join(dir, 'whatif')
  const names = readdirSync(runs)
    .filter((f) => f.endsWith('.pickle'))
    .map((f) => f.slice(0, -'.pickle'.length))
    .filter((n) => !only || only.includes(n.split('__')[0]!))
    .sort()
  const pct = (a: number, b: number) => `${a >= b ? '+' : ''}${(((a - b) / b) * 100).toFixed(2)} %`
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)}`
  const counts = { runs: 0, replayed: 0, within1: 0, sameSegments: 0, ooms: 0, oomsReproduced: 0, predicted: 0, within2: 0 }
  console.log(
    '| program | setting | real peak reserved (MiB) | real segments obtained | replay under the recorded settings: peak reserved, segments obtained | predicted from the default-settings snapshot |',
  )
  console.log('|---|---|---:|---:|---|---|')
  for (const name of names) {
    const [program, setting] = name.split('__') as [string, string]
    const stats = JSON.parse(readFileSync(join(runs, `${name}.stats.json`), 'utf8')) as Stats
    const real = stats.memory_stats['reserved_bytes.all.peak']!
    const realSegments = stats.memory_stats['segment.all.allocated']!
    const cap = stats.limit_bytes ?? undefined
    counts.runs++
    let recorded: string
    try {
      const out = await runWhatif(await open(join(runs, `${name}.pickle`)), { confs: ['recorded'], ...(cap !== undefined && { capBytes: cap }), search: false })
      const row = out.rows[0]!
      if (row.notRanked) recorded = row.notRanked
      else {
        counts.replayed++
        if (Math.abs(row.peakReserved - real) <= 0.01 * real) counts.within1++
        if (row.segments === realSegments) counts.sameSegments++
        recorded = `${mib(row.peakReserved)} MiB (${pct(row.peakReserved, real)}), ${row.segments}`
        if (stats.oom.happened) {
          counts.ooms++
          if (row.oomReproduced > 0) counts.oomsReproduced++
          recorded += row.oomReproduced > 0 ? '; out-of-memory reproduced at the same request' : '; out-of-memory NOT reproduced'
        }
      }
    } catch (e) {
      recorded = refusal(e)
    }
    let predicted = '—'
    if (setting !== 'default') {
      try {
        const out = await runWhatif(await open(join(runs, `${program}__default.pickle`)), {
          confs: [stats.conf ?? ''],
          ...(cap !== undefined && { capBytes: cap }),
          search: false,
        })
        const row = out.rows[0]!
        if (row.notRanked) predicted = row.notRanked
        else {
          counts.predicted++
          if (Math.abs(row.peakReserved - real) <= 0.02 * real) counts.within2++
          predicted = `${mib(row.peakReserved)} MiB (${pct(row.peakReserved, real)})`
        }
      } catch (e) {
        predicted = refusal(e)
      }
    }
    console.log(`| ${program} | ${setting} | ${mib(real)} | ${realSegments} | ${recorded} | ${predicted} |`)
  }
  console.log('')
  console.log(
    `${counts.runs} runs: replayed under their recorded settings ${counts.replayed}, peak reserved within 1 % in ${counts.within1}, the same segments in ${counts.sameSegments}; ` +
      `out-of-memory reproduced in ${counts.oomsReproduced} of ${counts.ooms}; predicted from the default snapshot ${counts.predicted}, within 2 % in ${counts.within2}`,
  )

  // (3) Late and overflowed recordings.
  console.log('')
  console.log(
    '| program | setting | trace entries dropped | real run: peak reserved (MiB) | recorded layout of the window: peak reserved (MiB), segments | from the recorded state: peak reserved, segments | started empty: peak reserved, segments |',
  )
  console.log('|---|---|---:|---:|---|---|---|')
  const late = { runs: 0, seeded: 0, within1: 0, sameSegments: 0, emptyWithin1: 0, emptySameSegments: 0 }
  for (const name of names) {
    const [program, setting] = name.split('__') as [string, string]
    const stats = JSON.parse(readFileSync(join(runs, `${name}.stats.json`), 'utf8')) as Stats
    const real = stats.memory_stats['reserved_bytes.all.peak']!
    const cap = stats.limit_bytes ?? undefined
    const snapshot = plainSnapshot(readFileSync(join(runs, `${name}.pickle`)))
    const k = Math.floor((snapshot.device_traces[0]?.length ?? 0) / 2)
    const path = join(dir, `${name}.late.json`)
    writeFileSync(path, cutSnapshot(snapshot, k))
    const input = await openInput(path)
    // The window's own figures: the whole run's peak may lie in the entries dropped.
    const window = withLayoutMetrics(input.strategies[0]!).summary!
    const windowPeak = window['peakReserved']!
    const recordedSegments = window['deviceCalls.regionAlloc'] ?? 0
    // The same input without the marks of its window-open state: the replay starts empty.
    const { [STAND_IN_ROWS]: _marks, ...unmarked } = input.trace.meta.properties
    const emptyInput = { ...input, trace: { ...input.trace, meta: { ...input.trace.meta, properties: unmarked } } }
    late.runs++
    const cell = async (from: OpenedInput, seeded: boolean): Promise<string> => {
      try {
        const out = await runWhatif(from, { confs: ['recorded'], ...(cap !== undefined && { capBytes: cap }), search: false })
        const row = out.rows[0]!
        if (row.notRanked) return row.notRanked
        const within = Math.abs(row.peakReserved - windowPeak) <= 0.01 * windowPeak
        const same = row.segments === recordedSegments
        if (seeded) {
          late.seeded++
          if (within) late.within1++
          if (same) late.sameSegments++
        } else {
          if (within) late.emptyWithin1++
          if (same) late.emptySameSegments++
        }
        return `${mib(row.peakReserved)} MiB (${pct(row.peakReserved, windowPeak)}), ${row.segments}`
      } catch (e) {
        return refusal(e)
      }
    }
    console.log(
      `| ${program} | ${setting} | ${k} | ${mib(real)} | ${mib(windowPeak)}, ${recordedSegments} | ${await cell(input, true)} | ${await cell(emptyInput, false)} |`,
    )
  }
  console.log('')
  console.log(
    `${late.runs} late recordings (first half of the trace dropped): from the recorded state ${late.seeded} replayed, peak reserved within 1 % of the recorded window's in ${late.within1}, ` +
      `the recorded layout's segments in ${late.sameSegments}; started empty: within 1 % in ${late.emptyWithin1}, the same segments in ${late.emptySameSegments}`,
  )
} finally {
  rmSync(dir, { recursive: true, force: true })
}
