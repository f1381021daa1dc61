// The what-if grid's strategy rows are sized by the one rule the app and the CLI use
// (sized-defaults.ts), and a row no size holds is left out with its reason: the grid never fails
// as a whole on a trace's sizes, up to 2^53 - 1 B. Real addon, real replays.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { openInput } from '../../../../src-main/services/import/open-input.ts'
import { sizedForTrace } from '../../../../src-main/services/replay/sized-defaults.ts'
import { allocateEvents, EventKind, type RequestTrace } from '../../../../src-main/services/trace/model.ts'
import { runWhatif } from '../../../../src-main/services/whatif/whatif.ts'
import { shown, vramscope } from '../../../helpers/cli.ts'

const MiB = 2 ** 20
const HUGE = 2 ** 53 - 1

/** A request trace built in code: [kind, id, size] rows on stream 0, one a microsecond. */
function traceOf(rows: [kind: number, id: number, size: number][]): RequestTrace {
  const events = allocateEvents(rows.length)
  rows.forEach(([kind, id, size], i) => {
    events.kind[i] = kind
    events.id[i] = id
    events.size[i] = size
    events.time[i] = i * 1000
    events.stack[i] = -1
    events.tag[i] = -1
  })
  return {
    meta: { source: 'synthetic', origin: 'test', warnings: [], properties: {} },
    events,
    tables: { streams: ['0'], frames: [], stacks: [], tags: [], markers: [] },
  } as unknown as RequestTrace
}

/** A few hundred requests of 1 to 64 MiB, half of them freed as they go. */
function ordinaryRows(): [number, number, number][] {
  const rows: [number, number, number][] = []
  for (let id = 0; id < 300; id++) {
    rows.push([EventKind.alloc, id, (1 + ((id * 37) % 64)) * MiB])
    if (id % 2 === 1) rows.push([EventKind.free, id - 1, 0])
  }
  return rows
}

const quick = { search: false, concurrency: 2 } as const

