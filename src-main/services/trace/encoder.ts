// Encoding a request trace and strategy results into trace file chunks (docs/trace-format.md), each
// a complete Arrow IPC stream for one section. No file I/O here (file.ts does it).
import { makeData, RecordBatch, RecordBatchStreamWriter, Schema, Struct, Field, List, Uint32, Uint64, Utf8, type Data } from 'apache-arrow'

import type { StrategyResult } from '../../../src-shared/results.ts'
import { crc32Hex } from './crc32.ts'
import { layoutEventProblem, seriesProblem, traceProblem, type Frame, type RequestTrace, type TraceEvents, type TraceMeta } from './model.ts'
import {
  arrowType,
  EOS,
  FORMAT_NAME,
  FORMAT_VERSION,
  MAX_BATCH_ROWS,
  MetaKey,
  OPTIONAL_COLUMNS,
  SECTION_COLUMNS,
  TWO_POW_32,
  type ColumnKind,
  type Columns,
  type ColumnValues,
  type SectionName,
  type WriterKind,
} from './schema.ts'

const utf8Encoder = new TextEncoder()

/** Numbers that are whole and within [0, 2^53] as uint64 little-endian words. */
export function numbersToUint64(values: Float64Array, what: string): BigUint64Array {
  const words = new Uint32Array(values.length * 2)
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!
    if (!(v >= 0 && v <= Number.MAX_SAFE_INTEGER && Math.floor(v) === v))
      throw new RangeError(`${what}[${i}] must be a whole number from 0 to 2^53 - 1 to be stored as uint64, got ${v}`)
    const high = Math.floor(v / TWO_POW_32)
    words[2 * i] = v - high * TWO_POW_32
    words[2 * i + 1] = high
  }
  return new BigUint64Array(words.buffer)
}

function columnData(kind: ColumnKind, values: ColumnValues, from: number, to: number, what: string): Data {
  const length = to - from
  switch (kind) {
    case 'u8':
    case 'u16':
    case 'u32':
    case 'i32':
    case 'f64':
      return makeData({ type: arrowType(kind) as never, length, data: (values as Float64Array).subarray(from, to) })
    case 'u64': {
      const data = values instanceof BigUint64Array ? values.subarray(from, to) : numbersToUint64((values as Float64Array).subarray(from, to), what)
      return makeData({ type: new Uint64(), length, data })
    }
    case 'utf8': {
      const strings = values as string[]
      const offsets = new Int32Array(length + 1)
      let bytes = new Uint8Array(Math.max(64, length * 16))
      let used = 0
      for (let i = 0; i < length; i++) {
        const s = strings[from + i]!
        // encodeInto needs up to 3 bytes per UTF-16 unit.
        if (used + s.length * 3 > bytes.length) {
          const grown = new Uint8Array(Math.max(bytes.length * 2, used + s.length * 3))
          grown.set(bytes.subarray(0, used))
          bytes = grown
        }
        used += utf8Encoder.encodeInto(s, bytes.subarray(used)).written
        if (used > 0x7fffffff) throw new RangeError(`${what}: more than 2 GiB of text in one batch`)
        offsets[i + 1] = used
      }
      return makeData({ type: new Utf8(), length, valueOffsets: offsets, data: bytes.subarray(0, used) })
    }
    case 'list<u32>': {
      const lists = values as Uint32Array[]
      const offsets = new Int32Array(length + 1)
      let total = 0
      for (let i = 0; i < length; i++) offsets[i + 1] = total += lists[from + i]!.length
      const flat = new Uint32Array(total)
      for (let i = 0; i < length; i++) flat.set(lists[from + i]!, offsets[i]!)
      const child = makeData({ type: new Uint32(), length: total, data: flat })
      return makeData({ type: arrowType(kind) as List<Uint32>, length, valueOffsets: offsets, child })
    }
  }
}

function serialize(schema: Schema, batches: RecordBatch[]): Uint8Array {
  const writer = new RecordBatchStreamWriter()
  writer.reset(undefined, schema)
  for (const batch of batches) writer.write(batch)
  writer.finish()
  return writer.toUint8Array(true)
}

/**
 * One chunk: a complete Arrow IPC stream holding `rows` rows of `section`. Its schema metadata
 * carries the format, version, section and the CRC-32 of the record batch messages that follow
 * the schema (everything up to the end-of-stream marker), so damage is found before decoding.
 */
