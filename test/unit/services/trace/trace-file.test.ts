// Trace files (docs/trace-format.md): what is written reads back identical, and every kind of bad
// file (missing, empty, not Arrow, truncated, bit-flipped, wrong schema, newer version, impossible
// values) is a TraceFileError that names the file, the byte offset and chunk, and the problem.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { Float64, RecordBatch, RecordBatchStreamWriter, Schema, Table, Utf8, tableFromIPC, vectorFromArray, type Vector } from 'apache-arrow'

import { readMessage } from '../../../../src-main/services/trace/arrow-messages.ts'
import { crc32Hex } from '../../../../src-main/services/trace/crc32.ts'
import {
  FORMAT_VERSION,
  TraceFileError,
  TraceWriter,
  decodeTrace,
  encodeTrace,
  readTrace,
  writeTrace,
  type TraceFileErrorCode,
} from '../../../../src-main/services/trace/file.ts'
import { EventKind, type RequestTrace } from '../../../../src-main/services/trace/model.ts'
import type { StrategyResult } from '../../../../src-shared/results.ts'
import { encodeChunk } from '../../../../src-main/services/trace/encoder.ts'
import { concat } from '../../../helpers/bytes.ts'
import { eventsEqual, sampleStrategies, sampleTrace } from '../../../helpers/trace-samples.ts'

