// `vramscope whatif --json`'s floor and the text that leads with it: on a hand-built trace whose
// floor and best plan are worked out by hand, and on a real PyTorch snapshot, whose floor is counted
// here from its request events and the static plan held to within 3 % of it.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { openInput } from '../../src-main/services/import/open-input.ts'
import { writeTrace } from '../../src-main/services/trace/file.ts'
import { allocateEvents, EventKind, type RequestTrace } from '../../src-main/services/trace/model.ts'
import { fixture, vramscope, vramscopeJson } from '../helpers/cli.ts'

interface Floor {
  peakLiveBytes: number
  peakLiveRoundedBytes: number
  plannedBytes: number
  plannedMs: number
}
interface WhatifJson {
  floor: Floor
  configs: { strategy: string; label: string; rank: number; notRanked: string | null; peakReserved: number; smallestFittingBytes: number | null }[]
}

const dir = mkdtempSync(join(tmpdir(), 'vramscope-floor-'))
after(() => rmSync(dir, { recursive: true, force: true }))

/** allocs (id, bytes) and frees (id) in order, one stream. */
function handTrace(rows: ([number, number] | [number])[]): RequestTrace {
  const e = allocateEvents(rows.length)
  rows.forEach((r, i) => {
    e.kind[i] = r.length === 2 ? EventKind.alloc : EventKind.free
    e.id[i] = r[0]
    if (r.length === 2) e.size[i] = r[1]
    e.time[i] = i * 1000
  })
  return { meta: { source: 'synthetic', warnings: [], properties: {} }, events: e, tables: { streams: ['0'], frames: [], stacks: [], tags: [], markers: [] } }
}

describe('vramscope whatif: the floor', () => {
  it('on a hand-built trace: the peaks as requested and as rounded, and a plan that meets the floor', async () => {
    // A 1000 B over events [0, 2), B 3000 B over [1, 5), C 600 B over [3, 6), D 100 B over [4, 7).
    // Requested live peaks at 4000 B (A + B); rounded to 512 B, 1024 + 3072 + 1024 + 512 = 4608 B
    // (B + C + D). The plan puts B at 0, A and then C above it, D above C: 4608 B, the floor.
    const file = join(dir, 'hand.vramscope')
    await writeTrace(file, handTrace([[0, 1000], [1, 3000], [0], [2, 600], [3, 100], [1], [2], [3]]))
    const out = await vramscopeJson<WhatifJson>(['whatif', file, '--no-search'])
    assert.deepEqual({ ...out.floor, plannedMs: 0 }, { peakLiveBytes: 4000, peakLiveRoundedBytes: 4608, plannedBytes: 4608, plannedMs: 0 })
    assert.ok(Number.isSafeInteger(out.floor.plannedMs) && out.floor.plannedMs >= 0)
    // The plan's row stands beside the ranking as a bound, not an allocator.
    const planned = out.configs.find((c) => c.strategy === 'planned')
    assert.ok(planned, 'a row for the static plan')
    assert.equal(planned.rank, 0)
    assert.match(planned.notRanked ?? '', /a bound, not an allocator/)
    assert.equal(planned.peakReserved, 4608)
    assert.equal(planned.smallestFittingBytes, 4608)
  })

  it('on a real snapshot: the floor counted from its events, the plan within 3 % of it, the text leading with it', async () => {
    const file = fixture('pytorch/transformer_varseq.pickle')
    const { trace } = await openInput(file)
    const e = trace.events
    assert.ok(!e.kind.includes(EventKind.oom), 'a recording with no out-of-memory: its requests are the rows')
    // Counted here, apart from services/analysis/floor.ts: a map of the live blocks.
    const live = new Map<number, number>()
    let requested = 0
    let rounded = 0
    let peakRequested = 0
    let peakRounded = 0
    for (let i = 0; i < e.kind.length; i++) {
      if (e.kind[i] === EventKind.alloc && e.size[i]! > 0) {
        live.set(e.id[i]!, e.size[i]!)
        requested += e.size[i]!
        rounded += Math.max(512, Math.ceil(e.size[i]! / 512) * 512)
      } else if (e.kind[i] === EventKind.free && live.has(e.id[i]!)) {
        const size = live.get(e.id[i]!)!
        live.delete(e.id[i]!)
        requested -= size
        rounded -= Math.max(512, Math.ceil(size / 512) * 512)
      }
      peakRequested = Math.max(peakRequested, requested)
      peakRounded = Math.max(peakRounded, rounded)
    }
    const out = await vramscopeJson<WhatifJson>(['whatif', file, '--no-search'])
    assert.equal(out.floor.peakLiveBytes, peakRequested)
    assert.equal(out.floor.peakLiveRoundedBytes, peakRounded)
    assert.ok(out.floor.plannedBytes >= peakRounded, `planned ${out.floor.plannedBytes} B under the floor ${peakRounded} B`)
    assert.ok(out.floor.plannedBytes <= peakRounded * 1.03, `planned ${out.floor.plannedBytes} B is more than 3 % above the floor ${peakRounded} B`)
    const text = await vramscope(['whatif', file, '--no-search'])
    assert.equal(text.code, 0, text.stderr)
    const first = text.stdout.split('\n')[0]!
    assert.match(
      first,
      /^[\d.]+ [KMG]iB reserved \(the recorded settings\); [\d.]+ [KMG]iB live at the peak: [\d.]+ [KMG]iB, \d+ %, lost to fragmentation and caching/,
    )
    assert.match(first, /a static plan of every block's lifetime reserves [\d.]+ [KMG]iB, \d+ % above it/)
  })
})
