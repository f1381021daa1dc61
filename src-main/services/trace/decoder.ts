// Decoding a trace file's bytes (docs/trace-format.md) with every damage reported as a
// TraceFileError naming the file, byte offset, chunk and problem. No file I/O here (file.ts does
// it), so tests and fuzzers run on bytes.
import { RecordBatch, RecordBatchReader, type Data } from 'apache-arrow'

import { concatArrays } from '../../../src-shared/bytes.ts'
import { allocateLayout, type LayoutTrace } from '../../../src-shared/layout.ts'
import type { MetricsSeries, StrategyResult } from '../../../src-shared/results.ts'
import type { StrategySummary } from '../../../src-shared/summary.ts'
import { InputError } from '../input-error.ts'
import { readMessage, MessageError, type ArrowField, type BatchHeader, type FramedMessage } from './arrow-messages.ts'
import { crc32Hex } from './crc32.ts'
import { SectionCounter } from './encoder.ts'
import {
  layoutEventProblem,
  seriesProblem,
  traceProblem,
  type RecordedSeries,
  type RequestTrace,
  type TraceEvents,
  type TraceMeta,
  type TraceTables,
} from './model.ts'
import {
  describeType,
  EOS,
  FORMAT_MAJOR,
  FORMAT_NAME,
  FORMAT_VERSION,
  kindOf,
  MetaKey,
  OPTIONAL_COLUMNS,
  SECTION_COLUMNS,
  TWO_POW_32,
  type ColumnKind,
  type SectionName,
  type WriterKind,
} from './schema.ts'

export type TraceFileErrorCode =
  | 'unreadable' // the file system refused (missing file, permissions)
  | 'empty'
  | 'not-arrow' // not an Arrow IPC stream at all
  | 'not-vramscope' // an Arrow stream, but not a vramscope trace
  | 'truncated' // ends before its end section or inside a message
  | 'corrupt' // damaged structure
  | 'checksum' // a chunk's bytes do not match its CRC-32
  | 'wrong-schema' // a known section with missing or mistyped columns
  | 'newer-version' // written by a newer major version of the format
  | 'unsupported' // valid Arrow that vramscope does not use (compression, dictionaries, big-endian)
  | 'bad-value' // well-formed, but a value is impossible (index out of range, null)

export class TraceFileError extends InputError {
  constructor(
    file: string,
    readonly code: TraceFileErrorCode,
    problem: string,
    /** Byte offset of the problem in the file, when one applies. */
    readonly offset?: number,
    /** Index of the chunk (Arrow stream) in the file, and its section. */
    readonly chunk?: number,
    readonly section?: string,
  ) {
    const where: string[] = []
    if (offset !== undefined) where.push(`byte ${offset}`)
    if (chunk !== undefined) where.push(`chunk ${chunk}${section ? ` (${section})` : ''}`)
    super(file, where.join(', '), problem)
  }
}

export interface TraceFileInfo {
  version: string
  writer: WriterKind
  /** False when the file ends before its end section: a recording that was killed. */
  complete: boolean
  bytes: number
  chunks: number
  /** Bytes of a chunk cut short at the end of an incomplete recording, not read. */
  tornBytes: number
  /** Sections of a newer minor version that this reader skipped. */
  skippedSections: string[]
}

export interface TraceFileContents {
  trace: RequestTrace
  strategies: StrategyResult[]
  file: TraceFileInfo
}

export interface DecodeProgress {
  phase: 'read' | 'decode'
  bytesDone: number
  bytesTotal: number
}

interface Chunk {
  index: number
  offset: number
  end: number
  schemaMessage: FramedMessage
  fields: ArrowField[]
  metadata: Map<string, string>
  batches: (FramedMessage & { header: BatchHeader })[]
}

type DecodedColumn = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array | BigUint64Array | string[] | Uint32Array[]

interface StrategyParts {
  name: string
  strategy?: string
  params?: Record<string, unknown>
  layout: Record<string, DecodedColumn>[]
  metrics: Record<string, DecodedColumn>[]
  summary: StrategySummary
  hasSummary: boolean
  firstChunk: Chunk
}

