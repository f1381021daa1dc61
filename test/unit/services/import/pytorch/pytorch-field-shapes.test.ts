// The PyTorch snapshot importer on shapes other writers and odd recordings produce, each built
// here (never copied from anyone's file): frees written as `free_completed` alone (as the test
// snapshot of other viewers is generated), and sizes, addresses and streams past what the trace
// format stores. Both pickle lanes and the JSON form give the same answer.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { parsePytorchSnapshot, type PytorchImport } from '../../../../../src-main/services/import/pytorch/index.ts'
import { SnapshotImportError } from '../../../../../src-main/services/import/pytorch/snapshot-error.ts'
import { readTrace, writeTrace } from '../../../../../src-main/services/trace/file.ts'
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

describe('sizes, addresses and streams past what a trace stores: refused at import, naming the file, the field and the value', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'vramscope-field-shapes-'))
  after(() => rmSync(scratch, { recursive: true, force: true }))
  const alloc = (fields: Record<string, PickleInput>): Record<string, PickleInput> => ({
    action: 'alloc',
    addr: BASE,
    size: 512,
    stream: 0,
    time_us: 1,
    ...fields,
  })
  const segment = (fields: Record<string, PickleInput>): Record<string, PickleInput> => ({
    device: 0,
    address: BASE,
    total_size: 2 * MiB,
    stream: 0,
    segment_type: 'large',
    blocks: [],
    ...fields,
  })
  const cases: [string, Record<string, PickleInput>, RegExp][] = [
    [
      'an alloc of 2^53 - 1 bytes (its 512-byte block is 2^53)',
      { segments: [], device_traces: [[alloc({ size: 2 ** 53 - 1 })]] },
      /device_traces\[0\]\[0\]: 'size' of a block must be at most 9007199254740480 .*got 9007199254740991/,
    ],
    [
      'a free_completed alone of 2^53 - 1 bytes',
      { segments: [], device_traces: [[{ action: 'free_completed', addr: BASE, size: 2 ** 53 - 1, stream: 0, time_us: 1 }]] },
      /'size' of a block must be at most .*got 9007199254740991/,
    ],
    [
      'a free_requested of a block the ring dropped, 2^53 - 1 bytes',
      { segments: [], device_traces: [[{ action: 'free_requested', addr: BASE, size: 2 ** 53 - 1, stream: 0, time_us: 1 }]] },
      /'size' of a block must be at most .*got 9007199254740991/,
    ],
    [
      'an alloc of 2^53 bytes',
      { segments: [], device_traces: [[alloc({ size: 2n ** 53n })]] },
      /'size' must be a non-negative integer below 2\^53, got 9007199254740992n/,
    ],
    [
      'an alloc at address 2^53',
      { segments: [], device_traces: [[alloc({ addr: 2n ** 53n })]] },
      /'addr' must be a non-negative integer below 2\^53, got 9007199254740992n/,
    ],
    [
      'an alloc on stream 2^53',
      { segments: [], device_traces: [[alloc({ stream: 2n ** 53n })]] },
      /'stream' must be a non-negative integer below 2\^53, got 9007199254740992n/,
    ],
    ['an alloc on stream 2^64 + 5', { segments: [], device_traces: [[alloc({ stream: 2n ** 64n + 5n })]] }, /'stream' must be .*got 18446744073709551621n/],
    ['an alloc on stream -1', { segments: [], device_traces: [[alloc({ stream: -1 })]] }, /'stream' must be a non-negative integer below 2\^53, got -1/],
    [
      'a listed segment on stream 2^53',
      { segments: [segment({ stream: 2n ** 53n })], device_traces: [[]] },
      /segments \(device 0\): a segment's 'stream' must be .*got 9007199254740992n/,
    ],
    [
      'an alloc at time_us 2^62',
      { segments: [], device_traces: [[alloc({ time_us: 2n ** 62n })]] },
      /'time_us' must be a number of microseconds below 2\^53, got 4611686018427387904n/,
    ],
    [
      'a listed segment on stream -7',
      { segments: [segment({ stream: -7 })], device_traces: [[]] },
      /segments \(device 0\): a segment's 'stream' must be .*got -7/,
    ],
  ]
  for (const [name, snapshot, problem] of cases)
    it(`${name}: a SnapshotImportError in both pickle lanes`, () => {
      for (const generalPathOnly of [false, true])
        assert.throws(
          () => parsePytorchSnapshot(pickle(snapshot), 'huge.pickle', { generalPathOnly }),
          (e: unknown) => e instanceof SnapshotImportError && /^huge\.pickle: /.test(e.message) && problem.test(e.message),
          `generalPathOnly: ${generalPathOnly}`,
        )
    })

  it('the largest block, address and stream a trace stores are imported and written as they are', async () => {
    const snapshot = {
      segments: [],
      device_traces: [
        [
          { action: 'segment_alloc', addr: 0, size: 2 ** 53 - 512, stream: 2 ** 53 - 1, time_us: 1 },
          alloc({ addr: 0, size: 2 ** 53 - 512, stream: 2 ** 53 - 1, time_us: 2 }),
          alloc({ addr: 2 ** 53 - 1, size: 1, stream: 0, time_us: 3 }),
        ],
      ],
    }
    for (const result of everyLane(snapshot, 'largest')) {
      const path = join(scratch, 'largest.vramscope')
      await writeTrace(path, result.trace, result.recorded)
      const back = await readTrace(path)
      assert.deepEqual(Array.from(back.trace.events.size), [2 ** 53 - 512, 1])
      const layout = back.strategies[0]!.layout!
      assert.deepEqual(Array.from(layout.size), [2 ** 53 - 512, 2 ** 53 - 512, 512])
      assert.deepEqual(Array.from(layout.stream), [2 ** 53 - 1, 2 ** 53 - 1, 0])
      assert.deepEqual(Array.from(layout.address), [0n, 0n, 2n ** 53n - 1n])
    }
  })
})

