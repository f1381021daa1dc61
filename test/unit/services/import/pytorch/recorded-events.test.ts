// Each row of a snapshot's recorded layout carries the request event it belongs to from the import
// on (LayoutTrace.event): the importer knows it, so nothing guesses it back from timestamps. On
// small snapshots where times tie or a release makes room for the next allocation, on every real
// snapshot bundled, and through a trace file and the app's replay bundle.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { parsePytorchSnapshot, type PytorchImport } from '../../../../../src-main/services/import/pytorch/index.ts'
import { recordedOnEvents } from '../../../../../src-main/services/replay/replay-input.ts'
import { readTrace, writeTrace } from '../../../../../src-main/services/trace/file.ts'
import { EventKind } from '../../../../../src-main/services/trace/model.ts'
import { LayoutOp } from '../../../../../src-shared/layout.ts'

const MiB = 1 << 20
const SEG = 0x7f0000000000
const fixtures = join(import.meta.dirname, '..', '..', '..', '..', 'fixtures', 'pytorch')

function snapshot(events: Record<string, unknown>[], segments: Record<string, unknown>[] = []): PytorchImport {
  const json = JSON.stringify({ segments, device_traces: [events.map((e) => ({ stream: 0, frames: [], ...e }))] })
  return parsePytorchSnapshot(new TextEncoder().encode(json), 'events.json')
}

/** Every row's event is one its op can belong to: an alloc at its alloc, a free at a free, a failure at an oom. */
function checkRows(result: PytorchImport, file: string): number {
  const e = result.trace.events
  let checked = 0
  for (const s of result.recorded) {
    const l = s.layout!
    assert.ok(l.event, `${file}: ${s.name} carries its events`)
    assert.equal(l.event.length, l.op.length)
    for (let r = 0; r < l.op.length; r++) {
      const at: number = l.event[r]!
      assert.ok(at < e.kind.length, `${file} row ${r}: event ${at} of ${e.kind.length}`)
      if (l.time[r] === 0) continue // the window-open stand-ins, at event 0
      const op = l.op[r]
      if (op === LayoutOp.alloc) {
        assert.equal(e.kind[at], EventKind.alloc, `${file} row ${r}: an alloc at an alloc`)
        assert.equal(e.size[at], l.requested[r], `${file} row ${r}: of its size`)
      } else if (op === LayoutOp.free) {
        assert.equal(e.kind[at], EventKind.free, `${file} row ${r}: a free at a free`)
      } else if (op === LayoutOp.failure) {
        assert.equal(e.kind[at], EventKind.oom, `${file} row ${r}: a failure at its oom`)
      }
      checked++
    }
  }
  return checked
}