const utf8Decoder = new TextDecoder('utf-8', { fatal: true })

/**
 * Decodes a trace file's bytes. `file` names the file in errors. A file written by the streaming
 * writer that ends early (the recording was killed) opens with what was flushed, `complete` false
 * and a warning; any other damage throws TraceFileError.
 *
 * Columns read from a single record batch are views into `bytes` (no copy): transferring one
 * column's buffer to a worker transfers them all, so slice a column first to send it alone.
 */
export function decodeTrace(bytes: Uint8Array, file: string, onProgress?: (p: DecodeProgress) => void): TraceFileContents {
  return new Decoder(bytes, file, onProgress).run()
}

/** Bytes of a file's start that checkTraceStart needs: the first chunk's schema message and more. */
export const TRACE_START_BYTES = 64 * 1024

/**
 * Checks a file's first message (the meta section's schema) before the rest is read, with the
 * errors decodeTrace gives, so a file that is not a vramscope trace is refused at byte 0 without
 * being loaded. `start` is the file's first bytes (TRACE_START_BYTES, or the whole file if
 * shorter); `size` the whole file's size. Returns when the start is a trace's or cannot tell.
 */
export function checkTraceStart(start: Uint8Array, file: string, size: number): void {
  new Decoder(start, file).checkStart(size)
}

class Decoder {
  private writer: WriterKind = 'file'
  private version = FORMAT_VERSION
  private readonly meta: TraceMeta = { source: '', warnings: [], properties: {} }
  private readonly tables: TraceTables = { streams: [], frames: [], stacks: [], tags: [], markers: [] }
  private readonly eventParts: { columns: Record<string, DecodedColumn>; chunk: Chunk; rows: number }[] = []
  private readonly seriesParts: { columns: Record<string, DecodedColumn>; chunk: Chunk }[] = []
  private readonly strategies = new Map<string, StrategyParts>()
  private readonly strategyOrder: string[] = []
  private readonly counter = new SectionCounter()
  private readonly skipped = new Set<string>()
  private endRows: { section: string; chunks: number; rows: number }[] | undefined
  private endChunk: Chunk | undefined
  private chunkCount = 0
  private tornBytes = 0

  constructor(
    private readonly bytes: Uint8Array,
    private readonly file: string,
    private readonly onProgress?: (p: DecodeProgress) => void,
  ) {}

  private fail(code: TraceFileErrorCode, problem: string, offset?: number, chunk?: Pick<Chunk, 'index' | 'metadata'> | number, section?: string): never {
    const index = typeof chunk === 'number' ? chunk : chunk?.index
    const name = section ?? (typeof chunk === 'object' ? chunk.metadata.get(MetaKey.section) : undefined)
    throw new TraceFileError(this.file, code, problem, offset, index, name)
  }

  checkStart(size: number): void {
    this.checkMagic()
    let first: FramedMessage
    try {
      first = readMessage(this.bytes, 0)
    } catch (e) {
      if (!(e instanceof MessageError)) throw e
      if (e.kind === 'truncated' && this.bytes.length < size) return // the first message is longer than the start read
      if (e.kind === 'corrupt' && e.offset === 0) this.fail('not-arrow', `not an Arrow IPC stream (it starts with bytes ${hexBytes(this.bytes, 0, 8)})`, 0)
      return // decodeTrace reports it with its position in context
    }
    if (first.header.kind !== 'schema') this.fail('not-arrow', `not an Arrow IPC stream (it starts with bytes ${hexBytes(this.bytes, 0, 8)})`, 0)
    this.checkFormat({ index: 0, offset: 0, fields: first.header.fields, metadata: first.header.metadata })
  }

  private checkMagic(): void {
    if (this.bytes.length === 0) this.fail('empty', 'the file is empty (0 bytes)', 0)
    if (startsWith(this.bytes, 'ARROW1'))
      this.fail('not-arrow', 'this is an Arrow IPC *file* (random-access format); vramscope traces are Arrow IPC streams', 0)
  }

