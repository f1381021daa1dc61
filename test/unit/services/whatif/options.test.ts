// Each option of PyTorch's allocator configuration against real recordings
// (test/fixtures/pytorch/real/: PyTorch 2.11 on an H100, torch.cuda.memory_stats() of the same run
// beside each snapshot): replayed under the settings and the limit it was recorded with, a snapshot
// gives the run's peak reserved within 1 % and the same number of segments, and a recorded
// out-of-memory happens again at the same request; from the program's default-settings snapshot,
// the prediction for each other setting is within 2 % of the real run under that setting.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { openInput, type OpenedInput } from '../../../../src-main/services/import/open-input.ts'
import { runWhatif } from '../../../../src-main/services/whatif/whatif.ts'

const DIR = join(import.meta.dirname, '../../../fixtures/pytorch/real')

interface Stats {
  conf: string
  limit_bytes: number | null
  memory_stats: Record<string, number>
  oom: { happened: boolean }
}

const runs = readdirSync(DIR)
  .filter((f) => f.endsWith('.pickle'))
  .map((f) => f.slice(0, -'.pickle'.length))
  .sort()
const stats = (name: string): Stats => JSON.parse(readFileSync(join(DIR, `${name}.stats.json`), 'utf8')) as Stats
const inputs = new Map<string, Promise<OpenedInput>>()
const open = (name: string): Promise<OpenedInput> => {
  let p = inputs.get(name)
  if (!p) inputs.set(name, (p = openInput(join(DIR, `${name}.pickle`))))
  return p
}

describe('replayed under the settings it was recorded with', () => {
  for (const name of runs) {
    it(name, async (t) => {
      const s = stats(name)
      const out = await runWhatif(await open(name), { confs: ['recorded'], ...(s.limit_bytes !== null && { capBytes: s.limit_bytes }), search: false })
      const row = out.rows[0]!
      assert.equal(out.recordedConf, runsConf(s.conf), 'the recorded configuration is the one the run set')
      if (row.notRanked) return t.skip(`${name}: ${row.notRanked} in this build`)
      const real = s.memory_stats['reserved_bytes.all.peak']!
      assert.ok(Math.abs(row.peakReserved - real) <= 0.01 * real, `peak reserved ${row.peakReserved} vs ${real}`)
      assert.equal(row.segments, s.memory_stats['segment.all.allocated'], 'segments obtained')
      if (s.oom.happened) assert.equal(row.oomReproduced, 1, 'the out-of-memory happens again at the same request')
      else assert.equal(row.failures, 0)
    })
  }
})

describe("predicted from the program's default-settings snapshot", () => {
  for (const name of runs) {
    const [program, setting] = name.split('__') as [string, string]
    if (setting === 'default' || !runs.includes(`${program}__default`)) continue
    it(name, async (t) => {
      const s = stats(name)
      const out = await runWhatif(await open(`${program}__default`), {
        confs: [s.conf],
        ...(s.limit_bytes !== null && { capBytes: s.limit_bytes }),
        search: false,
      })
      const row = out.rows[0]!
      if (row.notRanked) return t.skip(`${name}: ${row.notRanked} in this build`)
      const real = s.memory_stats['reserved_bytes.all.peak']!
      assert.ok(Math.abs(row.peakReserved - real) <= 0.02 * real, `predicted ${row.peakReserved} vs real ${real}`)
    })
  }
})

/** The configuration as the lab prints it: PyTorch's syntax, options in one order. */
function runsConf(conf: string): string {
  const order = ['expandable_segments', 'max_split_size_mb', 'max_non_split_rounding_mb', 'roundup_power2_divisions', 'garbage_collection_threshold']
  const items = conf ? conf.split(/,(?![^[]*\])/) : []
  return items.sort((a, b) => order.indexOf(a.split(':')[0]!) - order.indexOf(b.split(':')[0]!)).join(',')
}
