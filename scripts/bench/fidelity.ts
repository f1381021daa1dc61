// The fidelity table (docs/fidelity.md): each recorded run of the what-if data set
// (test/fixtures/pytorch/whatif-suite.tar.gz) replayed through the PyTorch-policy model, against
// torch.cuda.memory_stats() of the same run: peak reserved and segments, (1) with the settings the
// run was recorded under, given to the model by hand as strategy parameters, and (2) predicted from
// the same program's default-settings snapshot. Settings the model lacks (expandable segments) are
// marked, not guessed. Prints a markdown table.
//   npx tsx scripts/bench/fidelity.ts [--only PROGRAM,...]
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { openInput } from '../../src-main/services/import/open-input.ts'
import { replayInput } from '../../src-main/services/replay/replay-input.ts'
import { parseStrategySpecs } from '../../src-main/services/replay/strategy-spec.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1]!.split(',') : undefined

interface Stats {
  conf: string
  limit_bytes?: number | null
  memory_stats: Record<string, number>
  snapshot: { segments: number }
}

/** PYTORCH_ALLOC_CONF as the model's parameters, or why the model cannot take it. */
function modelParams(conf: string, limit: number | null | undefined): string | { missing: string } {
  const params: string[] = ['preset=pytorch']
  for (const item of conf.split(/,(?![^[]*\])/).filter(Boolean)) {
    const [key, value] = item.split(':', 2) as [string, string]
    const rest = item.slice(key.length + 1)
    if (key === 'max_split_size_mb') params.push(`max_split_size=${value}MiB`)
    else if (key === 'max_non_split_rounding_mb') params.push(`max_non_split_rounding_size=${value}MiB`)
    else if (key === 'roundup_power2_divisions') params.push(`roundup_power2_divisions=${rest}`)
    else if (key === 'garbage_collection_threshold') params.push(`garbage_collection_threshold=${value}`)
    else if (key === 'expandable_segments') {
      if (value === 'True') return { missing: 'expandable_segments' }
    } else return { missing: key }
  }
  if (limit) params.push(`max_reserved=${limit}`)
  return `caching:${params.join(':')}`
}

async function replayPeak(path: string, spec: string, recordedPlacement: boolean): Promise<{ peak: number; segments: number }> {
  const input = await openInput(path)
  const specs = parseStrategySpecs([spec], 'fidelity', () => undefined)
  const replayed = await replayInput(input, specs, { recordedPlacement, layout: false })
  const s = replayed.results[0]!.summary!
  return { peak: s['peakReserved']!, segments: s['deviceCalls.regionAlloc'] ?? NaN }
}

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
  console.log(
    '| program | setting | real peak reserved (MiB) | real segments obtained | replay, recorded settings: peak reserved, segments obtained | predicted from the default-settings snapshot |',
  )
  console.log('|---|---|---:|---:|---|---|')
  for (const name of names) {
    const [program, setting] = name.split('__') as [string, string]
    const stats = JSON.parse(readFileSync(join(runs, `${name}.stats.json`), 'utf8')) as Stats
    const real = stats.memory_stats['reserved_bytes.all.peak']!
    const realSegments = stats.memory_stats['segment.all.allocated']!
    const spec = modelParams(stats.conf ?? '', stats.limit_bytes)
    let recorded = '—'
    let predicted = '—'
    if (typeof spec === 'string') {
      try {
        const r = await replayPeak(join(runs, `${name}.pickle`), spec, true)
        recorded = `${mib(r.peak)} MiB (${pct(r.peak, real)}), ${r.segments}`
      } catch (e) {
        recorded = `refused: ${((e as { problem?: string }).problem ?? (e as Error).message).slice(0, 90)}`
      }
      if (setting !== 'default') {
        try {
          const p = await replayPeak(join(runs, `${program}__default.pickle`), spec, false)
          predicted = `${mib(p.peak)} MiB (${pct(p.peak, real)})`
        } catch (e) {
          predicted = `refused: ${((e as { problem?: string }).problem ?? (e as Error).message).slice(0, 90)}`
        }
      }
    } else recorded = predicted = `not modelled: ${spec.missing}`
    console.log(`| ${program} | ${setting} | ${mib(real)} | ${realSegments} | ${recorded} | ${predicted} |`)
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
