// The PyTorch snapshot importer on the small real snapshots of test/fixtures/pytorch/real/ (PyTorch
// 2.11 on an H100, each with the stats.json of its run): out-of-memory events, CUDA-graph private
// pools, expandable segments.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { parsePytorchSnapshot, type PytorchImport, type PytorchImportOptions } from '../../../../../src-main/services/import/pytorch/index.ts'
import { LayoutOp } from '../../../../../src-shared/layout.ts'
import { EventKind } from '../../../../../src-main/services/trace/model.ts'

const dir = join(import.meta.dirname, '..', '..', '..', '..', 'fixtures', 'pytorch', 'real')
const bytes = (name: string) => new Uint8Array(readFileSync(join(dir, `${name}.pickle`)))
const stats = (name: string) => JSON.parse(readFileSync(join(dir, `${name}.stats.json`), 'utf8')) as { memory_stats: Record<string, number>; conf: string }

/** The import on both lanes of the pickle reader, which must agree. */
function imported(name: string, options: PytorchImportOptions = {}): PytorchImport {
  const fast = parsePytorchSnapshot(bytes(name), `${name}.pickle`, options)
  const general = parsePytorchSnapshot(bytes(name), `${name}.pickle`, { ...options, generalPathOnly: true })
  assert.deepEqual(fast.trace, general.trace)
  return fast
}

function rowsOf(kind: Uint8Array, value: number): number[] {
  const out: number[] = []
  kind.forEach((k, i) => k === value && out.push(i))
  return out
}

describe('out-of-memory events (oom_fraction: growing tensors under a 2 GiB memory fraction)', () => {
  for (const name of ['oom_fraction__default', 'oom_fraction__expandable']) {
    it(`${name}: imports the oom entry (device_free, no addr) as an oom event with its size, stream and stack`, () => {
      const result = imported(name)
      const { events, tables, meta } = result.trace
      const ooms = rowsOf(events.kind, EventKind.oom)
      assert.equal(ooms.length, 1)
      assert.equal(rowsOf(events.kind, EventKind.alloc).length, stats(name).memory_stats['allocation.all.allocated'])
      const row = ooms[0]!
      assert.equal(events.size[row], 507092992) // "Tried to allocate 484.00 MiB"
      assert.equal(tables.streams[events.stream[row]!], '0')
      assert.ok(events.stack[row]! >= 0, 'the oom keeps its stack')
      assert.ok(tables.stacks[events.stack[row]!]!.length > 0)
      // The program caught it and went on: events after it.
      assert.ok(row < events.kind.length - 1)
      assert.equal(meta.properties['pytorch.oom.device_free'], name.endsWith('default') ? '82636242944' : '77704724480')
      const layout = result.recorded[0]!.layout!
      const failures = rowsOf(layout.op, LayoutOp.failure)
      assert.equal(failures.length, 1)
      assert.equal(layout.size[failures[0]!], 507092992)
    })
  }

  it('gives device_free of every oom in event order, an empty item where an entry has none, and reads an older addr in its place', () => {
    const event = (action: string, fields: Record<string, unknown>) => ({ action, size: 1024, stream: 0, time_us: 0, ...fields })
    const snapshot = {
      segments: [],
      device_traces: [
        [
          event('oom', { device_free: 7, time_us: 1 }),
          event('oom', { time_us: 2 }),
          event('oom', { addr: 9, time_us: 3 }),
          event('oom', { device_free: 11, addr: 5, time_us: 4 }),
        ],
      ],
    }
    const result = parsePytorchSnapshot(new TextEncoder().encode(JSON.stringify(snapshot)), 'ooms.json')
    assert.equal(result.trace.meta.properties['pytorch.oom.device_free'], '7,,9,11')
    assert.equal(rowsOf(result.trace.events.kind, EventKind.oom).length, 4)
    const none = parsePytorchSnapshot(new TextEncoder().encode(JSON.stringify({ device_traces: [[event('alloc', { addr: 0 })]] })), 'none.json')
    assert.equal(none.trace.meta.properties['pytorch.oom.device_free'], undefined)
  })

  it('still refuses an oom whose device_free is not a non-negative integer', () => {
    const snapshot = { device_traces: [[{ action: 'oom', device_free: 'x', size: 1, stream: 0, time_us: 0 }]] }
    assert.throws(() => parsePytorchSnapshot(new TextEncoder().encode(JSON.stringify(snapshot)), 'bad.json'), /'device_free' must be a non-negative integer/)
  })
})
