// Load: a long trace replays through every strategy (and the pytorch preset) without exhausting
// memory. A child builds a synthetic trace (at most 4000 blocks live, 256 B to 4 MiB) and replays
// it, layout off, one strategy at a time; its peak resident memory, beyond what the trace itself
// takes, must stay within a fixed allowance plus one copy of the columns the replay reads (40 bytes
// an event): nothing may grow with the events replayed beyond that. CI runs 2 M events;
// `VRAMSCOPE_REPLAY_EVENTS=10000000` (npm run test:load) runs the 10 M-event version.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { listStrategies } from '../../src-main/services/replay/allocators.ts'

const child = fileURLToPath(new URL('../helpers/replay-memory-child.ts', import.meta.url))
const EVENTS = Number(process.env['VRAMSCOPE_REPLAY_EVENTS'] ?? 2_000_000)
const ALLOWANCE_MIB = 128
const COLUMN_BYTES_PER_EVENT = 40

it(
  `a ${(EVENTS / 1e6).toFixed(0)} M-event trace replays through every strategy in bounded memory (peak RSS beyond the trace <= ${ALLOWANCE_MIB} MiB + ${COLUMN_BYTES_PER_EVENT} B/event)`,
  { timeout: 30 * 60_000 },
  (t) => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', child, String(EVENTS)], { encoding: 'utf8', timeout: 29 * 60_000 })
    assert.equal(run.status, 0, `the replay child failed: ${run.stderr}`)
    const report = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as {
      afterTraceMiB: number
      peakMiB: number
      strategies: { label: string; ms: number; eventsPerSecond: number; events: number; allocs: number; failures: number; rssMiB: number }[]
    }
    for (const s of report.strategies)
      t.diagnostic(`${s.label}: ${s.ms} ms (${(s.eventsPerSecond / 1e6).toFixed(2)} M events/s), ${s.failures} failures, RSS ${s.rssMiB} MiB`)
    const grown = report.peakMiB - report.afterTraceMiB
    const bound = ALLOWANCE_MIB + (COLUMN_BYTES_PER_EVENT * EVENTS) / 2 ** 20
    t.diagnostic(`RSS ${report.afterTraceMiB} MiB with the trace built, peak ${report.peakMiB} MiB: +${grown} MiB (bound ${bound.toFixed(0)} MiB)`)
    const expected = listStrategies().length + 1
    assert.equal(report.strategies.length, expected, 'every strategy and the pytorch preset replayed')
    for (const s of report.strategies) {
      assert.equal(s.events, EVENTS, `${s.label} replayed every event`)
      assert.ok(s.allocs > EVENTS / 3, `${s.label} saw the allocations`)
    }
    assert.ok(grown <= bound, `peak RSS grew ${grown} MiB beyond the trace, more than ${bound.toFixed(0)} MiB`)
  },
)
