// The PyTorch snapshot importer on shapes other writers and odd recordings produce, each built
// here (never copied from anyone's file): frees written as `free_completed` alone (as the test
// snapshot of other viewers is generated), and sizes, addresses and streams past what the trace
// format stores. Both pickle lanes and the JSON form give the same answer.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { parsePytorchSnapshot, type PytorchImport } from '../../../../../src-main/services/import/pytorch/index.ts'
import { EventKind } from '../../../../../src-main/services/trace/model.ts'
import { LayoutOp, type LayoutTrace } from '../../../../../src-shared/layout.ts'
import { pickle, type PickleInput } from '../../../../helpers/pickle-writer.ts'

const MiB = 2 ** 20
const BASE = 0x7f00_0000_0000

/** The three ways in: the pickle's fast lane, its general lane, and the same snapshot as JSON. */
function everyLane(snapshot: Record<string, PickleInput>, name: string): PytorchImport[] {
  const bytes = pickle(snapshot)
  return [
    parsePytorchSnapshot(bytes, `${name}.pickle`),
    parsePytorchSnapshot(bytes, `${name}.pickle`, { generalPathOnly: true }),
    parsePytorchSnapshot(new TextEncoder().encode(JSON.stringify(snapshot)), `${name}.json`),
  ]
}

/** Bytes live (allocated, not yet freed) in the layout at its end, and their peak. */
function liveBytes(layout: LayoutTrace): { end: number; peak: number } {
  let live = 0
  let peak = 0
  for (let i = 0; i < layout.op.length; i++) {
    const op = layout.op[i]
    if (op === LayoutOp.alloc) live += layout.size[i]!
    else if (op === LayoutOp.free || op === LayoutOp.freePending) live -= layout.size[i]!
    peak = Math.max(peak, live)
  }
  return { end: live, peak }
}

describe('frees written as free_completed alone (no free_requested), as other viewers generate their test snapshot', () => {
  // One 64 MiB segment; 40 rounds of: allocate 8 blocks of 1 MiB, free them (free_completed only).
  const events: PickleInput[] = [{ action: 'segment_alloc', addr: BASE, size: 64 * MiB, stream: 0, time_us: 1 }]
  let t = 2
  for (let round = 0; round < 40; round++) {
    for (let b = 0; b < 8; b++) events.push({ action: 'alloc', addr: BASE + b * MiB, size: MiB, stream: 0, time_us: t++ })
    for (let b = 0; b < 8; b++) events.push({ action: 'free_completed', addr: BASE + b * MiB, size: MiB, stream: 0, time_us: t++ })
  }
  const snapshot = {
    segments: [
      {
        device: 0,
        address: BASE,
        total_size: 64 * MiB,
        stream: 0,
        segment_type: 'large',
        allocated_size: 0,
        active_size: 0,
        blocks: [{ address: BASE, size: 64 * MiB, requested_size: 0, state: 'inactive' }],
      },
    ],
    device_traces: [events],
  }

  it('counts each lone free_completed as the free of its block, as memory_viz does: nothing is live at the end, in every lane', () => {
    for (const result of everyLane(snapshot, 'free-completed-only')) {
      const kinds = Array.from(result.trace.events.kind)
      assert.equal(kinds.filter((k) => k === EventKind.alloc).length, 320)
      assert.equal(kinds.filter((k) => k === EventKind.free).length, 320, 'one request free per free_completed')
      const layout = result.recorded[0]!.layout!
      const { end, peak } = liveBytes(layout)
      assert.equal(end, 0, 'no bytes live at the end')
      assert.equal(peak, 8 * MiB, 'the peak is one round of 8 blocks')
      assert.equal(result.overflow.synthesizedBlocks, 0, 'no block is taken for one the recording lost')
    }
  })
})