let dir = ''
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vramscope-trace-file-'))
})
after(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** Chunk start offsets of a file made of `chunks`. */
function offsets(chunks: Uint8Array[]): number[] {
  const out: number[] = []
  let at = 0
  for (const c of chunks) {
    out.push(at)
    at += c.length
  }
  return out
}

function refused(bytes: Uint8Array, code: TraceFileErrorCode, problem: RegExp, where?: { offset?: number; chunk?: number }): TraceFileError {
  let caught: unknown
  try {
    decodeTrace(bytes, 'bad.vramscope')
  } catch (e) {
    caught = e
  }
  assert.ok(caught instanceof TraceFileError, `expected a TraceFileError, got ${caught instanceof Error ? caught.stack : String(caught)}`)
  assert.equal(caught.code, code, caught.message)
  assert.match(caught.problem, problem)
  assert.match(caught.message, /^bad\.vramscope: /)
  if (where?.offset !== undefined) assert.equal(caught.offset, where.offset, caught.message)
  if (where?.chunk !== undefined) assert.equal(caught.chunk, where.chunk, caught.message)
  if (caught.offset !== undefined) assert.match(caught.message, new RegExp(`byte ${caught.offset}`))
  return caught
}

/**
 * A chunk made here with apache-arrow alone, following docs/trace-format.md rather than the
 * writer's code: schema metadata plus the CRC-32 of the record batch messages.
 */
function craftChunk(columns: Record<string, Vector>, metadata: Record<string, string>): Uint8Array {
  const table = new Table(columns)
  const serialize = (schema: Schema, batches: RecordBatch[]) => {
    const writer = new RecordBatchStreamWriter()
    writer.reset(undefined, schema)
    for (const b of batches) writer.write(b)
    writer.finish()
    return writer.toUint8Array(true)
  }
  const plain = new Schema(table.schema.fields, new Map(Object.entries(metadata)))
  const bytes = serialize(
    plain,
    table.batches.map((b) => new RecordBatch(plain, b.data)),
  )
  const schemaEnd = 8 + new DataView(bytes.buffer, bytes.byteOffset).getInt32(4, true)
  const batchBytes = bytes.subarray(schemaEnd, bytes.length - 8)
  const checked = new Schema(table.schema.fields, new Map([...Object.entries(metadata), ['vramscope.crc32', crc32Hex(batchBytes)]]))
  const header = serialize(checked, [])
  return concat([header.subarray(0, header.length - 8), batchBytes, header.subarray(header.length - 8)])
}

const chunkMeta = (section: string, version = FORMAT_VERSION) => ({
  'vramscope.format': 'vramscope-trace',
  'vramscope.version': version,
  'vramscope.section': section,
})

function assertSameTrace(actual: RequestTrace, expected: RequestTrace): void {
  assert.deepEqual(actual.meta, expected.meta)
  assert.deepEqual(actual.tables.streams, expected.tables.streams)
  assert.deepEqual(actual.tables.frames, expected.tables.frames)
  assert.deepEqual(
    actual.tables.stacks.map((s) => [...s]),
    expected.tables.stacks.map((s) => [...s]),
  )
  assert.deepEqual(actual.tables.tags, expected.tables.tags)
  assert.deepEqual(actual.tables.markers, expected.tables.markers)
  assert.ok(eventsEqual(actual.events, expected.events), 'events differ')
}

function assertSameStrategies(actual: StrategyResult[], expected: StrategyResult[]): void {
  const plain = (s: StrategyResult) => ({
    ...s,
    layout: s.layout && Object.fromEntries(Object.entries(s.layout).map(([k, v]) => [k, Array.from(v as ArrayLike<unknown>)])),
    metrics: s.metrics && Object.fromEntries(Object.entries(s.metrics).map(([k, v]) => [k, Array.from(v as Float64Array)])),
  })
  assert.deepEqual(actual.map(plain), expected.map(plain))
}

describe('round trip', () => {
  it('reads back every table, event, strategy layout, metric and summary exactly as written', async () => {
    const trace = sampleTrace(5000)
    const strategies = sampleStrategies()
    const path = join(dir, 'round-trip.vramscope')
    await writeTrace(path, trace, strategies)
    const read = await readTrace(path)
    assertSameTrace(read.trace, trace)
    assertSameStrategies(read.strategies, strategies)
    assert.equal(read.file.complete, true)
    assert.equal(read.file.writer, 'file')
    assert.equal(read.file.version, FORMAT_VERSION)
    // The high bits of device addresses survive (they do not fit a double).
    assert.equal(read.strategies[0]!.layout!.address[3], 0xffff_8000_0000_0300n)
  })

  it('writes an empty trace that reads back empty', async () => {
    const empty: RequestTrace = {
      meta: { source: 'synthetic', warnings: [], properties: {} },
      events: sampleTrace(0).events,
      tables: { streams: [], frames: [], stacks: [], tags: [], markers: [] },
    }
    const path = join(dir, 'empty.arrow')
    await writeTrace(path, empty)
    const read = await readTrace(path)
    assertSameTrace(read.trace, empty)
    assert.deepEqual(read.strategies, [])
  })

  it('replaces an existing file whole and leaves no temporary file behind', async () => {
    const path = join(dir, 'replace.vramscope')
    await writeTrace(path, sampleTrace(300, 5))
    await writeTrace(path, sampleTrace(10, 6))
    assert.equal((await readTrace(path)).trace.events.kind.length, 10)
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.startsWith('replace')),
      ['replace.vramscope'],
    )
  })

  it('reports read and decode progress up to the file size', async () => {
    const path = join(dir, 'progress.vramscope')
    await writeTrace(path, sampleTrace(2000))
    const size = (await readFile(path)).length
    const seen: { phase: string; bytesDone: number }[] = []
    await readTrace(path, { onProgress: (p) => (assert.equal(p.bytesTotal, size), seen.push(p)) })
    assert.deepEqual(seen.filter((p) => p.phase === 'read').at(-1)?.bytesDone, size)
    const decode = seen.filter((p) => p.phase === 'decode').map((p) => p.bytesDone)
    assert.ok(decode.length >= 8, `one decode report per chunk, got ${decode.length}`)
    assert.deepEqual(
      decode,
      [...decode].sort((a, b) => a - b),
    )
    assert.equal(decode.at(-1), size)
  })

  it('decodes bytes that start at an offset not a multiple of 8 (a pooled Buffer, a slice)', () => {
    const trace = sampleTrace(500)
    const file = concat(encodeTrace(trace, sampleStrategies(8)))
    const shifted = new Uint8Array(file.length + 3)
    shifted.set(file, 3)
    const read = decodeTrace(shifted.subarray(3), 'shifted.vramscope')
    assertSameTrace(read.trace, trace)
    assert.equal(read.strategies[0]!.layout!.address[1], 0xffff_8000_0000_0100n)
  })

  it('reads back tables of any length the writer takes: 300,000 stacks, streams, tags and markers (issue: a spread of 130,000 rows overflowed the call stack)', async () => {
    const rows = 300_000
    const trace = sampleTrace(10)
    trace.tables.stacks = Array.from({ length: rows }, (_, i) => new Uint32Array([i % 3]))
    trace.tables.streams = Array.from({ length: rows }, (_, i) => `0x${i.toString(16)}`)
    trace.tables.tags = Array.from({ length: rows }, (_, i) => `tag ${i}`)
    trace.tables.markers = Array.from({ length: rows }, (_, i) => `step ${i}`)
    const path = join(dir, 'many-rows.vramscope')
    await writeTrace(path, trace)
    const read = await readTrace(path)
    assert.equal(read.trace.tables.stacks.length, rows)
    assert.deepEqual(read.trace.tables.stacks[rows - 1], new Uint32Array([(rows - 1) % 3]))
    assert.equal(read.trace.tables.streams.length, rows)
    assert.equal(read.trace.tables.tags[rows - 1], `tag ${rows - 1}`)
    assert.equal(read.trace.tables.markers[rows - 1], `step ${rows - 1}`)
  })

  it('refuses to write strategies with the same name twice', () => {
    const [first] = sampleStrategies()
    assert.throws(() => encodeTrace(sampleTrace(10), [first!, { ...first! }]), /appears twice/)
  })

  it('refuses sizes that a uint64 column cannot hold exactly', () => {
    const trace = sampleTrace(10)
    trace.events.size[2] = 1.5
    assert.throws(() => encodeTrace(trace), /size\[2\] must be a whole number/)
  })
})

