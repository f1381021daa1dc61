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
import { unpickle } from '../../../../../src-main/services/import/pytorch/pickle-reader.ts'
import { field } from '../../../../../src-main/services/import/pytorch/snapshot-values.ts'
import { decodeTrace, encodeTrace } from '../../../../../src-main/services/trace/file.ts'

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

describe('CUDA-graph private pools (cuda_graph__default: a training graph in pool (1, 0), an inference graph in (2, 0))', () => {
  const name = 'cuda_graph__default'

  it('names the private pools and gives each alloc and its free the pool of its segment', () => {
    const { trace } = imported(name)
    assert.deepEqual(trace.tables.pools, ['(1, 0)', '(2, 0)'])
    assert.equal(trace.meta.properties['pytorch.pools'], '2')
    const { kind, id, pool } = trace.events
    assert.ok(pool, 'a pool column')
    const allocPool = new Map<number, number>()
    const counts = [0, 0, 0]
    kind.forEach((k, i) => {
      if (k === EventKind.alloc) {
        allocPool.set(id[i]!, pool[i]!)
        counts[pool[i]!]!++
      } else if (k === EventKind.free) assert.equal(pool[i], allocPool.get(id[i]!), `the free at row ${i} is in its alloc's pool`)
      else assert.equal(pool[i], 0)
    })
    assert.deepEqual(counts, [132, 22, 4])
    // Segments freed before the end have no known pool: said, and counted.
    assert.equal(trace.meta.warnings.length, 1)
    assert.match(
      trace.meta.warnings[0]!,
      /^10 segments were freed before the snapshot was taken, so their pool is unknown .*: their 66 allocations count as the default pools$/,
    )
  })

  it('puts every block live at the end in the pool its listed segment gives', () => {
    const { trace } = imported(name)
    // The snapshot read independently: allocs numbered in order (this trace lost nothing), the blocks live at the end by address.
    const root = unpickle(bytes(name))
    const events = field(root as never, 'device_traces') as unknown[][]
    const liveById = new Map<number, number>()
    const idAt = new Map<number, number>()
    let next = 0
    for (const e of events[0]!) {
      const action = field(e as never, 'action')
      const addr = field(e as never, 'addr') as number
      if (action === 'alloc') {
        idAt.set(addr, next)
        liveById.set(next++, addr)
      } else if (action === 'free_requested') liveById.delete(idAt.get(addr)!)
    }
    const poolAt = new Map<number, string>()
    for (const seg of field(root as never, 'segments') as unknown[]) {
      const p = field(seg as never, 'segment_pool_id') as number[]
      for (const block of field(seg as never, 'blocks') as unknown[])
        if (field(block as never, 'state') === 'active_allocated') poolAt.set(field(block as never, 'address') as number, `(${p[0]}, ${p[1]})`)
    }
    const names = ['(0, 0)', ...trace.tables.pools!]
    const { kind, id, pool } = trace.events
    let checked = 0
    kind.forEach((k, i) => {
      if (k !== EventKind.alloc || !liveById.has(id[i]!)) return
      assert.equal(names[pool![i]!], poolAt.get(liveById.get(id[i]!)!), `block ${id[i]}`)
      checked++
    })
    assert.equal(checked, poolAt.size)
    assert.ok([...poolAt.values()].filter((p) => p !== '(0, 0)').length > 0)
  })

  it('writes the pools to a trace file and reads them back', () => {
    const { trace } = imported(name)
    const read = decodeTrace(new Uint8Array(Buffer.concat(encodeTrace(trace))), 'pools.vramscope')
    assert.deepEqual(read.trace.tables.pools, trace.tables.pools)
    assert.deepEqual(Array.from(read.trace.events.pool!), Array.from(trace.events.pool!))
  })

  it('leaves out the column and the table where no segment is in a private pool', () => {
    for (const other of ['mlp_fragment__msplit128', 'multistream__expandable', 'oom_fraction__default']) {
      const { trace } = imported(other)
      assert.equal(trace.events.pool, undefined, other)
      assert.equal(trace.tables.pools, undefined, other)
      assert.equal(trace.meta.properties['pytorch.pools'], undefined, other)
    }
  })

  it('finds pools of expandable segments by range, mappings split by unmaps, and segments from before the first event', () => {
    const ev = (action: string, addr: number, size: number, t: number) => ({ action, addr, size, stream: 0, time_us: t })
    const MiB = 1 << 20
    const base = 64 * MiB
    const snapshot = {
      device_traces: [
        [
          ev('segment_map', base, 4 * MiB, 1), // pool (3, 0), mapped in one piece
          ev('alloc', base + 3 * MiB, 512, 2), // block 0: in the part unmapped below, still the same mapping: (3, 0)
          ev('alloc', base, 512, 3), // block 1: (3, 0)
          ev('free_requested', base + 3 * MiB, 512, 4),
          ev('free_completed', base + 3 * MiB, 512, 5),
          ev('segment_unmap', base + 2 * MiB, 2 * MiB, 6), // the top half goes; what is left is the listed segment
          ev('alloc', 8 * MiB, 512, 7), // block 2: a segment reserved before the first event, listed in (0, 0)
          ev('alloc', 32 * MiB, 512, 8), // block 3: a segment freed below without being seen reserved: unknown
          ev('free_requested', 32 * MiB, 512, 9),
          ev('free_completed', 32 * MiB, 512, 10),
          ev('segment_free', 32 * MiB, 2 * MiB, 11),
        ],
      ],
      segments: [
        { device: 0, address: base, total_size: 2 * MiB, stream: 0, segment_type: 'small', segment_pool_id: [3, 0], is_expandable: true, blocks: [] },
        { device: 0, address: 8 * MiB, total_size: 2 * MiB, stream: 0, segment_type: 'small', segment_pool_id: [0, 0], is_expandable: false, blocks: [] },
      ],
    }
    const { trace } = parsePytorchSnapshot(new TextEncoder().encode(JSON.stringify(snapshot)), 'pools.json')
    assert.deepEqual(trace.tables.pools, ['(3, 0)'])
    const { kind, id, pool } = trace.events
    const byBlock: number[] = []
    kind.forEach((k, i) => k === EventKind.alloc && (byBlock[id[i]!] = pool![i]!))
    assert.deepEqual(byBlock, [1, 1, 0, 0])
    assert.match(
      trace.meta.warnings.find((w) => w.includes('pool'))!,
      /^1 segments were freed .*: their 1 allocations count as the default pools$/,
    )
  })
})