  run(): TraceFileContents {
    const bytes = this.bytes
    this.checkMagic()
    let offset = 0
    let complete = false
    while (offset < bytes.length) {
      if (this.endChunk) this.fail('corrupt', `${bytes.length - offset} bytes follow the end section`, offset)
      let chunk: Chunk
      try {
        chunk = this.frameChunk(offset)
      } catch (e) {
        if (!(e instanceof MessageError)) throw e
        if (this.chunkCount > 0 && this.writer === 'stream' && (e.kind === 'truncated' || allZero(bytes, offset))) {
          this.tornBytes = bytes.length - offset
          break
        }
        if (this.chunkCount === 0 && e.offset === 0 && e.kind === 'corrupt')
          this.fail('not-arrow', `not an Arrow IPC stream (it starts with bytes ${hexBytes(bytes, 0, 8)})`, 0)
        const code = e.kind === 'truncated' ? 'truncated' : e.kind === 'unsupported' ? 'unsupported' : 'corrupt'
        this.fail(code, e.message, e.offset, this.chunkCount)
      }
      this.readChunk(chunk)
      this.chunkCount++
      offset = chunk.end
      this.onProgress?.({ phase: 'decode', bytesDone: offset, bytesTotal: bytes.length })
      if (this.endChunk) complete = true
    }
    if (!complete) {
      if (this.writer !== 'stream') this.fail('truncated', `the file ends before its end section (it was written whole, so it has been cut short)`, offset)
      const torn = this.tornBytes > 0 ? `; the last ${this.tornBytes} bytes (a write cut short) were skipped` : ''
      this.meta.warnings.push(
        `the recording did not finish: the file ends at byte ${offset} without its end section${torn}; events after the last flush are lost`,
      )
    }
    const trace: RequestTrace = { meta: this.meta, events: this.assembleEvents(), tables: this.tables }
    this.validate(trace.events)
    if (this.seriesParts.length > 0) {
      trace.recordedReserved = this.recordedSeries()
      const problem = seriesProblem(trace)
      if (problem) this.fail('bad-value', problem.problem, this.seriesParts[0]!.chunk.offset, this.seriesParts[0]!.chunk, 'recorded_reserved')
    }
    const strategies = this.assembleStrategies()
    const placed = layoutEventProblem(strategies, trace.events.kind.length)
    if (placed) this.fail('bad-value', placed.problem, 0, undefined, 'layout')
    if (this.endChunk) this.checkEndCounts()
    return {
      trace,
      strategies,
      file: {
        version: this.version,
        writer: this.writer,
        complete,
        bytes: bytes.length,
        chunks: this.chunkCount,
        tornBytes: this.tornBytes,
        skippedSections: [...this.skipped],
      },
    }
  }

  /** Frames one chunk: a schema, record batches, the end-of-stream marker. */
  private frameChunk(offset: number): Chunk {
    const first = readMessage(this.bytes, offset)
    if (first.header.kind !== 'schema') throw new MessageError('corrupt', offset, `a chunk must start with a schema message, found ${first.header.kind}`)
    const batches: Chunk['batches'] = []
    let at = first.end
    for (;;) {
      if (at >= this.bytes.length) throw new MessageError('truncated', at, 'the file ends inside a chunk (no end-of-stream marker)')
      const m = readMessage(this.bytes, at)
      at = m.end
      if (m.header.kind === 'eos') break
      if (m.header.kind === 'schema') throw new MessageError('corrupt', m.offset, 'a second schema message inside one chunk')
      batches.push(m as Chunk['batches'][number])
    }
    return { index: this.chunkCount, offset, end: at, schemaMessage: first, fields: first.header.fields, metadata: first.header.metadata, batches }
  }