describe('bad files', () => {
  const trace = sampleTrace(400)
  const chunks = encodeTrace(trace, sampleStrategies(16))
  const file = concat(chunks)
  const starts = offsets(chunks)
  const eventsChunk = 6

  it('a missing file: unreadable, naming it', async () => {
    const path = join(dir, 'does-not-exist.vramscope')
    await assert.rejects(readTrace(path), (e: TraceFileError) => {
      assert.ok(e instanceof TraceFileError)
      assert.equal(e.code, 'unreadable')
      assert.ok(e.message.startsWith(`${path}: `), e.message)
      return true
    })
  })

  it('an empty file', () => {
    refused(new Uint8Array(0), 'empty', /empty/, { offset: 0 })
  })

  it('text, not Arrow', () => {
    refused(new TextEncoder().encode('Thread,Time,Action,Pointer,Size,Stream\n1,2,allocate,0x1,2,0x0\n'), 'not-arrow', /not an Arrow IPC stream/, { offset: 0 })
  })

  it('an Arrow IPC file (random-access format) rather than a stream', () => {
    refused(new TextEncoder().encode('ARROW1\0\0 and the rest'), 'not-arrow', /Arrow IPC \*file\*/, { offset: 0 })
  })

  it('an Arrow stream that is not a vramscope trace, listing what it holds', () => {
    const other = craftChunk({ x: vectorFromArray([1, 2, 3], new Float64()) }, {})
    refused(other, 'not-vramscope', /without vramscope metadata.*x: float \(double\)/, { offset: 0, chunk: 0 })
  })

  it('truncated anywhere: at every chunk boundary and inside every chunk', () => {
    for (const [i, start] of starts.entries()) {
      if (i === 0) continue
      refused(file.subarray(0, start), 'truncated', /ends before its end section/, { offset: start })
      const inside = start + Math.floor(chunks[i]!.length / 2)
      const e = refused(file.subarray(0, inside), 'truncated', /ends/)
      assert.equal(e.chunk, i)
    }
    refused(file.subarray(0, 5), 'truncated', /ends/, { offset: 0, chunk: 0 })
  })

  it('a flipped bit in the events data fails the chunk checksum, naming the chunk', () => {
    const damaged = file.slice()
    damaged[starts[eventsChunk]! + chunks[eventsChunk]!.length - 100]! ^= 0x10
    const e = refused(damaged, 'checksum', /CRC-32.*damaged/, { chunk: eventsChunk })
    assert.equal(e.section, 'events')
    assert.match(e.message, /chunk 6 \(events\)/)
  })

  it('a flipped bit in every byte of a schema message: a typed error or, in padding, the same trace', () => {
    const start = starts[eventsChunk]!
    const schemaLength = 8 + new DataView(file.buffer).getInt32(start + 4, true)
    for (let at = start; at < start + schemaLength; at++) {
      const damaged = file.slice()
      damaged[at]! ^= 0x04
      try {
        const read = decodeTrace(damaged, 'bad.vramscope')
        assert.ok(eventsEqual(read.trace.events, trace.events), `byte ${at}: a changed trace was accepted`)
      } catch (e) {
        assert.ok(e instanceof TraceFileError, `byte ${at}: ${e instanceof Error ? e.stack : String(e)}`)
      }
    }
  })

  it('garbage after the end section', () => {
    refused(concat([file, new Uint8Array(16).fill(7)]), 'corrupt', /16 bytes follow the end section/, { offset: file.length })
  })

  it('a chunk repeated (or lost) disagrees with the end section', () => {
    const streamsTwice = concat([...chunks.slice(0, 2), chunks[1]!, ...chunks.slice(2)])
    refused(streamsTwice, 'corrupt', /end section lists 1 chunks and 3 rows of streams, the file holds 2 chunks and 6 rows/, {
      offset: file.length + chunks[1]!.length - chunks.at(-1)!.length,
    })
  })

  it('a newer major version, naming both versions', () => {
    const newer = craftChunk({ key: vectorFromArray(['source'], new Utf8()), value: vectorFromArray(['future'], new Utf8()) }, chunkMeta('meta', '2.0'))
    refused(concat([newer, ...chunks.slice(1)]), 'newer-version', /format 2\.0 by a newer vramscope; this one reads 1\.x/, { offset: 0, chunk: 0 })
  })

  it('a newer minor version with a section this reader does not know: skipped, the rest read', () => {
    const future = craftChunk({ hint: vectorFromArray(['ignore me', 'and me'], new Utf8()) }, chunkMeta('hints', '1.7'))
    // The end section counts it too, as a 1.7 writer's would.
    const end = tableFromIPC(chunks.at(-1)!)
    const sections = [...(end.getChild('section')!.toArray() as string[]), 'hints']
    const chunkCounts = Uint32Array.from([...(end.getChild('chunks')!.toArray() as Uint32Array), 1])
    const rowCounts = BigUint64Array.from([...(end.getChild('rows')!.toArray() as BigUint64Array), 2n])
    const newEnd = craftChunk(
      { section: vectorFromArray(sections, new Utf8()), chunks: vectorFromArray(chunkCounts), rows: vectorFromArray(rowCounts) },
      chunkMeta('end', '1.7'),
    )
    const read = decodeTrace(concat([...chunks.slice(0, -1), future, newEnd]), 'future.vramscope')
    assert.deepEqual(read.file.skippedSections, ['hints'])
    assert.ok(eventsEqual(read.trace.events, trace.events))
    assert.equal(read.strategies.length, 3)
  })

  it('a known section with a column of the wrong type', () => {
    const wrongSizes = craftChunk(
      {
        kind: vectorFromArray(Uint8Array.from(trace.events.kind)),
        id: vectorFromArray(Uint32Array.from(trace.events.id)),
        size: vectorFromArray(Float64Array.from(trace.events.size)),
      },
      chunkMeta('events'),
    )
    const bytes = concat([...chunks.slice(0, eventsChunk), wrongSizes, ...chunks.slice(eventsChunk + 1)])
    refused(bytes, 'wrong-schema', /column "size" of events is float \(double\), expected u64/, { offset: starts[eventsChunk], chunk: eventsChunk })
  })

  it('a known section missing a column', () => {
    const noLine = craftChunk({ name: vectorFromArray(['f'], new Utf8()), filename: vectorFromArray(['g'], new Utf8()) }, chunkMeta('frames'))
    const bytes = concat([...chunks.slice(0, 2), noLine, ...chunks.slice(3)])
    refused(bytes, 'wrong-schema', /section frames has no column "line" \(it has name, filename\)/, { chunk: 2 })
  })

  it('an event whose stream is not in the streams table: bad value, naming the event', () => {
    const e = trace.events
    const stream = Uint32Array.from(e.stream)
    stream[7] = 99
    const events = craftChunk(
      {
        kind: vectorFromArray(Uint8Array.from(e.kind)),
        id: vectorFromArray(Uint32Array.from(e.id)),
        size: vectorFromArray(BigUint64Array.from(e.size, BigInt)),
        stream: vectorFromArray(stream),
        device: vectorFromArray(Uint16Array.from(e.device)),
        time: vectorFromArray(Float64Array.from(e.time)),
        stack: vectorFromArray(Int32Array.from(e.stack)),
        tag: vectorFromArray(Int32Array.from(e.tag)),
      },
      chunkMeta('events'),
    )
    const bytes = concat([...chunks.slice(0, eventsChunk), events, ...chunks.slice(eventsChunk + 1)])
    refused(bytes, 'bad-value', /event 7: stream 99 is not in the streams table \(3 streams\)/, { offset: starts[eventsChunk], chunk: eventsChunk })
  })

  it('strategy sections naming a strategy that is not in the strategies table', () => {
    const strategiesChunk = eventsChunk + 1
    const bytes = concat(chunks.filter((_, i) => i !== strategiesChunk))
    refused(bytes, 'bad-value', /sections name strategy "caching \(pytorch\)", which is not in the strategies table/, {
      offset: starts[strategiesChunk + 1]! - chunks[strategiesChunk]!.length,
    })
  })
})

