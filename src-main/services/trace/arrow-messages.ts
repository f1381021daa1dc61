// Arrow IPC stream framing and a bounds-checked reading of each message's flatbuffer header, done
// here before apache-arrow sees a byte. apache-arrow trusts the lengths inside a message (a flipped
// vector length makes it loop for billions of fields), so a damaged or hostile trace file must be
// refused at this layer with the byte offset of the problem, never handed on.
//
// Layout of one message (Arrow columnar format, "Encapsulated message format"):
//   0xFFFFFFFF continuation, int32 metadata size M (padding included, 8 + M a multiple of 8),
//   M bytes: flatbuffer `Message` (+ padding), then `bodyLength` bytes of body.
// End of stream: 0xFFFFFFFF 0x00000000.

export class MessageError extends Error {
  constructor(
    readonly kind: 'truncated' | 'corrupt' | 'unsupported',
    /** Byte offset in the buffer being framed where the problem is. */
    readonly offset: number,
    message: string,
  ) {
    super(message)
  }
}

export type ArrowType =
  | { id: 'int'; bitWidth: number; signed: boolean }
  | { id: 'float'; precision: 'half' | 'single' | 'double' }
  | { id: 'utf8' }
  | { id: 'list' }
  | { id: 'other'; typeId: number }

export interface ArrowField {
  name: string
  nullable: boolean
  type: ArrowType
  children: ArrowField[]
}

export interface SchemaHeader {
  kind: 'schema'
  fields: ArrowField[]
  metadata: Map<string, string>
}

export interface BatchHeader {
  kind: 'batch'
  length: number
  nodes: { length: number; nullCount: number }[]
  buffers: { offset: number; length: number }[]
}

export interface FramedMessage {
  /** Offset of the continuation marker. */
  offset: number
  /** Offset just past the message (next message or end). */
  end: number
  bodyOffset: number
  bodyLength: number
  header: SchemaHeader | BatchHeader | { kind: 'eos' }
}

const CONTINUATION = 0xffffffff
/** Far above any vramscope schema or batch header; a larger one is damage, not data. */
const MAX_METADATA_BYTES = 1 << 24
const MAX_FIELDS = 1024
const MAX_FIELD_DEPTH = 4

const MessageHeaderType = { schema: 1, dictionaryBatch: 2, recordBatch: 3 } as const
const TypeId = { int: 2, floatingPoint: 3, utf8: 5, list: 12 } as const

/** Reads the message that starts at `offset`. Throws MessageError. */
export function readMessage(bytes: Uint8Array, offset: number): FramedMessage {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (offset + 8 > bytes.length) throw new MessageError('truncated', offset, `the file ends ${bytes.length - offset} bytes into a message prefix (8 bytes)`)
  const marker = view.getUint32(offset, true)
  if (marker !== CONTINUATION) throw new MessageError('corrupt', offset, `expected an Arrow message (continuation marker ffffffff), found ${hex32(marker)}`)
  const metadataSize = view.getInt32(offset + 4, true)
  if (metadataSize === 0) return { offset, end: offset + 8, bodyOffset: offset + 8, bodyLength: 0, header: { kind: 'eos' } }
  if (metadataSize < 0 || metadataSize > MAX_METADATA_BYTES || (8 + metadataSize) % 8 !== 0)
    throw new MessageError('corrupt', offset + 4, `message metadata size ${metadataSize} is not a positive multiple of 8 below 16 MiB`)
  const metadataStart = offset + 8
  if (metadataStart + metadataSize > bytes.length)
    throw new MessageError(
      'truncated',
      offset,
      `the file ends inside a message header (${metadataSize} bytes announced, ${bytes.length - metadataStart} present)`,
    )
  const reader = new FlatReader(bytes.subarray(metadataStart, metadataStart + metadataSize), metadataStart)
  const { headerType, headerTable, bodyLength } = reader.message()
  const bodyOffset = metadataStart + metadataSize
  if (bodyLength % 8 !== 0) throw new MessageError('corrupt', offset, `message body length ${bodyLength} is not a multiple of 8`)
  if (bodyOffset + bodyLength > bytes.length)
    throw new MessageError(
      'truncated',
      offset,
      `the file ends inside a message body (${bodyLength} bytes announced at byte ${bodyOffset}, ${bytes.length - bodyOffset} present)`,
    )
  let header: SchemaHeader | BatchHeader
  if (headerType === MessageHeaderType.schema) {
    if (bodyLength !== 0) throw new MessageError('corrupt', offset, `a schema message with a ${bodyLength}-byte body`)
    header = reader.schema(headerTable)
  } else if (headerType === MessageHeaderType.recordBatch) {
    header = reader.recordBatch(headerTable, bodyLength)
  } else if (headerType === MessageHeaderType.dictionaryBatch) {
    throw new MessageError('unsupported', offset, 'a dictionary batch (vramscope traces use no dictionary encoding)')
  } else {
    throw new MessageError('corrupt', offset, `unknown message type ${headerType}`)
  }
  return { offset, end: bodyOffset + bodyLength, bodyOffset, bodyLength, header }
}