  /** The format, version and (first chunk) section of a chunk's schema metadata. */
  private checkFormat(chunk: Pick<Chunk, 'index' | 'offset' | 'fields' | 'metadata'>): string {
    const md = chunk.metadata
    const format = md.get(MetaKey.format)
    if (format !== FORMAT_NAME) {
      const fields = chunk.fields.map((f) => `${f.name}: ${describeType(f)}`).join(', ')
      this.fail(
        chunk.index === 0 ? 'not-vramscope' : 'corrupt',
        `an Arrow stream without vramscope metadata (${MetaKey.format} is ${format === undefined ? 'missing' : JSON.stringify(format)}; fields: ${fields || 'none'})`,
        chunk.offset,
        chunk,
      )
    }
    const version = md.get(MetaKey.version) ?? ''
    const match = /^(\d+)\.(\d+)$/.exec(version)
    if (!match) this.fail('corrupt', `format version ${JSON.stringify(version)} is not major.minor`, chunk.offset, chunk)
    if (Number(match[1]) > FORMAT_MAJOR)
      this.fail('newer-version', `written in trace format ${version} by a newer vramscope; this one reads ${FORMAT_MAJOR}.x`, chunk.offset, chunk)
    if (Number(match[1]) < FORMAT_MAJOR) this.fail('corrupt', `format version ${version} does not exist`, chunk.offset, chunk)
    const section = md.get(MetaKey.section) ?? ''
    if (chunk.index === 0) {
      if (section !== 'meta') this.fail('not-vramscope', `the first section is ${JSON.stringify(section)}, expected "meta"`, chunk.offset, chunk)
      this.version = version
      const writer = md.get(MetaKey.writer) ?? 'file'
      if (writer !== 'file' && writer !== 'stream') this.fail('corrupt', `unknown writer ${JSON.stringify(writer)}`, chunk.offset, chunk)
      this.writer = writer
    }
    return section
  }

  private readChunk(chunk: Chunk): void {
    const section = this.checkFormat(chunk)
    this.checkCrc(chunk)
    const rows = chunk.batches.reduce((n, b) => n + b.header.length, 0)
    if (section === 'end') {
      this.endChunk = chunk
      const parts = this.decodeColumns(chunk, 'end')
      this.endRows = parts.flatMap((p) => {
        const names = p['section'] as string[]
        const rowCounts = this.uint64Numbers(p['rows'] as BigUint64Array, 'end rows', chunk)
        return names.map((s, i) => ({ section: s, chunks: (p['chunks'] as Uint32Array)[i]!, rows: rowCounts[i]! }))
      })
      return
    }
    this.counter.add(section, rows)
    if (!(section in SECTION_COLUMNS)) {
      this.skipped.add(section)
      return
    }
    const name = section as SectionName
    const parts = this.decodeColumns(chunk, name)
    switch (name) {
      case 'meta':
        for (const p of parts) this.addMeta(p['key'] as string[], p['value'] as string[])
        break
      case 'streams':
      case 'tags':
      case 'markers':
        for (const p of parts) appendAll(this.tables[name], p['name'] as string[])
        break
      case 'pools':
        for (const p of parts) appendAll((this.tables.pools ??= []), p['name'] as string[])
        break
      case 'frames':
        for (const p of parts) {
          const names = p['name'] as string[]
          const files = p['filename'] as string[]
          const lines = p['line'] as Int32Array
          for (let i = 0; i < names.length; i++) this.tables.frames.push({ name: names[i]!, filename: files[i]!, line: lines[i]! })
        }
        break
      case 'stacks':
        for (const p of parts) appendAll(this.tables.stacks, p['frames'] as Uint32Array[])
        break
      case 'events':
        for (const [i, p] of parts.entries()) this.eventParts.push({ columns: p, chunk, rows: chunk.batches[i]!.header.length })
        break
      case 'recorded_reserved':
        for (const p of parts) this.seriesParts.push({ columns: p, chunk })
        break
      case 'strategies':
        for (const p of parts) {
          const names = p['name'] as string[]
          for (let i = 0; i < names.length; i++) {
            const s = this.strategyParts(names[i]!, chunk)
            if (s.strategy !== undefined) this.fail('bad-value', `strategy "${s.name}" is listed twice`, chunk.offset, chunk)
            s.strategy = (p['strategy'] as string[])[i]!
            try {
              const params: unknown = JSON.parse((p['params'] as string[])[i]!)
              if (typeof params !== 'object' || params === null || Array.isArray(params)) throw new Error('not an object')
              s.params = params as Record<string, unknown>
            } catch (e) {
              this.fail('bad-value', `the parameters of strategy "${s.name}" are not a JSON object (${(e as Error).message})`, chunk.offset, chunk)
            }
          }
        }
        break
      case 'layout':
      case 'metrics':
      case 'summary': {
        const owner = chunk.metadata.get(MetaKey.strategy)
        if (owner === undefined) this.fail('wrong-schema', `a ${name} section without ${MetaKey.strategy}`, chunk.offset, chunk)
        const s = this.strategyParts(owner, chunk)
        if (name === 'summary') {
          s.hasSummary = true
          for (const p of parts) {
            const keys = p['key'] as string[]
            for (let i = 0; i < keys.length; i++) (s.summary as Record<string, number>)[keys[i]!] = (p['value'] as Float64Array)[i]!
          }
        } else {
          appendAll(s[name], parts)
        }
        break
      }
    }
  }