describe('streaming writer', () => {
  async function record(path: string, flushes: number, perFlush: number): Promise<RequestTrace> {
    const source = sampleTrace(flushes * perFlush, 9)
    const writer = await TraceWriter.create(path, { source: 'recording', gpu: 'test GPU', warnings: [], properties: { pid: '1' } }, { flushIntervalMs: 60_000 })
    const s = source.tables
    for (let f = 0; f < flushes; f++) {
      for (let i = f * perFlush; i < (f + 1) * perFlush; i++) {
        const e = source.events
        const stream = writer.stream(s.streams[e.stream[i]!]!)
        const stack = e.stack[i]! < 0 ? -1 : writer.stack(Array.from(s.stacks[e.stack[i]!]!, (fi) => s.frames[fi]!))
        const tag = e.tag[i]! < 0 ? -1 : writer.tag(s.tags[e.tag[i]!]!)
        const id = e.kind[i] === EventKind.marker ? writer.marker(s.markers[e.id[i]!]!) : e.id[i]!
        writer.append(e.kind[i] as EventKind, id, e.size[i]!, stream, e.device[i]!, e.time[i]!, stack, tag)
      }
      if (f === 1) writer.warn('flush 1 saw something')
      await writer.flush()
    }
    return source
  }

  it('writes a complete file on close: the events appended, tables deduplicated, warnings kept', async () => {
    const path = join(dir, 'recorded.vramscope')
    const writer = await TraceWriter.create(path, { source: 'recording', warnings: [], properties: {} }, { flushIntervalMs: 60_000, flushEvents: 100 })
    const frames = [
      { name: 'f', filename: 'a.py', line: 1 },
      { name: 'g', filename: 'a.py', line: 2 },
    ]
    const stackA = writer.stack(frames)
    assert.equal(writer.stack(frames.map((f) => ({ ...f }))), stackA, 'the same frames make the same stack')
    const stackB = writer.stack([frames[1]!])
    for (let i = 0; i < 1000; i++) {
      writer.append(EventKind.alloc, i, 512 * (i + 1), writer.stream(i % 2 ? '0x1' : '0'), 0, i * 10, i % 2 ? stackA : stackB)
    }
    writer.warn('late warning')
    await writer.close()
    const read = await readTrace(path)
    assert.equal(read.file.complete, true)
    assert.equal(read.file.writer, 'stream')
    assert.equal(read.trace.events.kind.length, 1000)
    assert.deepEqual([...read.trace.events.size.subarray(0, 3)], [512, 1024, 1536])
    assert.deepEqual(read.trace.tables.streams, ['0', '0x1'])
    assert.equal(read.trace.tables.frames.length, 2)
    assert.deepEqual(
      read.trace.tables.stacks.map((s) => [...s]),
      [[0, 1], [1]],
    )
    assert.deepEqual(read.trace.meta.warnings, ['late warning'])
    assert.ok(read.file.chunks > 10, `flushes every 100 events make many chunks (${read.file.chunks})`)
  })

  it('a recording cut at any byte opens with a prefix of its events, flagged incomplete', async () => {
    const path = join(dir, 'cut.vramscope')
    const perFlush = 40
    const source = await record(path, 6, perFlush)
    const bytes = new Uint8Array(await readFile(path))
    const full = decodeTrace(bytes, 'cut.vramscope')
    assert.equal(full.file.complete, false, 'no close(), so no end section')
    assert.equal(full.trace.events.kind.length, 6 * perFlush)
    assert.match(full.trace.meta.warnings.at(-1)!, /recording did not finish/)
    let previous = 0
    // The first chunk (meta) must be whole for the file to be anything; past it, any cut opens.
    let metaEnd = 0
    for (let m = readMessage(bytes, 0); ; m = readMessage(bytes, metaEnd)) {
      metaEnd = m.end
      if (m.header.kind === 'eos') break
    }
    assert.throws(
      () => decodeTrace(bytes.subarray(0, metaEnd - 1), 'cut.vramscope'),
      (e: TraceFileError) => e.code === 'truncated',
    )
    // Every byte of the last flush or so (where a kill lands), every 31st before.
    for (let cut = bytes.length; cut >= metaEnd; cut -= cut > bytes.length - 1200 ? 1 : 31) {
      const read = decodeTrace(bytes.subarray(0, cut), 'cut.vramscope')
      const n = read.trace.events.kind.length
      assert.equal(n % perFlush, 0, `cut at ${cut}: whole flushes only, got ${n} events`)
      assert.ok(
        read.trace.events.kind.every((k, i) => k === source.events.kind[i]),
        `cut at ${cut}: not a prefix`,
      )
      assert.ok(
        read.trace.events.size.every((s, i) => s === source.events.size[i]),
        `cut at ${cut}: not a prefix`,
      )
      assert.equal(read.file.complete, false)
      previous = n
    }
    assert.equal(previous, 0)
  })

  it('a whole-written file cut at a chunk boundary is truncated, not an incomplete recording', async () => {
    const path = join(dir, 'whole.vramscope')
    await writeTrace(path, sampleTrace(100))
    const bytes = new Uint8Array(await readFile(path))
    const cut = bytes.subarray(0, bytes.length - 200)
    assert.throws(
      () => decodeTrace(cut, 'whole.vramscope'),
      (e: TraceFileError) => e.code === 'truncated',
    )
  })

  it('zeros at the end of a recording (a machine crash) are skipped like a cut write', async () => {
    const path = join(dir, 'zeros.vramscope')
    await record(path, 2, 10)
    const bytes = new Uint8Array(await readFile(path))
    const read = decodeTrace(concat([bytes, new Uint8Array(4096)]), 'zeros.vramscope')
    assert.equal(read.trace.events.kind.length, 20)
    assert.equal(read.file.tornBytes, 4096)
  })
})