function hex32(value: number): string {
  return (value >>> 0).toString(16).padStart(8, '0')
}

interface Table {
  pos: number
  vtable: number
  vtableSize: number
  tableSize: number
}

/**
 * Flatbuffer reads where every offset, vtable and vector length is checked against the buffer
 * before use (the checks the flatbuffers "verifier" makes), limited to the tables of Arrow's
 * Message.fbs and Schema.fbs that vramscope uses.
 */
class FlatReader {
  private readonly view: DataView
  private fieldsSeen = 0
  private static readonly utf8 = new TextDecoder('utf-8', { fatal: true })

  constructor(
    private readonly bytes: Uint8Array,
    /** Offset of `bytes` in the file, for messages. */
    private readonly base: number,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  }

  message(): { headerType: number; headerTable: Table; bodyLength: number } {
    const root = this.table(this.offsetAt(0), 'Message')
    const version = this.scalar(root, 0, 2, 'Message.version') ?? 0
    // MetadataVersion V4 = 3 (Arrow 0.8) and V5 = 4 (Arrow 1.0); older ones lay buffers out differently.
    if (version < 3 || version > 4) throw this.error('unsupported', root.pos, `Arrow metadata version ${version + 1} (vramscope reads V4 and V5)`)
    const headerType = this.scalar(root, 1, 1, 'Message.header_type') ?? 0
    const headerField = this.field(root, 2, 4)
    if (headerField < 0) throw this.error('corrupt', root.pos, 'a message without a header')
    const headerTable = this.table(this.offsetAt(headerField), 'Message.header')
    const bodyLength = this.int64(root, 3, 'Message.bodyLength')
    return { headerType, headerTable, bodyLength }
  }

  schema(t: Table): SchemaHeader {
    const endianness = this.scalar(t, 0, 2, 'Schema.endianness') ?? 0
    if (endianness !== 0) throw this.error('unsupported', t.pos, 'a big-endian schema (vramscope traces are little-endian)')
    return { kind: 'schema', fields: this.fields(t, 1, 0), metadata: this.keyValues(t, 2) }
  }

  recordBatch(t: Table, bodyLength: number): BatchHeader {
    const length = this.int64(t, 0, 'RecordBatch.length')
    if (this.field(t, 3, 4) >= 0) throw this.error('unsupported', t.pos, 'a compressed record batch (vramscope traces are not compressed)')
    const nodes = this.structs(t, 1, 'RecordBatch.nodes').map(([nodeLength, nullCount]) => ({ length: nodeLength, nullCount }))
    const buffers = this.structs(t, 2, 'RecordBatch.buffers').map(([offset, bufferLength]) => ({ offset, length: bufferLength }))
    for (const [i, b] of buffers.entries()) {
      if (b.offset + b.length > bodyLength)
        throw this.error('corrupt', t.pos, `buffer ${i} (${b.length} bytes at ${b.offset}) lies outside the ${bodyLength}-byte body`)
    }
    return { kind: 'batch', length, nodes, buffers }
  }

  private fields(t: Table, index: number, depth: number): ArrowField[] {
    if (depth > MAX_FIELD_DEPTH) throw this.error('corrupt', t.pos, `fields nested deeper than ${MAX_FIELD_DEPTH}`)
    const fields: ArrowField[] = []
    for (const pos of this.tableVector(t, index, 'fields')) {
      if (++this.fieldsSeen > MAX_FIELDS) throw this.error('corrupt', pos, `more than ${MAX_FIELDS} fields`)
      const f = this.table(pos, 'Field')
      const name = this.string(f, 0, 'Field.name') ?? ''
      const nullable = (this.scalar(f, 1, 1, 'Field.nullable') ?? 0) !== 0
      const typeId = this.scalar(f, 2, 1, 'Field.type_type') ?? 0
      const typeField = this.field(f, 3, 4)
      const typeTable = typeField >= 0 ? this.table(this.offsetAt(typeField), 'Field.type') : undefined
      if (this.field(f, 4, 4) >= 0) throw this.error('unsupported', f.pos, `field "${name}" is dictionary-encoded`)
      fields.push({ name, nullable, type: this.type(typeId, typeTable, f.pos), children: this.fields(f, 5, depth + 1) })
    }
    return fields
  }

  private type(typeId: number, t: Table | undefined, at: number): ArrowType {
    if (typeId === TypeId.int) {
      if (!t) throw this.error('corrupt', at, 'an Int type without its table')
      const bitWidth = this.scalar(t, 0, 4, 'Int.bitWidth') ?? 0
      const signed = (this.scalar(t, 1, 1, 'Int.is_signed') ?? 0) !== 0
      return { id: 'int', bitWidth: bitWidth | 0, signed }
    }
    if (typeId === TypeId.floatingPoint) {
      if (!t) throw this.error('corrupt', at, 'a FloatingPoint type without its table')
      const precision = this.scalar(t, 0, 2, 'FloatingPoint.precision') ?? 0
      return { id: 'float', precision: precision === 2 ? 'double' : precision === 1 ? 'single' : 'half' }
    }
    if (typeId === TypeId.utf8) return { id: 'utf8' }
    if (typeId === TypeId.list) return { id: 'list' }
    return { id: 'other', typeId }
  }