describe("a recorded layout's rows on their request events", () => {
  it('puts a free_completed at its free where an alloc shares its time (a time lookup takes the alloc)', () => {
    const result = snapshot([
      { action: 'segment_alloc', addr: SEG, size: 2 * MiB, time_us: 1 },
      { action: 'alloc', addr: SEG, size: 512, time_us: 1 },
      { action: 'alloc', addr: SEG + 512, size: 512, time_us: 2 },
      { action: 'free_requested', addr: SEG, size: 512, time_us: 3 },
      { action: 'alloc', addr: SEG + 1024, size: 512, time_us: 4 },
      { action: 'free_completed', addr: SEG, size: 512, time_us: 5 },
      { action: 'alloc', addr: SEG + 1536, size: 1024, time_us: 5 },
    ])
    const l = result.recorded[0]!.layout!
    const e = result.trace.events
    const completed = l.op.indexOf(LayoutOp.freeCompleted)
    assert.ok(completed >= 0, 'the free waited for its stream')
    assert.equal(e.kind[l.event![completed]!], EventKind.free)
    assert.equal(e.time[l.event![completed]!], e.time[e.kind.lastIndexOf(EventKind.alloc)], 'the free and the next alloc share a time')
    assert.deepEqual(
      Array.from(l.op, (op, r) => [op, l.event![r]]),
      [
        [LayoutOp.regionReserve, 0],
        [LayoutOp.alloc, 0],
        [LayoutOp.alloc, 1],
        [LayoutOp.freePending, 1],
        [LayoutOp.alloc, 2],
        [LayoutOp.freeCompleted, 3],
        [LayoutOp.alloc, 4],
      ],
      'the reserve counts at the alloc it was for; the pending free after the event before it',
    )
    const byTime = recordedOnEvents(result.trace, { ...result.recorded[0]!, layout: { ...l, event: undefined } }).layout!.event
    assert.equal(byTime[completed], 4, 'placed by time, the free_completed lands on the alloc of the same time')
  })

  it('puts a segment released to make room at the allocation it made room for', () => {
    const result = snapshot([
      { action: 'segment_alloc', addr: SEG, size: 20 * MiB, time_us: 1 },
      { action: 'alloc', addr: SEG, size: 8 * MiB, time_us: 2 },
      { action: 'free_requested', addr: SEG, size: 8 * MiB, time_us: 3 },
      { action: 'free_completed', addr: SEG, size: 8 * MiB, time_us: 3 },
      { action: 'segment_free', addr: SEG, size: 20 * MiB, time_us: 4 },
      { action: 'segment_alloc', addr: SEG + 64 * MiB, size: 40 * MiB, time_us: 6 },
      { action: 'alloc', addr: SEG + 64 * MiB, size: 30 * MiB, time_us: 7 },
    ])
    const l = result.recorded[0]!.layout!
    const e = result.trace.events
    const release = l.op.indexOf(LayoutOp.regionRelease)
    const at = l.event![release]!
    assert.ok(e.kind[at] === EventKind.alloc || e.kind[at] === EventKind.trim, `the release is at the allocation or the trim (kind ${e.kind[at]})`)
    assert.ok(at > l.event![l.op.indexOf(LayoutOp.free)]!, 'after the free before it')
    assert.equal(l.event![l.op.lastIndexOf(LayoutOp.regionReserve)], e.kind.lastIndexOf(EventKind.alloc), 'the new segment at the alloc it was for')
  })

  it('places every row of every real snapshot bundled, and a row of each op on the event of its kind', () => {
    const names = readdirSync(fixtures).filter((n) => n.endsWith('.pickle'))
    let rows = 0
    for (const name of names) rows += checkRows(parsePytorchSnapshot(new Uint8Array(readFileSync(join(fixtures, name))), name), name)
    assert.ok(names.length >= 8 && rows > 10_000, `${rows} rows of ${names.length} snapshots`)
  })

  describe('the torchrun job recorded on an H200, through a trace file', () => {
    let dir: string
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'vramscope-recorded-events-'))
      execFileSync('tar', ['xzf', join(fixtures, 'field-gpu.tar.gz'), '-C', dir, 'field/ddp_rank0__default.pickle'])
    })
    after(() => rmSync(dir, { recursive: true, force: true }))

    it('keeps each row its event in the file (1.2), and the replay bundle draws the rows there', async () => {
      const file = join(dir, 'field', 'ddp_rank0__default.pickle')
      const imported = parsePytorchSnapshot(new Uint8Array(readFileSync(file)), file)
      checkRows(imported, 'ddp_rank0')
      const saved = join(dir, 'rank0.vramscope')
      await writeTrace(saved, imported.trace, imported.recorded)
      const read = await readTrace(saved)
      assert.equal(read.file.version, '1.2')
      const layout = read.strategies[0]!.layout!
      assert.deepEqual(Array.from(layout.event!), Array.from(imported.recorded[0]!.layout!.event!))
      const sent = recordedOnEvents(read.trace, read.strategies[0]!).layout!.event
      assert.deepEqual(Array.from(sent), Array.from(layout.event!))
    })
  })
})