describe('memory pools (1.1): the optional events.pool column and the pools table', () => {
  const pooled = (): RequestTrace => {
    const trace = sampleTrace(3000)
    const pool = new Uint32Array(trace.events.kind.length)
    for (let i = 0; i < pool.length; i++) pool[i] = trace.events.kind[i] === EventKind.alloc || trace.events.kind[i] === EventKind.free ? i % 3 : 0
    return { ...trace, events: { ...trace.events, pool }, tables: { ...trace.tables, pools: ['(1, 0)', '(2, 0)'] } }
  }

  it('reads back the pool of every event and the pools table', () => {
    const trace = pooled()
    const read = decodeTrace(concat(encodeTrace(trace)), 'pools.vramscope')
    assert.deepEqual(read.trace.tables.pools, ['(1, 0)', '(2, 0)'])
    assert.deepEqual(Array.from(read.trace.events.pool!), Array.from(trace.events.pool!))
    assert.ok(eventsEqual(read.trace.events, trace.events))
    assert.equal(read.file.version, FORMAT_VERSION)
  })

  it('writes neither where the trace has none, and a 1.0 file (no pools) reads as all in the default pools', async () => {
    const plain = decodeTrace(concat(encodeTrace(sampleTrace(100))), 'plain.vramscope')
    assert.equal(plain.trace.events.pool, undefined)
    assert.equal(plain.trace.tables.pools, undefined)
    const old = await readTrace(join(import.meta.dirname, '..', '..', '..', 'fixtures', 'trace', 'sample.vramscope'))
    assert.equal(old.file.version, '1.0')
    assert.equal(old.trace.events.pool, undefined)
  })

  it('refuses a pool the pools table does not have, and a pool column of the wrong type', () => {
    const trace = pooled()
    const bad = { ...trace, tables: { ...trace.tables, pools: ['(1, 0)'] } }
    assert.throws(() => encodeTrace(bad), /pool 2 is not in the pools table \(1 private pools\)/)
    const chunks = encodeTrace(trace)
    const eventsChunk = chunks.findIndex((c) => tableFromIPC(c).schema.metadata.get('vramscope.section') === 'events')
    const e = trace.events
    const wrongPool = craftChunk(
      {
        kind: vectorFromArray(Uint8Array.from(e.kind)),
        id: vectorFromArray(Uint32Array.from(e.id)),
        size: vectorFromArray(BigUint64Array.from(e.size, BigInt)),
        stream: vectorFromArray(Uint32Array.from(e.stream)),
        device: vectorFromArray(Uint16Array.from(e.device)),
        time: vectorFromArray(Float64Array.from(e.time)),
        stack: vectorFromArray(Int32Array.from(e.stack)),
        tag: vectorFromArray(Int32Array.from(e.tag)),
        pool: vectorFromArray(Float64Array.from(e.pool!)),
      },
      chunkMeta('events'),
    )
    refused(
      concat([...chunks.slice(0, eventsChunk), wrongPool, ...chunks.slice(eventsChunk + 1)]),
      'wrong-schema',
      /column "pool" of events is float \(double\), expected u32/,
      {
        chunk: eventsChunk,
      },
    )
  })

  it('reads events split over chunks of which only some have the column: the others are the default pools', () => {
    const trace = pooled()
    const e = trace.events
    const n = e.kind.length
    const half = n >> 1
    const chunks = encodeTrace(trace)
    const eventsChunk = chunks.findIndex((c) => tableFromIPC(c).schema.metadata.get('vramscope.section') === 'events')
    const part = (from: number, to: number, withPool: boolean) =>
      craftChunk(
        {
          kind: vectorFromArray(e.kind.slice(from, to)),
          id: vectorFromArray(e.id.slice(from, to)),
          size: vectorFromArray(BigUint64Array.from(e.size.slice(from, to), BigInt)),
          stream: vectorFromArray(e.stream.slice(from, to)),
          device: vectorFromArray(e.device.slice(from, to)),
          time: vectorFromArray(e.time.slice(from, to)),
          stack: vectorFromArray(e.stack.slice(from, to)),
          tag: vectorFromArray(e.tag.slice(from, to)),
          ...(withPool ? { pool: vectorFromArray(e.pool!.slice(from, to)) } : {}),
        },
        chunkMeta('events'),
      )
    const end = tableFromIPC(chunks.at(-1)!)
    const sections = end.getChild('section')!.toArray() as string[]
    const chunkCounts = Uint32Array.from(end.getChild('chunks')!.toArray() as Uint32Array)
    chunkCounts[sections.indexOf('events')]! += 1
    const newEnd = craftChunk(
      {
        section: vectorFromArray(sections, new Utf8()),
        chunks: vectorFromArray(chunkCounts),
        rows: vectorFromArray(end.getChild('rows')!.toArray() as BigUint64Array),
      },
      chunkMeta('end'),
    )
    const bytes = concat([...chunks.slice(0, eventsChunk), part(0, half, false), part(half, n, true), ...chunks.slice(eventsChunk + 1, -1), newEnd])
    const read = decodeTrace(bytes, 'split.vramscope')
    const expected = Uint32Array.from(e.pool!)
    expected.fill(0, 0, half)
    assert.deepEqual(Array.from(read.trace.events.pool!), Array.from(expected))
  })
})