  private strategyParts(name: string, chunk: Chunk): StrategyParts {
    let s = this.strategies.get(name)
    if (!s) {
      s = { name, layout: [], metrics: [], summary: {}, hasSummary: false, firstChunk: chunk }
      this.strategies.set(name, s)
      this.strategyOrder.push(name)
    }
    return s
  }

  private checkCrc(chunk: Chunk): void {
    const stored = chunk.metadata.get(MetaKey.crc32)
    if (stored === undefined) this.fail('corrupt', `the chunk has no ${MetaKey.crc32}`, chunk.offset, chunk)
    const from = chunk.schemaMessage.end
    const to = chunk.end - EOS.length
    const computed = crc32Hex(this.bytes.subarray(from, to))
    if (computed !== stored)
      this.fail(
        'checksum',
        `the chunk's ${to - from} bytes of record batches fail their CRC-32 (stored ${stored}, computed ${computed}): the file is damaged`,
        from,
        chunk,
      )
  }

  /** The columns of a known section, one record per batch, checked against the section's schema. */
  private decodeColumns(chunk: Chunk, section: SectionName): Record<string, DecodedColumn>[] {
    const spec: Record<string, ColumnKind> = { ...(SECTION_COLUMNS[section] as Record<string, ColumnKind>) }
    const indices = new Map<string, number>()
    // Optional columns (schema.ts) where the chunk has them, checked like the others.
    for (const [name, kind] of Object.entries(OPTIONAL_COLUMNS[section] ?? {})) {
      const index = chunk.fields.findIndex((f) => f.name === name)
      if (index < 0) continue
      const field = chunk.fields[index]!
      if (kindOf(field) !== kind) this.fail('wrong-schema', `column "${name}" of ${section} is ${describeType(field)}, expected ${kind}`, chunk.offset, chunk)
      spec[name] = kind
      indices.set(name, index)
    }
    for (const [name, kind] of Object.entries(spec)) {
      const index = chunk.fields.findIndex((f) => f.name === name)
      if (index < 0)
        this.fail(
          'wrong-schema',
          `section ${section} has no column "${name}" (it has ${chunk.fields.map((f) => f.name).join(', ') || 'none'})`,
          chunk.offset,
          chunk,
        )
      const field = chunk.fields[index]!
      if (kindOf(field) !== kind) this.fail('wrong-schema', `column "${name}" of ${section} is ${describeType(field)}, expected ${kind}`, chunk.offset, chunk)
      indices.set(name, index)
    }
    if (chunk.batches.length === 0) return []
    const expectedNodes = chunk.fields.reduce((n, f) => n + countNodes(f), 0)
    for (const b of chunk.batches) {
      if (b.header.nodes.length !== expectedNodes)
        this.fail('corrupt', `a record batch with ${b.header.nodes.length} field nodes for ${expectedNodes} fields`, b.offset, chunk)
    }
    let batches: RecordBatch[]
    try {
      const reader = RecordBatchReader.from(this.bytes.subarray(chunk.offset, chunk.end))
      batches = [...reader]
    } catch (e) {
      this.fail('corrupt', `Arrow could not decode the chunk: ${(e as Error).message}`, chunk.offset, chunk)
    }
    if (batches.length !== chunk.batches.length)
      this.fail('corrupt', `Arrow read ${batches.length} record batches where the chunk frames ${chunk.batches.length}`, chunk.offset, chunk)
    // A field's first node: fields with children (lists) take one node each for themselves and them.
    const firstNode: number[] = []
    let node = 0
    for (const f of chunk.fields) {
      firstNode.push(node)
      node += countNodes(f)
    }
    return batches.map((batch, b) => {
      const framed = chunk.batches[b]!
      const rows = framed.header.length
      const out: Record<string, DecodedColumn> = {}
      for (const [name, index] of indices) {
        const n = framed.header.nodes[firstNode[index]!]!
        const where = `column "${name}" of record batch ${b}`
        if (n.length !== rows) this.fail('corrupt', `${where} has ${n.length} rows, the batch ${rows}`, framed.offset, chunk)
        if (n.nullCount !== 0) this.fail('bad-value', `${where} has ${n.nullCount} nulls (vramscope columns have none)`, framed.offset, chunk)
        const data = batch.getChildAt(index)?.data[0]
        if (!data) this.fail('corrupt', `${where} is missing`, framed.offset, chunk)
        out[name] = this.columnValues(spec[name]!, data, rows, where, framed.offset, chunk)
      }
      return out
    })
  }