  private keyValues(t: Table, index: number): Map<string, string> {
    const map = new Map<string, string>()
    for (const pos of this.tableVector(t, index, 'custom_metadata')) {
      const kv = this.table(pos, 'KeyValue')
      const key = this.string(kv, 0, 'KeyValue.key')
      if (key !== undefined) map.set(key, this.string(kv, 1, 'KeyValue.value') ?? '')
    }
    return map
  }

  // --- primitives ---------------------------------------------------------------------------

  private error(kind: MessageError['kind'], pos: number, message: string): MessageError {
    return new MessageError(kind, this.base + pos, message)
  }

  private need(pos: number, size: number, what: string): void {
    if (!(pos >= 0 && pos + size <= this.bytes.length))
      throw this.error('corrupt', Math.max(0, Math.min(pos, this.bytes.length)), `${what} points outside the message header`)
  }

  private offsetAt(pos: number): number {
    this.need(pos, 4, 'an offset')
    const target = pos + this.view.getUint32(pos, true)
    this.need(target, 4, 'an offset target')
    return target
  }

  private table(pos: number, what: string): Table {
    this.need(pos, 4, what)
    const vtable = pos - this.view.getInt32(pos, true)
    this.need(vtable, 4, `${what}'s vtable`)
    const vtableSize = this.view.getUint16(vtable, true)
    const tableSize = this.view.getUint16(vtable + 2, true)
    if (vtableSize < 4 || vtableSize % 2 !== 0) throw this.error('corrupt', vtable, `${what}'s vtable has size ${vtableSize}`)
    this.need(vtable, vtableSize, `${what}'s vtable`)
    if (tableSize < 4) throw this.error('corrupt', vtable, `${what} has size ${tableSize}`)
    this.need(pos, tableSize, what)
    return { pos, vtable, vtableSize, tableSize }
  }

  /** Position of field `index` of `t` when present and `width` bytes fit in the table, else -1. */
  private field(t: Table, index: number, width: number): number {
    const slot = 4 + 2 * index
    if (slot + 2 > t.vtableSize) return -1
    const at = this.view.getUint16(t.vtable + slot, true)
    if (at === 0) return -1
    if (at + width > t.tableSize) throw this.error('corrupt', t.pos, `field ${index} lies outside its table`)
    return t.pos + at
  }

  private scalar(t: Table, index: number, width: 1 | 2 | 4, what: string): number | undefined {
    const pos = this.field(t, index, width)
    if (pos < 0) return undefined
    this.need(pos, width, what)
    return width === 1 ? this.view.getUint8(pos) : width === 2 ? this.view.getInt16(pos, true) : this.view.getInt32(pos, true)
  }

  /** A non-negative int64 that fits a double exactly; 0 when absent. */
  private int64(t: Table, index: number, what: string): number {
    const pos = this.field(t, index, 8)
    if (pos < 0) return 0
    return this.int64At(pos, what)
  }

  private int64At(pos: number, what: string): number {
    this.need(pos, 8, what)
    const low = this.view.getUint32(pos, true)
    const high = this.view.getInt32(pos + 4, true)
    if (high < 0 || high >= 1 << 21) throw this.error('corrupt', pos, `${what} is ${high < 0 ? 'negative' : 'beyond 2^53'}`)
    return high * 4294967296 + low
  }

  private vector(t: Table, index: number, elementSize: number, what: string): { start: number; count: number } {
    const pos = this.field(t, index, 4)
    if (pos < 0) return { start: 0, count: 0 }
    const at = this.offsetAt(pos)
    const count = this.view.getUint32(at, true)
    if (count > (this.bytes.length - at - 4) / elementSize)
      throw this.error('corrupt', at, `${what} claims ${count} entries, more than the message header holds`)
    return { start: at + 4, count }
  }

  private tableVector(t: Table, index: number, what: string): number[] {
    const { start, count } = this.vector(t, index, 4, what)
    const positions: number[] = []
    for (let i = 0; i < count; i++) positions.push(this.offsetAt(start + 4 * i))
    return positions
  }

  /** A vector of 16-byte structs of two int64 (FieldNode, Buffer). */
  private structs(t: Table, index: number, what: string): [number, number][] {
    const { start, count } = this.vector(t, index, 16, what)
    const out: [number, number][] = []
    for (let i = 0; i < count; i++) out.push([this.int64At(start + 16 * i, what), this.int64At(start + 16 * i + 8, what)])
    return out
  }

  private string(t: Table, index: number, what: string): string | undefined {
    const pos = this.field(t, index, 4)
    if (pos < 0) return undefined
    const at = this.offsetAt(pos)
    const length = this.view.getUint32(at, true)
    this.need(at + 4, length, what)
    try {
      return FlatReader.utf8.decode(this.bytes.subarray(at + 4, at + 4 + length))
    } catch {
      throw this.error('corrupt', at, `${what} is not valid UTF-8`)
    }
  }
}
