// The trace file format's schema (docs/trace-format.md): its name and version, the metadata keys,
// and each section's columns with their Arrow types. The encoder and the decoder both read it, so a
// column is declared once.
import { Field, Float64, Int32, List, Uint16, Uint32, Uint64, Uint8, Utf8, type DataType } from 'apache-arrow'

import type { ArrowField, ArrowType } from './arrow-messages.ts'

export const FORMAT_NAME = 'vramscope-trace'
/** major.minor: a reader reads every minor version of its major (unknown sections and columns are skipped). */
export const FORMAT_VERSION = '1.2'
export const FORMAT_MAJOR = 1
/** What the app offers to open and save; the content decides, not the name. */
export const TRACE_FILE_EXTENSIONS = ['.vramscope', '.arrow'] as const
/** Rows per record batch: a 1 M-event trace is one batch, read without copying. */
export const MAX_BATCH_ROWS = 1 << 21

export const MetaKey = {
  format: 'vramscope.format',
  version: 'vramscope.version',
  section: 'vramscope.section',
  crc32: 'vramscope.crc32',
  writer: 'vramscope.writer',
  strategy: 'vramscope.strategy',
} as const

export type WriterKind = 'file' | 'stream'

// --- sections -----------------------------------------------------------------------------------

export type ColumnKind = 'u8' | 'u16' | 'u32' | 'i32' | 'u64' | 'f64' | 'utf8' | 'list<u32>'

export const SECTION_COLUMNS = {
  meta: { key: 'utf8', value: 'utf8' },
  streams: { name: 'utf8' },
  frames: { name: 'utf8', filename: 'utf8', line: 'i32' },
  stacks: { frames: 'list<u32>' },
  tags: { name: 'utf8' },
  markers: { name: 'utf8' },
  /** 1.1: the private memory pools events name in their optional pool column (row k - 1 is pool k). */
  pools: { name: 'utf8' },
  events: { kind: 'u8', id: 'u32', size: 'u64', stream: 'u32', device: 'u16', time: 'f64', stack: 'i32', tag: 'i32' },
  strategies: { name: 'utf8', strategy: 'utf8', params: 'utf8' },
  layout: { op: 'u8', address: 'u64', size: 'u64', requested: 'u64', stream: 'u64', time: 'f64', aux: 'u32' },
  metrics: {
    time: 'f64',
    requested: 'u64',
    rounded: 'u64',
    reserved: 'u64',
    external_fragmentation: 'f64',
    device_calls: 'u64',
  },
  summary: { key: 'utf8', value: 'f64' },
  /** 1.2, optional: the allocator's own reserved bytes as the source recorded them (RequestTrace.recordedReserved): from event `event` on, `bytes`. */
  recorded_reserved: { event: 'u32', bytes: 'u64' },
  end: { section: 'utf8', chunks: 'u32', rows: 'u64' },
} as const satisfies Record<string, Record<string, ColumnKind>>

/**
 * Columns a section may lack (1.1 on): a reader takes them where a chunk has them. events.pool (1.1):
 * 0 the default pools, k >= 1 the k-th private pool (pools row k - 1); a missing one reads as all
 * zeros. layout.event (1.2): a recorded layout's request event of each row (LayoutTrace.event); a
 * strategy whose layout chunks do not all have it reads without it (placed by time).
 */
export const OPTIONAL_COLUMNS: Partial<Record<keyof typeof SECTION_COLUMNS, Record<string, ColumnKind>>> = {
  events: { pool: 'u32' },
  layout: { event: 'u32' },
}

export type SectionName = keyof typeof SECTION_COLUMNS
export type Columns<S extends SectionName> = keyof (typeof SECTION_COLUMNS)[S] & string

/** Values of one column for encoding; u64 columns take numbers (checked to be exact) or bigints. */
export type ColumnValues = Uint8Array | Uint16Array | Uint32Array | Int32Array | Float64Array | BigUint64Array | string[] | Uint32Array[]

export function arrowType(kind: ColumnKind): DataType {
  switch (kind) {
    case 'u8':
      return new Uint8()
    case 'u16':
      return new Uint16()
    case 'u32':
      return new Uint32()
    case 'i32':
      return new Int32()
    case 'u64':
      return new Uint64()
    case 'f64':
      return new Float64()
    case 'utf8':
      return new Utf8()
    case 'list<u32>':
      return new List(new Field('item', new Uint32(), false))
  }
}

export function kindOf(field: ArrowField): ColumnKind | undefined {
  const t: ArrowType = field.type
  if (t.id === 'int') {
    if (!t.signed && t.bitWidth === 8) return 'u8'
    if (!t.signed && t.bitWidth === 16) return 'u16'
    if (!t.signed && t.bitWidth === 32) return 'u32'
    if (t.signed && t.bitWidth === 32) return 'i32'
    if (!t.signed && t.bitWidth === 64) return 'u64'
    return undefined
  }
  if (t.id === 'float') return t.precision === 'double' ? 'f64' : undefined
  if (t.id === 'utf8') return 'utf8'
  if (t.id === 'list') {
    const child = field.children[0]
    return field.children.length === 1 && child && kindOf(child) === 'u32' ? 'list<u32>' : undefined
  }
  return undefined
}

export function describeType(field: ArrowField): string {
  const t = field.type
  if (t.id === 'int') return `${t.signed ? 'int' : 'uint'}${t.bitWidth}`
  if (t.id === 'float') return `float (${t.precision})`
  if (t.id === 'list') return `list<${field.children.map(describeType).join(', ')}>`
  if (t.id === 'other') return `Arrow type ${t.typeId}`
  return t.id
}

/** The end-of-stream marker that closes each chunk's Arrow IPC stream. */
export const EOS = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])
export const TWO_POW_32 = 4294967296