describe('what-if grid: strategy rows sized by the one rule', () => {
  it('sizes the buddy and vmm_growable rows of the grid as sizedForTrace does for the app and the CLI', async () => {
    const input = await openInput(join(import.meta.dirname, '../../../fixtures/pytorch/synthetic.pickle'))
    const result = await runWhatif(input, quick)
    for (const strategy of ['buddy', 'vmm_growable']) {
      const row = result.rows.find((r) => r.kind === 'strategy' && r.strategy === strategy)
      assert.ok(row, `a ${strategy} row`)
      const rule = sizedForTrace({ label: strategy, strategy, params: {} }, input.trace).spec.params
      assert.deepEqual(row.params, rule, `${strategy}: the rule's sizes`)
    }
    assert.deepEqual(result.leftOut, [])
  })

  it('runs the whole grid on a trace whose recorded out-of-memory asked for 2^53 - 1 B', async () => {
    const trace = traceOf([...ordinaryRows(), [EventKind.oom, 0, HUGE]])
    const result = await runWhatif({ trace, strategies: [] }, quick)
    const buddy = result.rows.find((r) => r.strategy === 'buddy')
    assert.ok(buddy, 'the buddy row is there')
    // Sized from the requests the program made: the out-of-memory's request fails in every row.
    assert.deepEqual(buddy.params, sizedForTrace({ label: 'buddy', strategy: 'buddy', params: {} }, traceOf(ordinaryRows())).spec.params)
    assert.ok(Number(buddy.params['pool_size']) < 2 ** 32)
    for (const r of result.rows) {
      // The static plan is a bound, not an allocator: past the device, the blocks it placed above
      // the device's end fail, which need not be the out-of-memory's request among the first failures.
      if (r.strategy === 'planned') assert.ok(r.failures > 0, 'the plan passes the device')
      else assert.equal(r.oomReproduced, 1, `${r.label} fails the 2^53 - 1 B request`)
    }
    assert.deepEqual(result.leftOut, [])
  })

  it('leaves out, with the reason, the rows no pool can hold a 2^53 - 1 B block in, and runs the rest', async () => {
    const trace = traceOf([...ordinaryRows(), [EventKind.alloc, 300, HUGE], [EventKind.free, 300, 0]])
    const result = await runWhatif({ trace, strategies: [] }, quick)
    const left = new Map(result.leftOut.map((r) => [r.strategy, r.reason]))
    assert.match(left.get('buddy') ?? '', /largest request \(9007199254740991 B\).*2\^52/)
    assert.match(left.get('vmm_growable') ?? '', /peak requested \(\d+ B\).*2\^52/)
    assert.ok(!result.rows.some((r) => r.strategy === 'buddy' || r.strategy === 'vmm_growable'), 'left out of the rows')
    assert.ok(
      result.rows.some((r) => r.strategy === 'cuda_malloc'),
      'the other rows ran',
    )
    assert.ok(result.rows.filter((r) => r.kind === 'pytorch').length >= 20)
  })

  it('searches each smallest fitting limit in a bounded number of replays, whatever the sizes', async () => {
    // A trace of blocks up to 2^51 B beside small ones, on a device of 2^53 - 1 B.
    const rows: [number, number, number][] = ordinaryRows()
    rows.push([EventKind.alloc, 300, 2 ** 51], [EventKind.alloc, 301, 3 * 2 ** 49], [EventKind.free, 300, 0], [EventKind.free, 301, 0])
    const result = await runWhatif({ trace: traceOf(rows), strategies: [] }, { concurrency: 2, deviceBytes: HUGE })
    // A run under no limit, at most five to bracket, at most eight halvings (1 % of the top).
    for (const r of result.rows) assert.ok(r.replays <= 14, `${r.label}: ${r.replays} replays`)
    assert.ok(result.rows.some((r) => r.smallestFittingBytes !== null && r.smallestFittingBytes >= 2 ** 51))
  })

  it('prints the rows it leaves out, with the reason, in the text and the JSON of `vramscope whatif`, and `replay` says why it could not size', async () => {
    // A snapshot with a block of 2^52 + 512 B (the largest a pool of 2^52 B cannot hold).
    const dir = mkdtempSync(join(tmpdir(), 'vramscope-sizing-'))
    try {
      const big = 2 ** 52 + 512
      const entry = (action: string, addr: number, size: number, time: number): object => ({ action, addr, size, stream: 0, time_us: time, frames: [] })
      const file = join(dir, 'big-block.json')
      writeFileSync(
        file,
        JSON.stringify({
          segments: [],
          device_traces: [
            [
              entry('alloc', 2 ** 30, MiB, 1),
              entry('alloc', 2 ** 40, big, 2),
              entry('free_requested', 2 ** 40, big, 3),
              entry('free_requested', 2 ** 30, MiB, 4),
            ],
          ],
        }),
      )
      const text = await vramscope(['whatif', '--no-search', file])
      assert.equal(text.code, 0, shown(text))
      assert.match(text.stdout, /^left out: buddy allocator: a pool that holds the largest request \(4503599627371008 B\)/m, shown(text))
      const json = await vramscope(['whatif', '--no-search', '--json', file])
      assert.equal(json.code, 0, shown(json))
      const out = JSON.parse(json.stdout) as { leftOut: { strategy: string; reason: string }[]; configs: { strategy: string }[] }
      // vmm_growable too: the peak (2^52 B and 1 MiB + 512 B) passes the largest reservation.
      assert.deepEqual(
        out.leftOut.map((r) => r.strategy),
        ['vmm_growable', 'buddy'],
      )
      assert.ok(
        out.configs.some((r) => r.strategy === 'cuda_malloc'),
        'the other rows ran',
      )
      // `replay -s buddy` says why it could not size the pools, and replays with buddy's own.
      const replay = await vramscope(['replay', '-s', 'buddy', file])
      assert.equal(replay.code, 0, shown(replay))
      assert.match(
        replay.stdout,
        /^buddy: not sized from the trace, a pool that holds the largest request \(4503599627371008 B\).*; replayed with its own defaults$/m,
        shown(replay),
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