export function encodeChunk<S extends SectionName>(
  section: S,
  rows: number,
  columns: Record<Columns<S>, ColumnValues> & Record<string, ColumnValues | undefined>,
  metadata: Record<string, string> = {},
): Uint8Array {
  // The section's columns, then those of its optional columns that `columns` has.
  const optional: Record<string, ColumnKind> = OPTIONAL_COLUMNS[section] ?? {}
  const spec: Record<string, ColumnKind> = { ...(SECTION_COLUMNS[section] as Record<string, ColumnKind>) }
  for (const [name, kind] of Object.entries(optional)) if ((columns as Record<string, ColumnValues | undefined>)[name] !== undefined) spec[name] = kind
  const names = Object.keys(spec)
  const fields = names.map((name) => new Field(name, arrowType(spec[name]!), false))
  for (const name of names) {
    const values = (columns as Record<string, ColumnValues>)[name]
    if (!values || values.length < rows) throw new RangeError(`${section}.${name} has ${values?.length ?? 0} values, expected ${rows}`)
  }
  const baseMetadata = new Map<string, string>([
    [MetaKey.format, FORMAT_NAME],
    [MetaKey.version, FORMAT_VERSION],
    [MetaKey.section, section],
    ...Object.entries(metadata),
  ])
  const plainSchema = new Schema(fields, baseMetadata)
  const batches: RecordBatch[] = []
  for (let from = 0; from < rows; from += MAX_BATCH_ROWS) {
    const to = Math.min(rows, from + MAX_BATCH_ROWS)
    const children = names.map((name) => columnData(spec[name]!, (columns as Record<string, ColumnValues>)[name]!, from, to, `${section}.${name}`))
    batches.push(new RecordBatch(plainSchema, makeData({ type: new Struct(fields), length: to - from, children })))
  }
  const withoutChecksum = serialize(plainSchema, batches)
  const schemaBytes = 8 + new DataView(withoutChecksum.buffer, withoutChecksum.byteOffset).getInt32(4, true)
  const batchBytes = withoutChecksum.subarray(schemaBytes, withoutChecksum.length - EOS.length)
  const checkedSchema = new Schema(fields, new Map([...baseMetadata, [MetaKey.crc32, crc32Hex(batchBytes)]]))
  const header = serialize(checkedSchema, [])
  const out = new Uint8Array(header.length - EOS.length + batchBytes.length + EOS.length)
  out.set(header.subarray(0, header.length - EOS.length))
  out.set(batchBytes, header.length - EOS.length)
  out.set(EOS, out.length - EOS.length)
  return out
}

/** Rows of the meta section for `meta`. */
export function metaRows(meta: Partial<TraceMeta>): { key: string[]; value: string[] } {
  const key: string[] = []
  const value: string[] = []
  const put = (k: string, v: string | undefined) => {
    if (v === undefined) return
    key.push(k)
    value.push(v)
  }
  put('source', meta.source)
  put('origin', meta.origin)
  put('gpu', meta.gpu)
  put('driver', meta.driver)
  for (const w of meta.warnings ?? []) put('warning', w)
  for (const [k, v] of Object.entries(meta.properties ?? {})) put(`property.${k}`, v)
  return { key, value }
}

export function encodeMetaChunk(meta: Partial<TraceMeta>, writer?: WriterKind): Uint8Array {
  const rows = metaRows(meta)
  return encodeChunk('meta', rows.key.length, rows, writer ? { [MetaKey.writer]: writer } : {})
}

export function encodeNames(section: 'streams' | 'tags' | 'markers' | 'pools', names: string[]): Uint8Array {
  return encodeChunk(section, names.length, { name: names })
}

export function encodeFrames(frames: Frame[]): Uint8Array {
  return encodeChunk('frames', frames.length, {
    name: frames.map((f) => f.name),
    filename: frames.map((f) => f.filename),
    line: Int32Array.from(frames, (f) => f.line),
  })
}

export function encodeStacks(stacks: Uint32Array[]): Uint8Array {
  return encodeChunk('stacks', stacks.length, { frames: stacks })
}

