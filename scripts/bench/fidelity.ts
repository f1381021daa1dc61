// The fidelity table (docs/fidelity.md): each recorded run of the what-if data set
// (test/fixtures/pytorch/whatif-suite.tar.gz) put through the what-if lab
// (src-main/services/whatif/whatif.ts), against torch.cuda.memory_stats() of the same run: (1) the
// run's own snapshot replayed under the settings it recorded (`--conf recorded`) and the limit it
// ran under, peak reserved, segments obtained, and the recorded out-of-memory reproduced or not;
// (2) the same program's default-settings snapshot replayed under this run's PYTORCH_ALLOC_CONF:
// the prediction a user gets without rerunning the job. Prints a markdown table and the counts.
//   npx tsx scripts/bench/fidelity.ts [--only PROGRAM,...]
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { openInput, type OpenedInput } from '../../src-main/services/import/open-input.ts'
import { runWhatif } from '../../src-main/services/whatif/whatif.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1]!.split(',') : undefined

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
  execFileSync('tar', ['xzf', join(ROOT, 'test', 'fixtures', 'pytorch', 'whatif-suite.tar.gz'), '-C', dir])
  const runs = join(dir, 'whatif')
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
} finally {
  rmSync(dir, { recursive: true, force: true })
}