describe('a 2023-format snapshot (PyTorch 2.0): blocks carry a history list, not requested_size and frames', () => {
  // One 8 MiB segment tiled by blocks without addresses, as PyTorch 2.0 wrote them: each block's
  // `history` lists the allocations made in it, the newest first (memory_viz reads history[0]).
  const frame = (name: string, line: number): Record<string, PickleInput> => ({ name, filename: 'train.py', line })
  const snapshot = {
    segments: [
      {
        device: 0,
        address: BASE,
        total_size: 8 * MiB,
        stream: 0,
        segment_type: 'large',
        allocated_size: 7 * MiB,
        active_size: 7 * MiB,
        blocks: [
          { size: 2 * MiB, state: 'active_allocated', history: [{ addr: BASE, real_size: 1_500_001, frames: [frame('forward', 10), frame('main', 1)] }] },
          // Freed: its history stays, but nothing of it is live.
          { size: MiB, state: 'inactive', history: [{ addr: BASE + 2 * MiB, real_size: 700_000, frames: [frame('old', 3)] }] },
          {
            size: 3 * MiB,
            state: 'active_allocated',
            history: [
              { addr: BASE + 3 * MiB, real_size: 2_999_808, frames: [frame('backward', 20)] },
              { addr: BASE + 3 * MiB, real_size: 1_000_000, frames: [frame('earlier', 5)] },
            ],
          },
          // A history entry recorded without its context: the size still counts, no stack.
          { size: 2 * MiB, state: 'active_allocated', history: [{ addr: BASE + 6 * MiB, real_size: 1_048_000 }] },
        ],
      },
    ],
    device_traces: [[{ action: 'snapshot', addr: 0, size: 0, stream: 0 }]],
  }

  it("counts each live block's history[0].real_size as its request and its frames as its stack, as memory_viz does, in every lane", () => {
    for (const result of everyLane(snapshot, 'format-2023')) {
      const { events, tables } = result.trace
      const allocs = [...events.kind.keys()].filter((i) => events.kind[i] === EventKind.alloc)
      assert.deepEqual(
        allocs.map((i) => events.size[i]),
        [1_500_001, 2_999_808, 1_048_000],
        'the requests are the newest history entries, not the block sizes',
      )
      const stackNames = allocs.map((i) => (events.stack[i]! < 0 ? null : Array.from(tables.stacks[events.stack[i]!]!, (f) => tables.frames[f]!.name)))
      assert.deepEqual(stackNames, [['forward', 'main'], ['backward'], null], "each block's stack is what allocated it")
      const layout = result.recorded[0]!.layout!
      const allocRows = [...layout.op.keys()].filter((i) => layout.op[i] === LayoutOp.alloc)
      assert.deepEqual(
        allocRows.map((i) => [layout.size[i], layout.requested[i]]),
        [
          [2 * MiB, 1_500_001],
          [3 * MiB, 2_999_808],
          [2 * MiB, 1_048_000],
        ],
        'the recorded layout keeps the block sizes and the requests',
      )
    }
  })
})