export function encodeEvents(events: TraceEvents, rows = events.kind.length): Uint8Array {
  return encodeChunk('events', rows, { ...events })
}

/** Counts of what a writer wrote, for the end section. */
export class SectionCounter {
  readonly counts = new Map<string, { chunks: number; rows: number }>()

  add(section: string, rows: number): void {
    const c = this.counts.get(section) ?? { chunks: 0, rows: 0 }
    c.chunks += 1
    c.rows += rows
    this.counts.set(section, c)
  }

  encodeEnd(): Uint8Array {
    const sections = [...this.counts.keys()]
    return encodeChunk('end', sections.length, {
      section: sections,
      chunks: Uint32Array.from(sections, (s) => this.counts.get(s)!.chunks),
      rows: Float64Array.from(sections, (s) => this.counts.get(s)!.rows),
    })
  }
}

function encodeStrategy(result: StrategyResult, counter: SectionCounter): Uint8Array[] {
  const chunks: Uint8Array[] = []
  const tag = { [MetaKey.strategy]: result.name }
  if (result.layout) {
    const l = result.layout
    chunks.push(encodeChunk('layout', l.op.length, { ...l }, tag))
    counter.add('layout', l.op.length)
  }
  if (result.metrics) {
    const m = result.metrics
    chunks.push(
      encodeChunk(
        'metrics',
        m.time.length,
        {
          time: m.time,
          requested: m.requested,
          rounded: m.rounded,
          reserved: m.reserved,
          external_fragmentation: m.externalFragmentation,
          device_calls: m.deviceCalls,
        },
        tag,
      ),
    )
    counter.add('metrics', m.time.length)
  }
  if (result.summary) {
    // Every figure it holds, also those a newer version wrote: what is read is written back.
    const summary = result.summary as Record<string, number>
    const keys = Object.keys(summary)
    chunks.push(encodeChunk('summary', keys.length, { key: keys, value: Float64Array.from(keys, (k) => summary[k]!) }, tag))
    counter.add('summary', keys.length)
  }
  return chunks
}

/** A whole trace file, chunk by chunk (concatenated, they are the file). */
export function encodeTrace(trace: RequestTrace, strategies: StrategyResult[] = []): Uint8Array[] {
  const names = new Set<string>()
  for (const s of strategies) {
    if (names.has(s.name)) throw new RangeError(`strategies: the name "${s.name}" appears twice; names must be unique in a file`)
    names.add(s.name)
  }
  const problem = traceProblem(trace.events, trace.tables) ?? seriesProblem(trace) ?? layoutEventProblem(strategies, trace.events.kind.length)
  if (problem)
    throw new RangeError(
      `${problem.row === undefined ? 'tables' : `events[${problem.row}]`}: ${problem.problem}; a trace file holds only traces whose references hold`,
    )
  const counter = new SectionCounter()
  const chunks: Uint8Array[] = []
  const push = (section: string, rows: number, bytes: Uint8Array) => {
    counter.add(section, rows)
    chunks.push(bytes)
  }
  const t = trace.tables
  push('meta', metaRows(trace.meta).key.length, encodeMetaChunk(trace.meta, 'file'))
  push('streams', t.streams.length, encodeNames('streams', t.streams))
  push('frames', t.frames.length, encodeFrames(t.frames))
  push('stacks', t.stacks.length, encodeStacks(t.stacks))
  push('tags', t.tags.length, encodeNames('tags', t.tags))
  push('markers', t.markers.length, encodeNames('markers', t.markers))
  if (t.pools !== undefined) push('pools', t.pools.length, encodeNames('pools', t.pools))
  push('events', trace.events.kind.length, encodeEvents(trace.events))
  const series = trace.recordedReserved
  if (series !== undefined)
    push('recorded_reserved', series.index.length, encodeChunk('recorded_reserved', series.index.length, { event: series.index, bytes: series.bytes }))
  if (strategies.length > 0) {
    push(
      'strategies',
      strategies.length,
      encodeChunk('strategies', strategies.length, {
        name: strategies.map((s) => s.name),
        strategy: strategies.map((s) => s.strategy),
        params: strategies.map((s) => JSON.stringify(s.params)),
      }),
    )
    for (const s of strategies) chunks.push(...encodeStrategy(s, counter))
  }
  chunks.push(counter.encodeEnd())
  return chunks
}