  private columnValues(kind: ColumnKind, data: Data, rows: number, where: string, offset: number, chunk: Chunk): DecodedColumn {
    const bad = (problem: string): never => this.fail('corrupt', `${where}: ${problem}`, offset, chunk)
    switch (kind) {
      case 'u8':
      case 'u16':
      case 'u32':
      case 'i32':
      case 'f64':
      case 'u64': {
        const values = data.values as Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array | BigUint64Array
        if (!values || values.length < rows) bad(`its buffer holds ${values?.length ?? 0} values for ${rows} rows`)
        return values.subarray(0, rows)
      }
      case 'utf8': {
        const offsets = data.valueOffsets as Int32Array
        const values = data.values as Uint8Array
        if (!offsets || offsets.length < rows + 1) bad(`its offsets buffer is too short`)
        const strings: string[] = new Array<string>(rows)
        let previous = offsets[0]!
        if (previous < 0) bad('a negative string offset')
        for (let i = 0; i < rows; i++) {
          const next = offsets[i + 1]!
          if (next < previous || next > values.length) bad(`string ${i} has offsets ${previous}..${next} outside ${values.length} bytes`)
          try {
            strings[i] = next === previous ? '' : utf8Decoder.decode(values.subarray(previous, next))
          } catch {
            this.fail('bad-value', `${where}: string ${i} is not valid UTF-8`, offset, chunk)
          }
          previous = next
        }
        return strings
      }
      case 'list<u32>': {
        const offsets = data.valueOffsets as Int32Array
        const child = data.children[0]
        const values = child?.values as Uint32Array | undefined
        if (!offsets || offsets.length < rows + 1 || !values) bad('its offsets or values are missing')
        if (child!.nullCount > 0) this.fail('bad-value', `${where}: list items have nulls`, offset, chunk)
        const childLength = Math.min(child!.length, values!.length)
        const lists: Uint32Array[] = new Array<Uint32Array>(rows)
        for (let i = 0; i < rows; i++) {
          const from = offsets[i]!
          const to = offsets[i + 1]!
          if (from < 0 || to < from || to > childLength) bad(`list ${i} has offsets ${from}..${to} outside ${childLength} items`)
          lists[i] = values!.subarray(from, to)
        }
        return lists
      }
    }
  }