describe('1.2: the recorded reserved series and each recorded layout row its request event', () => {
  const withSeries = (): RequestTrace => {
    const trace = sampleTrace(500)
    const n = trace.events.kind.length
    return { ...trace, recordedReserved: { index: Uint32Array.from([0, 7, 120, n]), bytes: Float64Array.from([2 ** 21, 2 ** 33 + 512, 2 ** 34, 2 ** 22]) } }
  }
  const sectionOf = (c: Uint8Array) => tableFromIPC(c).schema.metadata.get('vramscope.section')

  it('reads back the series exactly (byte counts past 2^32), and a trace without one has none', async () => {
    const trace = withSeries()
    const path = join(dir, 'series.vramscope')
    await writeTrace(path, trace)
    const read = await readTrace(path)
    assert.equal(read.file.version, '1.2')
    assert.deepEqual(Array.from(read.trace.recordedReserved!.index), Array.from(trace.recordedReserved!.index))
    assert.deepEqual(Array.from(read.trace.recordedReserved!.bytes), Array.from(trace.recordedReserved!.bytes))
    assert.equal(decodeTrace(concat(encodeTrace(sampleTrace(50))), 'plain.vramscope').trace.recordedReserved, undefined)
  })

  it('refuses to write, and names on reading, a series out of order or past the events', () => {
    const trace = withSeries()
    const n = trace.events.kind.length
    const backwards = { ...trace, recordedReserved: { index: Uint32Array.from([0, 9, 4, n]), bytes: trace.recordedReserved!.bytes } }
    assert.throws(() => encodeTrace(backwards), /point 2 of the recorded reserved series \(event 4\) is not after the one before it/)
    const past = { ...trace, recordedReserved: { index: Uint32Array.from([0, 7, 120, n + 1]), bytes: trace.recordedReserved!.bytes } }
    assert.throws(() => encodeTrace(past), new RegExp(`point 3 of the recorded reserved series is at event ${n + 1}, past the ${n} events`))
    const chunks = encodeTrace(trace)
    const at = chunks.findIndex((c) => sectionOf(c) === 'recorded_reserved')
    const bad = encodeChunk('recorded_reserved', 4, { event: backwards.recordedReserved.index, bytes: backwards.recordedReserved.bytes })
    refused(concat([...chunks.slice(0, at), bad, ...chunks.slice(at + 1)]), 'bad-value', /is not after the one before it/)
  })

  it("reads back a layout's event column, reads a layout without it as placed by time, and refuses an event past the events", () => {
    const trace = sampleTrace(300)
    const strategies = sampleStrategies(64)
    const n = trace.events.kind.length
    const event = Uint32Array.from({ length: strategies[0]!.layout!.op.length }, (_, k) => Math.min(n - 1, k * 3))
    const placed: StrategyResult[] = [{ ...strategies[0]!, layout: { ...strategies[0]!.layout!, event } }, ...strategies.slice(1)]
    const read = decodeTrace(concat(encodeTrace(trace, placed)), 'placed.vramscope')
    assert.deepEqual(Array.from(read.strategies[0]!.layout!.event!), Array.from(event))
    for (const s of read.strategies.slice(1)) if (s.layout) assert.equal(s.layout.event, undefined, `${s.name} has no event column`)
    const past = [{ ...placed[0]!, layout: { ...placed[0]!.layout!, event: event.map((e, k) => (k === 5 ? n : e)) } }]
    const message = `layout row 5 of strategy "caching \\(pytorch\\)" belongs to event ${n}, past the ${n} events`
    assert.throws(() => encodeTrace(trace, past), new RegExp(message))
    const chunks = encodeTrace(trace, placed)
    const layoutAt = chunks.findIndex((c) => sectionOf(c) === 'layout')
    const l = past[0]!.layout
    const badLayout = encodeChunk('layout', l.op.length, { ...l }, { 'vramscope.strategy': placed[0]!.name })
    refused(concat([...chunks.slice(0, layoutAt), badLayout, ...chunks.slice(layoutAt + 1)]), 'bad-value', new RegExp(message))
  })
})
