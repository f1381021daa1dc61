// Property test (fast-check) of the trace file: whatever the writer accepts, the reader reads back
// exactly, through writeTrace (a temporary file renamed) and through the streaming TraceWriter, for
// traces with any table contents (empty, unicode, many rows), any event columns within the
// format's ranges, and strategy results with 64-bit addresses. A trace whose references do not hold
// (an event naming a stream that is not there, a stack naming a missing frame) is refused by the
// writer with the same words the reader would use, never written.
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, it } from 'node:test'

import fc from 'fast-check'

import { readTrace, writeTrace } from '../../../../src-main/services/trace/file.ts'
import { allocateEvents, EventKind, type RequestTrace } from '../../../../src-main/services/trace/model.ts'
import { allocateLayout } from '../../../../src-shared/layout.ts'
import type { StrategyResult } from '../../../../src-shared/results.ts'
import { eventsEqual } from '../../../helpers/trace-samples.ts'

const runs = Number(process.env['VRAMSCOPE_PROPERTY_RUNS'] ?? 60)
const seedSetting = process.env['VRAMSCOPE_PROPERTY_SEED'] ?? '20261126'
if (seedSetting !== 'random') fc.configureGlobal({ seed: Number(seedSetting) })

let dir = ''
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vramscope-trace-property-'))
})
after(async () => {
  await rm(dir, { recursive: true, force: true })
})

const text = fc.string({ unit: 'grapheme', maxLength: 12 })
const names = (max: number) => fc.array(text, { maxLength: max })

/** A request trace whose references hold: every index an event or stack holds is in its table. */
const trace: fc.Arbitrary<RequestTrace> = fc
  .record({
    streams: names(6),
    frames: fc.array(fc.record({ name: text, filename: text, line: fc.integer({ min: -1, max: 1 << 30 }) }), { maxLength: 8 }),
    tags: names(4),
    markers: names(5),
    stackCount: fc.nat(6),
    events: fc.array(
      fc.record({
        kind: fc.constantFrom(EventKind.alloc, EventKind.free, EventKind.marker, EventKind.oom),
        id: fc.nat(),
        size: fc.oneof(fc.nat(), fc.constant(2 ** 53 - 1)),
        pick: fc.nat(),
        device: fc.nat(0xffff),
        time: fc.double({ min: 0, max: 1e15, noNaN: true }),
      }),
      { maxLength: 200 },
    ),
    meta: fc.record({
      source: text,
      warnings: names(3),
      properties: fc.dictionary(
        text.filter((k) => k !== '__proto__'),
        text,
        { maxKeys: 4 },
      ),
    }),
  })
  .chain((t) =>
    fc
      .array(fc.array(fc.nat(Math.max(0, t.frames.length - 1)), { maxLength: t.frames.length === 0 ? 0 : 5 }), {
        minLength: t.stackCount,
        maxLength: t.stackCount,
      })
      .map((stacks) => {
        const events = allocateEvents(t.events.length)
        t.events.forEach((e, i) => {
          // A marker needs a marker to name; any other kind needs a stream (alloc, free, oom).
          const kind = e.kind === EventKind.marker && t.markers.length === 0 ? EventKind.free : e.kind
          if (kind !== EventKind.marker && t.streams.length === 0) t.streams.push('0')
          events.kind[i] = kind
          events.id[i] = kind === EventKind.marker ? e.pick % t.markers.length : e.id
          events.size[i] = e.size
          events.stream[i] = e.pick % Math.max(1, t.streams.length)
          events.device[i] = e.device
          events.time[i] = e.time
          events.stack[i] = stacks.length === 0 ? -1 : (e.pick % (stacks.length + 1)) - 1
          events.tag[i] = t.tags.length === 0 ? -1 : (e.pick % (t.tags.length + 1)) - 1
        })
        return {
          meta: { source: t.meta.source, warnings: t.meta.warnings, properties: { ...t.meta.properties } },
          events,
          tables: {
            streams: t.streams,
            frames: t.frames.map((f) => ({ name: f.name, filename: f.filename, line: f.line })),
            stacks: stacks.map((s) => Uint32Array.from(s)),
            tags: t.tags,
            markers: t.markers,
          },
        }
      }),
  )

const strategies: fc.Arbitrary<StrategyResult[]> = fc
  .uniqueArray(
    fc.record({
      name: text.filter((n) => n.length > 0),
      rows: fc.nat(40),
      address: fc.bigUint64Array({ minLength: 1, maxLength: 1 }),
      summary: fc.dictionary(
        text.filter((k) => k !== '__proto__'),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        { maxKeys: 4 },
      ),
    }),
    { selector: (s) => s.name, maxLength: 3 },
  )
  .map((list) =>
    list.map((s) => {
      const layout = allocateLayout(s.rows)
      for (let i = 0; i < s.rows; i++) {
        layout.op[i] = i % 15
        layout.address[i] = s.address[0]! ^ BigInt(i)
        layout.size[i] = i * 256
        layout.time[i] = i
      }
      return { name: s.name, strategy: 'caching', params: { n: s.rows }, layout, summary: { ...s.summary } }
    }),
  )

it('anything writeTrace accepts, readTrace reads back exactly', async () => {
  let file = 0
  await fc.assert(
    fc.asyncProperty(trace, strategies, async (t, results) => {
      const path = join(dir, `t${file++}.vramscope`)
      await writeTrace(path, t, results)
      const read = await readTrace(path)
      assert.deepEqual(read.trace.meta, t.meta)
      assert.deepEqual(read.trace.tables.streams, t.tables.streams)
      assert.deepEqual(read.trace.tables.frames, t.tables.frames)
      assert.deepEqual(
        read.trace.tables.stacks.map((s) => [...s]),
        t.tables.stacks.map((s) => [...s]),
      )
      assert.deepEqual(read.trace.tables.tags, t.tables.tags)
      assert.deepEqual(read.trace.tables.markers, t.tables.markers)
      assert.ok(eventsEqual(read.trace.events, t.events), 'events differ')
      assert.deepEqual(
        read.strategies.map((s) => [s.name, [...(s.layout?.address ?? [])], s.summary]),
        results.map((s) => [s.name, [...(s.layout?.address ?? [])], s.summary]),
      )
      await rm(path)
    }),
    // No shrinking: each case writes a file, and the first counterexample is small already.
    { numRuns: runs, endOnFailure: true },
  )
})

it('a trace whose references do not hold is refused by the writer, in the words the reader would use, and nothing is written', async () => {
  await fc.assert(
    fc.asyncProperty(trace, fc.constantFrom('stream', 'stack', 'tag', 'frame'), async (t, broken) => {
      if (t.events.kind.length === 0 && broken !== 'frame') return
      if (broken === 'frame') t.tables.stacks.push(Uint32Array.of(t.tables.frames.length))
      else if (broken === 'stream') {
        t.events.kind[0] = EventKind.alloc
        t.events.stream[0] = t.tables.streams.length
      } else if (broken === 'stack') t.events.stack[0] = t.tables.stacks.length
      else t.events.tag[0] = t.tables.tags.length
      const path = join(dir, 'refused.vramscope')
      await assert.rejects(writeTrace(path, t), new RegExp(`${broken === 'frame' ? 'refers to frame' : `${broken} \\d+ is not in the ${broken}s table`}`))
      await assert.rejects(readTrace(path), /ENOENT|no such file/)
    }),
    // No shrinking: each case writes a file, and the first counterexample is small already.
    { numRuns: runs, endOnFailure: true },
  )
})