  private addMeta(keys: string[], values: string[]): void {
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!
      const v = values[i]!
      if (k === 'source') this.meta.source = v
      else if (k === 'origin') this.meta.origin = v
      else if (k === 'gpu') this.meta.gpu = v
      else if (k === 'driver') this.meta.driver = v
      else if (k === 'warning') this.meta.warnings.push(v)
      else this.meta.properties[k.startsWith('property.') ? k.slice('property.'.length) : k] = v
    }
  }

  private assembleEvents(): TraceEvents {
    const parts = this.eventParts
    const total = parts.reduce((n, p) => n + p.rows, 0)
    if (parts.length === 1) {
      const c = parts[0]!.columns
      return {
        kind: c['kind'] as Uint8Array,
        id: c['id'] as Uint32Array,
        size: this.uint64Numbers(c['size'] as BigUint64Array, 'size', parts[0]!.chunk),
        stream: c['stream'] as Uint32Array,
        device: c['device'] as Uint16Array,
        time: c['time'] as Float64Array,
        stack: c['stack'] as Int32Array,
        tag: c['tag'] as Int32Array,
        ...(c['pool'] === undefined ? {} : { pool: c['pool'] as Uint32Array }),
      }
    }
    const events: TraceEvents = {
      kind: new Uint8Array(total),
      id: new Uint32Array(total),
      size: new Float64Array(total),
      stream: new Uint32Array(total),
      device: new Uint16Array(total),
      time: new Float64Array(total),
      stack: new Int32Array(total),
      tag: new Int32Array(total),
    }
    // A pool column where any chunk has one; a chunk without reads as the default pools (0).
    if (parts.some((p) => p.columns['pool'] !== undefined)) events.pool = new Uint32Array(total)
    let at = 0
    for (const p of parts) {
      const c = p.columns
      events.kind.set(c['kind'] as Uint8Array, at)
      events.id.set(c['id'] as Uint32Array, at)
      this.uint64Numbers(c['size'] as BigUint64Array, 'size', p.chunk, events.size, at)
      events.stream.set(c['stream'] as Uint32Array, at)
      events.device.set(c['device'] as Uint16Array, at)
      events.time.set(c['time'] as Float64Array, at)
      events.stack.set(c['stack'] as Int32Array, at)
      events.tag.set(c['tag'] as Int32Array, at)
      if (events.pool !== undefined && c['pool'] !== undefined) events.pool.set(c['pool'] as Uint32Array, at)
      at += p.rows
    }
    return events
  }

  /**
   * uint64 values as exact numbers, into `out` from `at` (a new array by default); beyond 2^53 is a
   * bad value (no byte count gets there).
   */
  private uint64Numbers(values: BigUint64Array, what: string, chunk: Chunk, out: Float64Array = new Float64Array(values.length), at = 0): Float64Array {
    const words = new Uint32Array(values.buffer, values.byteOffset, values.length * 2)
    for (let i = 0; i < values.length; i++) {
      const high = words[2 * i + 1]!
      if (high >= 1 << 21) this.fail('bad-value', `${what} of row ${i} is ${values[i]}, beyond 2^53`, chunk.offset, chunk)
      out[at + i] = high * TWO_POW_32 + words[2 * i]!
    }
    return out
  }

  /** The trace's references hold together (model.ts, traceProblem), or the error names the event and its chunk. */
  private validate(e: TraceEvents): void {
    const found = traceProblem(e, this.tables)
    if (!found) return
    if (found.row === undefined) this.fail('bad-value', found.problem)
    // The chunk that holds event `row`, for the message.
    let first = 0
    for (const p of this.eventParts) {
      if (found.row < first + p.rows) this.fail('bad-value', `event ${found.row}: ${found.problem}`, p.chunk.offset, p.chunk, 'events')
      first += p.rows
    }
    this.fail('bad-value', `event ${found.row}: ${found.problem}`, 0, undefined, 'events')
  }

  private assembleStrategies(): StrategyResult[] {
    return this.strategyOrder.map((name) => {
      const s = this.strategies.get(name)!
      if (s.strategy === undefined || s.params === undefined)
        this.fail('bad-value', `sections name strategy "${name}", which is not in the strategies table`, s.firstChunk.offset, s.firstChunk)
      const result: StrategyResult = { name, strategy: s.strategy, params: s.params }
      if (s.layout.length > 0) result.layout = this.layout(s)
      if (s.metrics.length > 0) result.metrics = this.metrics(s)
      if (s.hasSummary) result.summary = s.summary
      return result
    })
  }

  /** The recorded_reserved section's points, in file order. */
  private recordedSeries(): RecordedSeries {
    const parts = this.seriesParts
    return {
      index: concatArrays(
        parts.map((p) => p.columns['event'] as Uint32Array),
        (n) => new Uint32Array(n),
      ),
      bytes: concatArrays(
        parts.map((p) => this.uint64Numbers(p.columns['bytes'] as BigUint64Array, 'recorded_reserved bytes', p.chunk)),
        (n) => new Float64Array(n),
      ),
    }
  }

  private layout(s: StrategyParts): LayoutTrace {
    const parts = s.layout
    const c = s.firstChunk
    const total = parts.reduce((n, p) => n + (p['op'] as Uint8Array).length, 0)
    const out = allocateLayout(total)
    // Each row's request event where every chunk of the layout says it (schema.ts, OPTIONAL_COLUMNS).
    if (parts.every((p) => p['event'] !== undefined)) out.event = new Uint32Array(total)
    let at = 0
    for (const p of parts) {
      out.op.set(p['op'] as Uint8Array, at)
      out.address.set(p['address'] as BigUint64Array, at)
      this.uint64Numbers(p['size'] as BigUint64Array, 'layout size', c, out.size, at)
      this.uint64Numbers(p['requested'] as BigUint64Array, 'layout requested', c, out.requested, at)
      this.uint64Numbers(p['stream'] as BigUint64Array, 'layout stream', c, out.stream, at)
      out.time.set(p['time'] as Float64Array, at)
      out.aux.set(p['aux'] as Uint32Array, at)
      if (out.event) out.event.set(p['event'] as Uint32Array, at)
      at += (p['op'] as Uint8Array).length
    }
    return out
  }

  private metrics(s: StrategyParts): MetricsSeries {
    const parts = s.metrics
    const c = s.firstChunk
    const concat = (column: string, asNumbers: boolean): Float64Array => {
      const arrays = parts.map((p) => (asNumbers ? this.uint64Numbers(p[column] as BigUint64Array, `metrics ${column}`, c) : (p[column] as Float64Array)))
      return concatArrays(arrays, (n) => new Float64Array(n))
    }
    return {
      time: concat('time', false),
      requested: concat('requested', true),
      rounded: concat('rounded', true),
      reserved: concat('reserved', true),
      externalFragmentation: concat('external_fragmentation', false),
      deviceCalls: concat('device_calls', true),
    }
  }

  private checkEndCounts(): void {
    const end = this.endChunk!
    const listed = new Map(this.endRows!.map((r) => [r.section, r]))
    for (const [section, seen] of this.counter.counts) {
      const l = listed.get(section)
      if (!l || l.chunks !== seen.chunks || l.rows !== seen.rows)
        this.fail(
          'corrupt',
          `the end section lists ${l ? `${l.chunks} chunks and ${l.rows} rows` : 'nothing'} of ${section}, the file holds ${seen.chunks} chunks and ${seen.rows} rows`,
          end.offset,
          end,
        )
    }
    for (const [section, l] of listed) {
      if (!this.counter.counts.has(section))
        this.fail('corrupt', `the end section lists ${l.chunks} chunks of ${section}, the file holds none`, end.offset, end)
    }
  }
}

/** Appends in a loop: a spread (`push(...items)`) passes every item as an argument and overflows the
 * call stack past about 100,000 of them, and a table may hold millions of rows. */
function appendAll<T>(target: T[], items: readonly T[]): void {
  for (const item of items) target.push(item)
}

function countNodes(field: ArrowField): number {
  return 1 + field.children.reduce((n, c) => n + countNodes(c), 0)
}

function startsWith(bytes: Uint8Array, ascii: string): boolean {
  if (bytes.length < ascii.length) return false
  for (let i = 0; i < ascii.length; i++) if (bytes[i] !== ascii.charCodeAt(i)) return false
  return true
}

function allZero(bytes: Uint8Array, from: number): boolean {
  for (let i = from; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}

function hexBytes(bytes: Uint8Array, from: number, count: number): string {
  return Array.from(bytes.subarray(from, from + count), (b) => b.toString(16).padStart(2, '0')).join(' ')
}
