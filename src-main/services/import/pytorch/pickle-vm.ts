// The restricted pickle VM: a generic unpickler, written from the pickle format as CPython's
// pickletools documents it, with its opcodes, memo, stack and limits. It builds plain data only and
// refuses every opcode that would import, call or construct anything (no global is allowed), so a
// hostile file can do nothing but fail. It knows nothing of what a PyTorch memory snapshot holds:
// the snapshot's fast lane (pickle-fast-lane.ts) and its keys (snapshot-keys.ts) are apart, and
// pickle-reader.ts is the entry point that exports both.
//
// What comes out:
//   dict        -> PickleDict (read-only, Map-like; keys are never property names, so a "__proto__"
//                  key is inert; any hashable key: str, int, float, bool, None, bytes, tuple)
//   list, tuple -> Array (a tuple cannot be appended to while unpickling)
//   str         -> string;  bytes, bytearray -> Uint8Array (a copy);  Python 2 str -> latin-1 string
//   int         -> number when |n| <= 2^53 - 1, else bigint;  float -> number
//   True/False  -> boolean;  None -> null
// PickleDict rather than Map: a snapshot is mostly small dicts (one per event). Building one is
// one slice of the stack, and reading a field a short scan (a Map index past 16 keys); a Map of
// the same 8 pairs, built and read 6 times, cost about 4x as much here (Node 20).
//
// Limits, each a SnapshotImportError naming the opcode and its byte offset: every declared length is
// checked against the bytes that remain, every memo index against what was stored, the stack
// against maxStack, open MARKs and container nesting against maxDepth. A container can no longer
// be appended to once it was fetched back from the memo or duplicated, which rules out cycles and
// keeps the nesting depth exact.
//
// Input may arrive in chunks (Unpickler.feed): an opcode cut by a chunk boundary waits for the
// next chunk. Two options bound memory on large files (see importPytorchSnapshot):
//   - keepMemo: the memo indices a pre-pass (MemoReferenceScanner) saw read back by a GET; no
//     other value is stored in the memo, so finished objects are not kept alive by it;
//   - stream: the items of the lists at one path (e.g. device_traces[*]) go to a callback as each
//     is appended, instead of into the list.
import { SnapshotImportError, type SnapshotErrorCode } from './snapshot-error.ts'

export type PickleValue = null | boolean | number | bigint | string | Uint8Array | PickleValue[] | PickleDict

/** Adds stack[from, to) (key, value, key, value...) to a dict; only the unpickler and the fast lane (appendDictPairs) build dicts. */
let appendPairs: (dict: PickleDict, source: readonly PickleValue[], from: number, to: number) => void
let pairsOf: (dict: PickleDict) => readonly PickleValue[]

/**
 * A dict's storage: key, value, key, value... in insertion order; a key may repeat, the last value
 * winning. For readers that take many dicts of one shape (a snapshot's events): comparing the keys
 * with the previous dict's, by identity, finds every field without a lookup.
 */
export function dictPairs(dict: PickleDict): readonly PickleValue[] {
  return pairsOf(dict)
}

/** The pairs of every empty dict (never written: the first pairs added replace it). */
const NO_PAIRS: PickleValue[] = []

/** Dicts at or below this many pairs are searched by scanning; larger ones get a Map index. */
const SCAN_PAIRS = 16

/**
 * A Python dict as unpickled: read-only, insertion-ordered, keys compared as Map compares them
 * (SameValueZero; tuples by identity). If a pickle sets one key twice the last value wins and the
 * key keeps its first position, as in Python.
 */
export class PickleDict {
  /** key, value, key, value... A key may repeat until `compact` runs (only hostile pickles do that). */
  private pairs: PickleValue[] = NO_PAIRS
  private index: Map<PickleValue, number> | null = null
  private compacted = true

  static {
    appendPairs = (dict, source, from, to) => {
      if (dict.pairs.length === 0) dict.pairs = source.slice(from, to)
      else for (let i = from; i < to; i++) dict.pairs.push(source[i]!)
      dict.index = null
      dict.compacted = false
    }
    pairsOf = (dict) => dict.pairs
  }

  get(key: PickleValue): PickleValue | undefined {
    const at = this.find(key)
    return at < 0 ? undefined : this.pairs[at + 1]
  }

  has(key: PickleValue): boolean {
    return this.find(key) >= 0
  }

  get size(): number {
    return this.compact().length >> 1
  }

  *keys(): IterableIterator<PickleValue> {
    const pairs = this.compact()
    for (let i = 0; i < pairs.length; i += 2) yield pairs[i]!
  }

  *values(): IterableIterator<PickleValue> {
    const pairs = this.compact()
    for (let i = 1; i < pairs.length; i += 2) yield pairs[i]!
  }

  *entries(): IterableIterator<[PickleValue, PickleValue]> {
    const pairs = this.compact()
    for (let i = 0; i < pairs.length; i += 2) yield [pairs[i]!, pairs[i + 1]!]
  }

  [Symbol.iterator](): IterableIterator<[PickleValue, PickleValue]> {
    return this.entries()
  }

  toMap(): Map<PickleValue, PickleValue> {
    return new Map(this.entries())
  }

  /** Position of the key's last occurrence in `pairs`, or -1. */
  private find(key: PickleValue): number {
    const pairs = this.pairs
    if (pairs.length <= 2 * SCAN_PAIRS) {
      if (key === key) {
        for (let i = pairs.length - 2; i >= 0; i -= 2) if (pairs[i] === key) return i
      } else {
        for (let i = pairs.length - 2; i >= 0; i -= 2) if (pairs[i] !== pairs[i]) return i
      }
      return -1
    }
    if (this.index === null) {
      const index = new Map<PickleValue, number>()
      for (let i = 0; i < pairs.length; i += 2) index.set(pairs[i]!, i)
      this.index = index
    }
    return this.index.get(key) ?? -1
  }

  /** Drops repeated keys (first position, last value); a no-op for every pickle Python writes. */
  private compact(): PickleValue[] {
    if (this.compacted) return this.pairs
    const pairs = this.pairs
    const last = new Map<PickleValue, number>()
    for (let i = 0; i < pairs.length; i += 2) last.set(pairs[i]!, i)
    if (last.size * 2 !== pairs.length) {
      const unique: PickleValue[] = []
      for (const [key, at] of last) unique.push(key, pairs[at + 1]!)
      // Map iteration follows first insertion, which is the key's first position.
      this.pairs = unique
      this.index = null
    }
    this.compacted = true
    return this.pairs
  }
}

export interface ListStream {
  /** Keys from the root object down to the lists whose items are streamed; null matches any key or index. */
  path: readonly (string | null)[]
  /**
   * Called with each item appended to a streamed list, in order. `keys` are the actual keys of the
   * path (do not keep the array), `index` the item's index in its list, `offset` the byte offset of
   * the opcode that appended it. The item is not kept in the list.
   */
  onItem(keys: readonly (string | number)[], index: number, item: PickleValue, offset: number): void
}

/** A value's type in a LaneHandoff. */
export const enum HandoffKind {
  scalar = 0,
  list = 1,
  dict = 2,
  tuple = 3,
}

export interface HandoffValue {
  value: PickleValue
  kind: HandoffKind
  /** 1 + the depth of the deepest child, for a container. */
  depth: number
  /** Whether it may no longer be added to (a tuple always is). */
  sealed: boolean
}

/**
 * Where the fast lane (below) gave up, in this unpickler's terms, for resume(): the byte
 * offset of the opcode it gave up on and the state the unpickler would have there.
 */
export interface LaneHandoff {
  at: number
  protocol: number
  stack: HandoffValue[]
  /** Per stack slot: the memo index of the open container there, stored while it is open; else -1. */
  stackMemo: number[]
  /** The stack height at each open MARK. */
  marks: number[]
  memoNext: number
  /** Memo index -> its value, or the stack slot of the open container stored there. */
  memo: Map<number, HandoffValue | { open: number }>
  /** Inside a streamed list's lists: events the fast lane already gave the sink, held on the stack as DELIVERED. */
  delivered?: DeliveredEvents
  /**
   * Inside a streamed list's lists: the last list the fast lane gave items of, its keys (as
   * ListStream.onItem gets them) and how many (the streaming state).
   */
  streamed?: { list: PickleValue; keys: readonly (string | number)[]; count: number }
}

/**
 * Events of one device's list that the fast lane handed to the sink before it gave up: stack slots
 * [from, to) hold DELIVERED in their place. Either the items of that list's open batch (its MARK at
 * `from`), or one event awaiting its APPEND (to = from + 1). The general lane counts them, without
 * handing them over again, when they are appended to their list, and takes any other use of them
 * as a LaneRestart.
 */
export interface DeliveredEvents {
  from: number
  to: number
  batch: boolean
}

/** Stands on the general lane's stack for an event the fast lane already gave the sink. */
export const DELIVERED: PickleValue = Object.freeze(new PickleDict()) as PickleDict

/**
 * Thrown by a resumed unpickler's feed() or finish() where the input uses an event the fast lane
 * already delivered other than by appending it to its device's list (only a damaged or hand-made
 * pickle does): the caller then reads the input again from byte 0 on the general lane alone, into
 * a new sink.
 */
export class LaneRestart extends Error {
  constructor(readonly offset: number) {
    super(`the fast lane's delivered events are used otherwise at byte ${offset}`)
    this.name = 'LaneRestart'
  }
}

export interface UnpickleOptions {
  /** Name used in errors. */
  fileName?: string
  /** Most open MARKs, and most deeply nested containers (default 200). */
  maxDepth?: number
  /** Most values on the unpickling stack (default and most 2^20). */
  maxStack?: number
  /** Size of the whole input, when it is fed in chunks: declared lengths are checked against it. */
  totalBytes?: number
  /** Only these memo indices are stored (from MemoReferenceScanner); null stores all. */
  keepMemo?: MemoReferences | null
  stream?: ListStream
}

/** Longest text argument (protocol 0 INT, LONG, FLOAT, GET, PUT) accepted. */
const MAX_LINE = 1 << 16
/** Largest LONG1/LONG4 accepted, in bytes (2^65536: far beyond anything a snapshot holds). */
const MAX_INT_BYTES = 1 << 13
const MAX_SAFE = Number.MAX_SAFE_INTEGER

// Descriptor of each stack slot (an Int32Array beside the value stack); 0 for a scalar. Invariant:
// slots at and above the stack pointer hold descriptor 0 and memo slot -1, so pushing a scalar
// writes the value only.
const DEPTH = 0xffff // containers: 1 + the depth of the deepest child
const TUPLE = 1 << 16
const LIST = 1 << 17
const DICT = 1 << 18
const SEALED = 1 << 19 // may not be mutated: fetched from the memo, duplicated, or a tuple
// Memo descriptors: PRESENT | the slot descriptor of the stored value, or PRESENT | OPEN | the
// stack position of a container stored while still on the stack (finished when it leaves).
const PRESENT = 1 << 20
const OPEN = 1 << 21
const POSITION = (1 << 20) - 1
const MEMO_SHIFT = 10
const MEMO_CHUNK = 1 << MEMO_SHIFT
const MEMO_MASK = MEMO_CHUNK - 1
/** Stack positions must fit in POSITION. */
const STACK_LIMIT = 1 << 20

// The opcode table. Declared here, in the file of the switches that use it, so that its values are
// inlined as literal case labels (imported, they are property loads: see docs/perf-notes.md); the
// fast lane (pickle-fast-lane.ts) holds the subset it reads, checked against describeOpcode by
// test/unit/services/import/pytorch/pickle-opcodes.test.ts.
const enum Op {
  MARK = 0x28,
  EMPTY_TUPLE = 0x29,
  STOP = 0x2e,
  POP = 0x30,
  POP_MARK = 0x31,
  DUP = 0x32,
  BINBYTES = 0x42,
  SHORT_BINBYTES = 0x43,
  FLOAT = 0x46,
  BINFLOAT = 0x47,
  INT = 0x49,
  BININT = 0x4a,
  BININT1 = 0x4b,
  LONG = 0x4c,
  BININT2 = 0x4d,
  NONE = 0x4e,
  PERSID = 0x50,
  BINPERSID = 0x51,
  REDUCE = 0x52,
  STRING = 0x53,
  BINSTRING = 0x54,
  SHORT_BINSTRING = 0x55,
  UNICODE = 0x56,
  BINUNICODE = 0x58,
  EMPTY_LIST = 0x5d,
  APPEND = 0x61,
  BUILD = 0x62,
  GLOBAL = 0x63,
  DICT = 0x64,
  APPENDS = 0x65,
  GET = 0x67,
  BINGET = 0x68,
  INST = 0x69,
  LONG_BINGET = 0x6a,
  LIST = 0x6c,
  OBJ = 0x6f,
  PUT = 0x70,
  BINPUT = 0x71,
  LONG_BINPUT = 0x72,
  SETITEM = 0x73,
  TUPLE = 0x74,
  SETITEMS = 0x75,
  EMPTY_DICT = 0x7d,
  PROTO = 0x80,
  NEWOBJ = 0x81,
  EXT1 = 0x82,
  EXT2 = 0x83,
  EXT4 = 0x84,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  BYTEARRAY8 = 0x96,
  NEXT_BUFFER = 0x97,
  READONLY_BUFFER = 0x98,
}

const OPCODE_NAMES: Record<number, string> = {
  0x28: 'MARK',
  0x29: 'EMPTY_TUPLE',
  0x2e: 'STOP',
  0x30: 'POP',
  0x31: 'POP_MARK',
  0x32: 'DUP',
  0x42: 'BINBYTES',
  0x43: 'SHORT_BINBYTES',
  0x46: 'FLOAT',
  0x47: 'BINFLOAT',
  0x49: 'INT',
  0x4a: 'BININT',
  0x4b: 'BININT1',
  0x4c: 'LONG',
  0x4d: 'BININT2',
  0x4e: 'NONE',
  0x50: 'PERSID',
  0x51: 'BINPERSID',
  0x52: 'REDUCE',
  0x53: 'STRING',
  0x54: 'BINSTRING',
  0x55: 'SHORT_BINSTRING',
  0x56: 'UNICODE',
  0x58: 'BINUNICODE',
  0x5d: 'EMPTY_LIST',
  0x61: 'APPEND',
  0x62: 'BUILD',
  0x63: 'GLOBAL',
  0x64: 'DICT',
  0x65: 'APPENDS',
  0x67: 'GET',
  0x68: 'BINGET',
  0x69: 'INST',
  0x6a: 'LONG_BINGET',
  0x6c: 'LIST',
  0x6f: 'OBJ',
  0x70: 'PUT',
  0x71: 'BINPUT',
  0x72: 'LONG_BINPUT',
  0x73: 'SETITEM',
  0x74: 'TUPLE',
  0x75: 'SETITEMS',
  0x7d: 'EMPTY_DICT',
  0x80: 'PROTO',
  0x81: 'NEWOBJ',
  0x82: 'EXT1',
  0x83: 'EXT2',
  0x84: 'EXT4',
  0x85: 'TUPLE1',
  0x86: 'TUPLE2',
  0x87: 'TUPLE3',
  0x88: 'NEWTRUE',
  0x89: 'NEWFALSE',
  0x8a: 'LONG1',
  0x8b: 'LONG4',
  0x8c: 'SHORT_BINUNICODE',
  0x8d: 'BINUNICODE8',
  0x8e: 'BINBYTES8',
  0x8f: 'EMPTY_SET',
  0x90: 'ADDITEMS',
  0x91: 'FROZENSET',
  0x92: 'NEWOBJ_EX',
  0x93: 'STACK_GLOBAL',
  0x94: 'MEMOIZE',
  0x95: 'FRAME',
  0x96: 'BYTEARRAY8',
  0x97: 'NEXT_BUFFER',
  0x98: 'READONLY_BUFFER',
}

/** "GLOBAL (0x63)", or "unknown opcode 0xff". */
export function describeOpcode(op: number): string {
  const hex = `0x${op.toString(16).padStart(2, '0')}`
  const name = OPCODE_NAMES[op]
  return name === undefined ? `unknown opcode ${hex}` : `${name} (${hex})`
}

/** Opcodes that import, call or construct objects: a snapshot never needs them. */
const FORBIDDEN = new Set<number>([
  Op.GLOBAL,
  Op.STACK_GLOBAL,
  Op.REDUCE,
  Op.BUILD,
  Op.INST,
  Op.OBJ,
  Op.NEWOBJ,
  Op.NEWOBJ_EX,
  Op.EXT1,
  Op.EXT2,
  Op.EXT4,
  Op.PERSID,
  Op.BINPERSID,
])
/** Known opcodes for values a snapshot does not contain. */
const UNSUPPORTED: Record<number, string> = {
  [Op.EMPTY_SET]: 'sets are not part of a snapshot',
  [Op.ADDITEMS]: 'sets are not part of a snapshot',
  [Op.FROZENSET]: 'sets are not part of a snapshot',
  [Op.NEXT_BUFFER]: 'out-of-band buffers are not part of a snapshot',
  [Op.READONLY_BUFFER]: 'out-of-band buffers are not part of a snapshot',
  [Op.STRING]: 'protocol 0 quoted strings (snapshots are written with protocol 2 or later)',
  [Op.UNICODE]: 'protocol 0 escaped strings (snapshots are written with protocol 2 or later)',
}

export class MemoReferences {
  private words = new Uint32Array(64)
  private ranks: Uint32Array | null = null
  /** Distinct indices recorded. */
  count = 0

  add(index: number): void {
    const word = index >>> 5
    if (word >= this.words.length) {
      let size = this.words.length * 2
      while (size <= word) size *= 2
      const grown = new Uint32Array(size)
      grown.set(this.words)
      this.words = grown
    }
    const mask = 1 << (index & 31)
    if ((this.words[word]! & mask) === 0) {
      this.words[word]! |= mask
      this.count++
      this.ranks = null
    }
  }

  has(index: number): boolean {
    const word = index >>> 5
    return word < this.words.length && (this.words[word]! & (1 << (index & 31))) !== 0
  }

  /** The dense slot of a recorded index (0 .. count-1), or -1 if it was not recorded. */
  slot(index: number): number {
    const word = index >>> 5
    if (word >= this.words.length) return -1
    const bits = this.words[word]!
    const bit = 1 << (index & 31)
    if ((bits & bit) === 0) return -1
    if (this.ranks === null) this.buildRanks()
    let below = bits & (bit - 1)
    below -= (below >>> 1) & 0x55555555
    below = (below & 0x33333333) + ((below >>> 2) & 0x33333333)
    below = (((below + (below >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24
    return this.ranks![word]! + below
  }

  private buildRanks(): void {
    const ranks = new Uint32Array(this.words.length)
    let total = 0
    for (let i = 0; i < this.words.length; i++) {
      ranks[i] = total
      let v = this.words[i]!
      v -= (v >>> 1) & 0x55555555
      v = (v & 0x33333333) + ((v >>> 2) & 0x33333333)
      total += (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24
    }
    this.ranks = ranks
  }
}

const utf8 = new TextDecoder('utf-8')

// Short strings repeat (keys, action names, file names) and decoding each through TextDecoder
// costs more than hashing its bytes, so a small cache shared by all unpicklers answers most of them,
// with one string object per distinct value.
const SHORT_STRING_MAX = 32
const CACHE_SLOTS = 4096
const cachedStrings: (string | undefined)[] = new Array(CACHE_SLOTS)
const cachedBytes = new Uint8Array(CACHE_SLOTS * SHORT_STRING_MAX)
const cachedLengths = new Uint8Array(CACHE_SLOTS)

function decodeShortUtf8(b: Uint8Array, start: number, n: number): string {
  let hash = n
  for (let i = start; i < start + n; i++) hash = Math.imul(hash ^ b[i]!, 0x9e3779b1)
  const slot = (hash >>> 20) & (CACHE_SLOTS - 1)
  const cached = cachedStrings[slot]
  if (cached !== undefined && cachedLengths[slot] === n) {
    const base = slot * SHORT_STRING_MAX
    let i = 0
    while (i < n && cachedBytes[base + i] === b[start + i]) i++
    if (i === n) return cached
  }
  let ascii = true
  for (let i = start; i < start + n; i++) if (b[i]! >= 0x80) ascii = false
  const s = ascii ? String.fromCharCode.apply(null, b.subarray(start, start + n) as unknown as number[]) : utf8.decode(b.subarray(start, start + n))
  cachedStrings[slot] = s
  cachedLengths[slot] = n
  cachedBytes.set(b.subarray(start, start + n), slot * SHORT_STRING_MAX)
  return s
}

function decodeUtf8(b: Uint8Array, start: number, n: number): string {
  return n <= SHORT_STRING_MAX ? decodeShortUtf8(b, start, n) : utf8.decode(b.subarray(start, start + n))
}

function decodeLatin1(b: Uint8Array, start: number, n: number): string {
  let s = ''
  for (let i = start; i < start + n; i += 8192) s += String.fromCharCode.apply(null, b.subarray(i, Math.min(start + n, i + 8192)) as unknown as number[])
  return s
}

function readUint32(b: Uint8Array, p: number): number {
  return (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0
}

/** An 8-byte length; above 2^53 it is approximate, which is still far beyond any input. */
function readUint64(b: Uint8Array, p: number): number {
  return readUint32(b, p + 4) * 4294967296 + readUint32(b, p)
}

function readUint64Exact(b: Uint8Array, p: number): bigint {
  return (BigInt(readUint32(b, p + 4)) << 32n) | BigInt(readUint32(b, p))
}

/** Little-endian two's complement of n bytes (LONG1, LONG4): a number when safe, else a bigint. */
function decodeLong(b: Uint8Array, start: number, n: number): number | bigint {
  if (n <= 4) {
    if (n === 0) return 0
    let v = 0
    for (let i = n - 1; i >= 0; i--) v = (v << 8) | b[start + i]!
    const unused = 32 - 8 * n
    return unused === 0 ? v : (v << unused) >> unused
  }
  if (n <= 8) {
    // hi * 2^32 + lo is exact whenever the result is a safe integer.
    let hi = b[start + n - 1]! >= 0x80 ? -1 : 0
    for (let i = n - 1; i >= 4; i--) hi = hi * 256 + b[start + i]!
    const v = hi * 4294967296 + readUint32(b, start)
    if (v >= -MAX_SAFE && v <= MAX_SAFE) return v
  }
  let hex = ''
  for (let i = n - 1; i >= 0; i--) hex += (b[start + i]! + 0x100).toString(16).slice(1)
  let big = BigInt(`0x${hex}`)
  if (b[start + n - 1]! >= 0x80) big -= 1n << BigInt(8 * n)
  return big >= -MAX_SAFE && big <= MAX_SAFE ? Number(big) : big
}

/** A protocol 0 decimal integer: digits with an optional sign. */
function parseDecimal(text: string): number | bigint | null {
  if (!/^[+-]?[0-9]+$/.test(text)) return null
  const n = Number(text)
  return Number.isSafeInteger(n) ? n : BigInt(text)
}

/** A protocol 0 float as Python's repr writes it (including inf and nan). */
function parseFloatText(text: string): number | null {
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) return Number(text)
  const special = /^([+-]?)(inf|nan)$/i.exec(text)
  if (special === null) return null
  return special[2]!.toLowerCase() === 'nan' ? NaN : special[1] === '-' ? -Infinity : Infinity
}

const float64 = new Float64Array(1)
const float64Bytes = new Uint8Array(float64.buffer)

// The primitives the fast lane (pickle-fast-lane.ts) shares, exported under names of their own: an
// exported binding is a module cell, read through one more load at every use in this file too, and
// the loops above use these on every opcode.
export const readUint32LE = readUint32
export const decodeUtf8At = decodeUtf8
export const decodeLongAt = decodeLong
/** BINFLOAT's scratch: its 8 bytes, reversed, read as float64[0]. */
export const binFloat = { float64, float64Bytes } as const
/** Adds source[from, to) (key, value, key, value...) to a dict the fast lane built. */
export function appendDictPairs(dict: PickleDict, source: readonly PickleValue[], from: number, to: number): void {
  appendPairs(dict, source, from, to)
}

/**
 * The unpickling machine. Feed it the input (all at once or in chunks), then call finish().
 * Every problem with the input is a SnapshotImportError; nothing else is thrown on any input.
 */
export class Unpickler {
  readonly fileName: string
  private readonly maxDepth: number
  private readonly maxStack: number
  private readonly totalBytes: number | undefined
  private readonly keep: MemoReferences | null
  private readonly streamSpec: ListStream | undefined

  // Input not yet consumed: buf[pos, end) is at byte `base + pos` of the whole input.
  private buf: Uint8Array = new Uint8Array(0)
  private pos = 0
  private end = 0
  private base = 0
  /** Whether `buf` was allocated here (a caller's chunk is never written to). */
  private ownsBuffer = false
  /** Bytes the opcode at `pos` needs before it can run (0 when unknown). */
  private needed = 0

  private stack: PickleValue[] = []
  private info = new Int32Array(1024)
  private memoSlot = new Int32Array(1024).fill(-1)
  private sp = 0
  private readonly marks: Int32Array
  private nm = 0

  // Dense over memo indices, or over the kept indices' ranks with keepMemo; in chunks, because
  // storing into one large (old) array costs a write-barrier slow path per value.
  private memo: PickleValue[][] = []
  private memoInfo = new Int32Array(1024)
  private memoNext = 0

  private protocol = -1
  private result: PickleValue | undefined = undefined
  private stopped = false

  // Streaming: the list whose items go to the callback now, its keys, and the items given so far.
  private streamList: PickleValue | null = null
  private streamKeys: (string | number)[] = []
  private streamCount = 0
  // Events the fast lane delivered (see DeliveredEvents): stack slots [fenceFrom, fenceTop), -1 when none.
  private fenceFrom = -1
  private fenceTop = -1
  private fenceBatch = false

  constructor(options: UnpickleOptions = {}) {
    this.fileName = options.fileName ?? '<pickle>'
    this.maxDepth = Math.max(1, Math.min(options.maxDepth ?? 200, DEPTH))
    this.maxStack = Math.max(16, Math.min(options.maxStack ?? STACK_LIMIT, STACK_LIMIT))
    this.totalBytes = options.totalBytes
    this.keep = options.keepMemo ?? null
    this.streamSpec = options.stream
    this.marks = new Int32Array(this.maxDepth)
  }

  /**
   * Takes over where the fast lane gave up: its stack, MARKs and memo; the input is then fed from
   * byte handoff.at on. Only for an unpickler fed nothing yet; with keepMemo, the references a
   * MemoReferenceScanner found from handoff.at on.
   */
  resume(handoff: LaneHandoff): void {
    if (this.base + this.end !== 0 || this.sp !== 0) throw new Error('resume() takes a new unpickler')
    const keep = this.keep
    const slotOf = (index: number) => (index < 0 ? -1 : keep === null ? index : keep.slot(index))
    const describe = (v: HandoffValue) =>
      v.kind === HandoffKind.scalar
        ? 0
        : v.depth | (v.kind === HandoffKind.dict ? DICT : v.kind === HandoffKind.list ? LIST : TUPLE | SEALED) | (v.sealed ? SEALED : 0)
    handoff.stack.forEach((v, i) => {
      if (i === this.info.length) this.growStack(handoff.at)
      this.stack[i] = v.value
      this.info[i] = describe(v)
      this.memoSlot[i] = slotOf(handoff.stackMemo[i]!)
    })
    this.sp = handoff.stack.length
    if (handoff.marks.length > this.maxDepth) throw this.error(handoff.at, `more than ${this.maxDepth} nested MARKs (limit maxDepth)`, 'limit')
    handoff.marks.forEach((m, i) => (this.marks[i] = m))
    this.nm = handoff.marks.length
    for (const [index, entry] of handoff.memo) {
      const slot = slotOf(index)
      if (slot < 0) continue
      if (slot >= this.memoInfo.length) this.growMemo(slot)
      ;(this.memo[slot >>> MEMO_SHIFT] ??= new Array<PickleValue>(MEMO_CHUNK))[slot & MEMO_MASK] = 'open' in entry ? this.stack[entry.open]! : entry.value
      this.memoInfo[slot] = 'open' in entry ? PRESENT | OPEN | entry.open : PRESENT | describe(entry) | (entry.kind === HandoffKind.scalar ? 0 : SEALED)
    }
    this.memoNext = handoff.memoNext
    this.protocol = handoff.protocol
    this.base = handoff.at
    const delivered = handoff.delivered
    if (delivered !== undefined) {
      this.fenceFrom = delivered.from
      this.fenceTop = delivered.to
      this.fenceBatch = delivered.batch
    }
    // The list streamed last, as it would stand had this unpickler read the fast lane's events itself.
    const streamed = handoff.streamed
    const path = this.streamSpec?.path
    if (streamed !== undefined && path !== undefined && path.length === streamed.keys.length && path.every((k, i) => k === null || k === streamed.keys[i])) {
      this.streamList = streamed.list
      this.streamKeys = [...streamed.keys]
      this.streamCount = streamed.count
    }
  }

  /** Bytes consumed so far (complete opcodes). */
  get bytesConsumed(): number {
    return this.base + this.pos
  }

  /** The protocol its PROTO opcode declared (protocols 0 and 1 have none: -1). */
  get pickleProtocol(): number {
    return this.protocol
  }

  get done(): boolean {
    return this.stopped
  }

  feed(chunk: Uint8Array): void {
    if (chunk.length === 0) return
    if (this.stopped) throw this.error(this.base + this.end, `${chunk.length} more bytes after STOP (the pickle ended before the input did)`)
    const left = this.end - this.pos
    if (left === 0) {
      this.base += this.end
      this.buf = chunk
      this.ownsBuffer = false
      this.pos = 0
      this.end = chunk.length
    } else if (this.ownsBuffer && this.pos === 0 && this.buf.length - this.end >= chunk.length) {
      this.buf.set(chunk, this.end)
      this.end += chunk.length
    } else {
      // Carry the unfinished opcode over into a buffer of our own, sized for what the opcode said
      // it needs and grown geometrically, so a string spanning many chunks costs linear time.
      const size = Math.max(left + chunk.length, Math.min(this.needed, (left + chunk.length) * 2), left * 2)
      const merged = new Uint8Array(size)
      merged.set(this.buf.subarray(this.pos, this.end))
      merged.set(chunk, left)
      this.base += this.pos
      this.buf = merged
      this.ownsBuffer = true
      this.pos = 0
      this.end = left + chunk.length
    }
    if (this.needed <= this.end - this.pos) this.run(false)
    if (!this.ownsBuffer && this.pos < this.end) {
      // Keep the unfinished opcode's bytes, not the caller's chunk, which it may reuse.
      this.buf = this.buf.slice(this.pos, this.end)
      this.ownsBuffer = true
      this.base += this.pos
      this.end -= this.pos
      this.pos = 0
    }
  }

  /** The input has ended: returns the unpickled value, or throws if the pickle is incomplete. */
  finish(): PickleValue {
    if (!this.stopped) this.run(true)
    if (!this.stopped || this.result === undefined)
      throw this.error(this.base + this.end, 'truncated: the input ended before the pickle did (no STOP opcode)', 'truncated')
    return this.result
  }

  private error(offset: number, problem: string, code: SnapshotErrorCode = 'corrupt'): SnapshotImportError {
    return new SnapshotImportError(this.fileName, code, offset, problem)
  }

  private opError(offset: number, op: number, problem: string, code: SnapshotErrorCode = 'corrupt'): SnapshotImportError {
    return this.error(offset, `${describeOpcode(op)}: ${problem}`, code)
  }

  private growStack(at: number): void {
    if (this.info.length >= this.maxStack) throw this.error(at, `the stack holds more than ${this.maxStack} values (limit maxStack)`, 'limit')
    const size = Math.min(this.info.length * 2, this.maxStack)
    const info = new Int32Array(size)
    info.set(this.info)
    this.info = info
    const slots = new Int32Array(size).fill(-1)
    slots.set(this.memoSlot)
    this.memoSlot = slots
  }

  private growMemo(slot: number): void {
    let size = this.memoInfo.length * 2
    while (size <= slot) size *= 2
    const grown = new Int32Array(size)
    grown.set(this.memoInfo)
    this.memoInfo = grown
  }

  /**
   * Runs opcodes until the input is used up, STOP, or an opcode needs bytes not yet fed (then it
   * stops before that opcode; with `final` that is a truncation error). The hot state lives in
   * locals and goes back to fields on exit.
   */
  private run(final: boolean): void {
    const b = this.buf
    const end = this.end
    const stack = this.stack
    const keep = this.keep
    const memo = this.memo
    const marks = this.marks
    const streaming = this.streamSpec !== undefined
    let info = this.info
    let memoSlot = this.memoSlot
    let memoInfo = this.memoInfo
    let capacity = info.length
    // A streamed list sits at depth path.length; Python's pickler opens at most one MARK per
    // enclosing container, so a list with more MARKs open below it is deeper and is not looked at.
    const streamMarks = streaming ? this.streamSpec!.path.length : -1
    let sp = this.sp
    let nm = this.nm
    let p = this.pos
    let start = p
    let op = 0
    // -1 but in a resumed unpickler whose stack holds DELIVERED events, until they are appended.
    let fenceTop = this.fenceTop
    this.needed = 0
    try {
      while (p < end) {
        start = p
        op = b[p++]!
        if (fenceTop >= 0 && (sp < fenceTop + 3 || (nm > 0 && marks[nm - 1]! <= fenceTop))) {
          this.passFence(op, sp, nm, this.base + start)
          fenceTop = this.fenceTop
        }
        switch (op) {
          case Op.BINGET:
          case Op.LONG_BINGET:
          case Op.GET: {
            let index: number
            if (op === Op.BINGET) {
              if (p >= end) break
              index = b[p++]!
            } else if (op === Op.LONG_BINGET) {
              if (p + 4 > end) break
              index = readUint32(b, p)
              p += 4
            } else {
              const nl = this.lineEnd(p, start, op)
              if (nl < 0) break
              index = this.memoIndexText(p, nl, start, op)
              p = nl + 1
            }
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            // With keepMemo the memo is dense over the kept indices: slot = rank of the index.
            const slot = keep === null ? index : keep.slot(index)
            let mi = slot >= 0 && slot < memoInfo.length ? memoInfo[slot]! : 0
            if (mi === PRESENT) {
              // A scalar (most reads: dict keys).
              stack[sp++] = memo[slot >>> MEMO_SHIFT]![slot & MEMO_MASK]!
              continue
            }
            if (mi === 0) throw this.opError(this.base + start, op, `memo index ${index} was never stored`)
            const value = memo[slot >>> MEMO_SHIFT]![slot & MEMO_MASK]!
            if (mi & OPEN) {
              this.sp = sp
              mi = this.sealShared(index, slot, mi, value, start, op)
            }
            info[sp] = mi & ~PRESENT
            stack[sp++] = value
            continue
          }
          case Op.MEMOIZE:
          case Op.BINPUT:
          case Op.LONG_BINPUT:
          case Op.PUT: {
            let index: number
            if (op === Op.MEMOIZE) index = this.memoNext
            else if (op === Op.BINPUT) {
              if (p >= end) break
              index = b[p++]!
            } else {
              if (op === Op.LONG_BINPUT) {
                if (p + 4 > end) break
                index = readUint32(b, p)
                p += 4
              } else {
                const nl = this.lineEnd(p, start, op)
                if (nl < 0) break
                index = this.memoIndexText(p, nl, start, op)
                p = nl + 1
              }
              // Indices need not be dense, but a pickle cannot store more values than it has bytes.
              if (index > this.base + start) throw this.opError(this.base + start, op, `memo index ${index} is larger than a pickle of this size can use`)
            }
            if (sp === 0 || (nm > 0 && marks[nm - 1] === sp)) throw this.opError(this.base + start, op, 'nothing on the stack to store')
            if (index >= this.memoNext) this.memoNext = index + 1
            const slot = keep === null ? index : keep.slot(index)
            if (slot >= 0) {
              const top = sp - 1
              const inf = info[top]!
              const open = inf !== 0 && (inf & SEALED) === 0
              if (slot >= memoInfo.length) {
                this.growMemo(slot)
                memoInfo = this.memoInfo
              }
              ;(memo[slot >>> MEMO_SHIFT] ??= new Array<PickleValue>(MEMO_CHUNK))[slot & MEMO_MASK] = stack[top]!
              memoInfo[slot] = open ? PRESENT | OPEN | top : PRESENT | inf
              if (open) memoSlot[top] = slot
            }
            continue
          }
          case Op.SHORT_BINUNICODE: {
            if (p >= end) break
            const n = b[p]!
            if (p + 1 + n > end) {
              this.need(start, 2 + n, final)
              break
            }
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = decodeUtf8(b, p + 1, n)
            p += 1 + n
            continue
          }
          case Op.LONG1: {
            if (p >= end) break
            const n = b[p]!
            if (p + 1 + n > end) {
              this.need(start, 2 + n, final)
              break
            }
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = decodeLong(b, p + 1, n)
            p += 1 + n
            continue
          }
          case Op.BININT1: {
            if (p >= end) break
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = b[p++]!
            continue
          }
          case Op.BININT2: {
            if (p + 2 > end) break
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = b[p]! | (b[p + 1]! << 8)
            p += 2
            continue
          }
          case Op.BININT: {
            if (p + 4 > end) break
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)
            p += 4
            continue
          }
          case Op.BINFLOAT: {
            if (p + 8 > end) break
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            for (let i = 0; i < 8; i++) float64Bytes[7 - i] = b[p + i]!
            stack[sp++] = float64[0]!
            p += 8
            continue
          }
          case Op.NONE:
          case Op.NEWTRUE:
          case Op.NEWFALSE: {
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = op === Op.NONE ? null : op === Op.NEWTRUE
            continue
          }
          case Op.MARK: {
            if (nm === this.maxDepth) throw this.opError(this.base + start, op, `more than ${this.maxDepth} nested MARKs (limit maxDepth)`, 'limit')
            marks[nm++] = sp
            continue
          }
          case Op.EMPTY_DICT:
          case Op.EMPTY_LIST:
          case Op.EMPTY_TUPLE: {
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            const value: PickleValue = op === Op.EMPTY_DICT ? new PickleDict() : []
            stack[sp] = value
            info[sp] = 1 | (op === Op.EMPTY_DICT ? DICT : op === Op.EMPTY_LIST ? LIST : TUPLE | SEALED)
            sp++
            continue
          }
          case Op.SETITEMS:
          case Op.APPENDS: {
            if (nm === 0) throw this.opError(this.base + start, op, 'no MARK to take the items from')
            const mark = marks[--nm]!
            if (mark === 0) throw this.opError(this.base + start, op, 'nothing below the MARK to add the items to')
            const target = mark - 1
            const ti = info[target]!
            const container = stack[target]!
            let deepest = 0
            if (op === Op.SETITEMS) {
              if ((ti & (DICT | SEALED)) !== DICT) throw this.opError(this.base + start, op, this.notTarget('a dict', ti))
              if ((sp - mark) & 1) throw this.opError(this.base + start, op, `an odd number of values (${sp - mark}) after the MARK: a key has no value`)
              for (let i = mark; i < sp; i++) {
                const vi = info[i]!
                if (vi !== 0) {
                  if ((i - mark) % 2 === 0 && (vi & TUPLE) === 0)
                    throw this.opError(this.base + start, op, `a ${vi & DICT ? 'dict' : 'list'} cannot be a dict key`)
                  if ((vi & DEPTH) > deepest) deepest = vi & DEPTH
                  if (memoSlot[i]! >= 0) this.finishMemo(i)
                  info[i] = 0
                }
              }
              appendPairs(container as PickleDict, stack, mark, sp)
            } else {
              if ((ti & (LIST | SEALED)) !== LIST) throw this.opError(this.base + start, op, this.notTarget('a list', ti))
              for (let i = mark; i < sp; i++) {
                const vi = info[i]!
                if (vi !== 0) {
                  if ((vi & DEPTH) > deepest) deepest = vi & DEPTH
                  if (memoSlot[i]! >= 0) this.finishMemo(i)
                  info[i] = 0
                }
              }
              if (nm <= streamMarks && this.isStreamed(target, container, nm)) {
                for (let i = mark; i < sp; i++) this.emit(stack[i]!, this.base + start)
              } else {
                const list = container as PickleValue[]
                for (let i = mark; i < sp; i++) list.push(stack[i]!)
              }
            }
            if (deepest >= (ti & DEPTH)) this.deepen(target, deepest, start, op)
            sp = mark
            continue
          }
          case Op.APPEND:
          case Op.SETITEM: {
            const count = op === Op.APPEND ? 1 : 2
            if (sp < count + 1 || (nm > 0 && marks[nm - 1]! > sp - count - 1)) throw this.opError(this.base + start, op, 'not enough values on the stack')
            const target = sp - count - 1
            const ti = info[target]!
            const container = stack[target]!
            if ((ti & ((op === Op.APPEND ? LIST : DICT) | SEALED)) !== (op === Op.APPEND ? LIST : DICT))
              throw this.opError(this.base + start, op, this.notTarget(op === Op.APPEND ? 'a list' : 'a dict', ti))
            if (op === Op.SETITEM && info[sp - 2] !== 0 && (info[sp - 2]! & TUPLE) === 0)
              throw this.opError(this.base + start, op, `a ${info[sp - 2]! & DICT ? 'dict' : 'list'} cannot be a dict key`)
            let deepest = 0
            for (let i = target + 1; i < sp; i++) {
              const vi = info[i]!
              if (vi !== 0) {
                if ((vi & DEPTH) > deepest) deepest = vi & DEPTH
                if (memoSlot[i]! >= 0) this.finishMemo(i)
                info[i] = 0
              }
            }
            if (op === Op.SETITEM) appendPairs(container as PickleDict, stack, sp - 2, sp)
            else if (nm <= streamMarks && this.isStreamed(target, container, nm)) this.emit(stack[sp - 1]!, this.base + start)
            else (container as PickleValue[]).push(stack[sp - 1]!)
            if (deepest >= (ti & DEPTH)) this.deepen(target, deepest, start, op)
            sp = target + 1
            continue
          }
          case Op.TUPLE1:
          case Op.TUPLE2:
          case Op.TUPLE3:
          case Op.TUPLE:
          case Op.LIST:
          case Op.DICT: {
            let from: number
            if (op === Op.TUPLE1 || op === Op.TUPLE2 || op === Op.TUPLE3) {
              from = sp - (op - Op.TUPLE1 + 1)
              if (from < 0 || (nm > 0 && marks[nm - 1]! > from)) throw this.opError(this.base + start, op, 'not enough values on the stack')
            } else {
              if (nm === 0) throw this.opError(this.base + start, op, 'no MARK to take the items from')
              from = marks[--nm]!
            }
            if (op === Op.DICT && (sp - from) & 1)
              throw this.opError(this.base + start, op, `an odd number of values (${sp - from}) after the MARK: a key has no value`)
            if (from === sp && sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            let deepest = 0
            for (let i = from; i < sp; i++) {
              const vi = info[i]!
              if (vi !== 0) {
                if (op === Op.DICT && (i - from) % 2 === 0 && (vi & TUPLE) === 0)
                  throw this.opError(this.base + start, op, `a ${vi & DICT ? 'dict' : 'list'} cannot be a dict key`)
                if ((vi & DEPTH) > deepest) deepest = vi & DEPTH
                if (memoSlot[i]! >= 0) this.finishMemo(i)
                info[i] = 0
              }
            }
            if (deepest >= this.maxDepth)
              throw this.opError(this.base + start, op, `containers nested more than ${this.maxDepth} deep (limit maxDepth)`, 'limit')
            let value: PickleValue
            if (op === Op.DICT) {
              value = new PickleDict()
              appendPairs(value, stack, from, sp)
            } else value = stack.slice(from, sp)
            stack[from] = value
            info[from] = (deepest + 1) | (op === Op.DICT ? DICT : op === Op.LIST ? LIST : TUPLE | SEALED)
            sp = from + 1
            continue
          }
          case Op.SHORT_BINBYTES:
          case Op.SHORT_BINSTRING:
          case Op.BINUNICODE:
          case Op.BINBYTES:
          case Op.BINSTRING:
          case Op.BINUNICODE8:
          case Op.BINBYTES8:
          case Op.BYTEARRAY8: {
            const width = op === Op.SHORT_BINBYTES || op === Op.SHORT_BINSTRING ? 1 : op === Op.BINUNICODE || op === Op.BINBYTES || op === Op.BINSTRING ? 4 : 8
            if (p + width > end) break
            let n = width === 1 ? b[p]! : readUint32(b, p)
            if (width === 8) n = readUint64(b, p)
            else if (op === Op.BINSTRING && n >= 0x80000000) throw this.opError(this.base + start, op, `negative length ${n - 4294967296}`)
            this.checkLength(start, op, 1 + width, n, final)
            const from = p + width
            if (from + n > end) {
              this.need(start, 1 + width + n, final)
              break
            }
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            if (op === Op.BINUNICODE || op === Op.BINUNICODE8) stack[sp++] = decodeUtf8(b, from, n)
            else if (op === Op.BINSTRING || op === Op.SHORT_BINSTRING) stack[sp++] = decodeLatin1(b, from, n)
            else stack[sp++] = b.slice(from, from + n)
            p = from + n
            continue
          }
          case Op.LONG4: {
            if (p + 4 > end) break
            const n = b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)
            if (n < 0) throw this.opError(this.base + start, op, `negative byte count ${n}`)
            if (n > MAX_INT_BYTES) throw this.opError(this.base + start, op, `an integer of ${n} bytes (the limit is ${MAX_INT_BYTES})`, 'limit')
            this.checkLength(start, op, 5, n, final)
            if (p + 4 + n > end) {
              this.need(start, 5 + n, final)
              break
            }
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = decodeLong(b, p + 4, n)
            p += 4 + n
            continue
          }
          case Op.FRAME: {
            if (p + 8 > end) break
            this.checkLength(start, op, 9, readUint64(b, p), final)
            p += 8
            continue
          }
          case Op.PROTO: {
            if (p >= end) break
            const version = b[p++]!
            if (version > 5) throw this.opError(this.base + start, op, `protocol ${version} is newer than 5, the newest this reader knows`)
            if (this.protocol >= 0) throw this.opError(this.base + start, op, 'a second PROTO opcode')
            this.protocol = version
            continue
          }
          case Op.STOP: {
            if (nm > 0) throw this.opError(this.base + start, op, `${nm} MARK(s) still open`)
            if (sp !== 1) throw this.opError(this.base + start, op, sp === 0 ? 'the stack is empty' : `${sp} values on the stack, expected one`)
            if (info[0] !== 0) {
              if (memoSlot[0]! >= 0) this.finishMemo(0)
              info[0] = 0
            }
            this.result = stack[0]!
            this.stopped = true
            sp = 0
            stack.length = 0
            this.memo = []
            if (p < end) throw this.error(this.base + p, `${end - p} bytes after STOP (the pickle ended before the input did)`)
            return
          }
          case Op.POP: {
            if (nm > 0 && marks[nm - 1] === sp) {
              // POP with a MARK on top discards the MARK, as CPython does.
              nm--
              continue
            }
            if (sp === 0) throw this.opError(this.base + start, op, 'the stack is empty')
            sp--
            if (info[sp] !== 0) {
              if (memoSlot[sp]! >= 0) this.finishMemo(sp)
              info[sp] = 0
            }
            continue
          }
          case Op.POP_MARK: {
            if (nm === 0) throw this.opError(this.base + start, op, 'no MARK to pop to')
            const mark = marks[--nm]!
            for (let i = mark; i < sp; i++) {
              if (info[i] !== 0) {
                if (memoSlot[i]! >= 0) this.finishMemo(i)
                info[i] = 0
              }
            }
            sp = mark
            continue
          }
          case Op.DUP: {
            if (sp === 0 || (nm > 0 && marks[nm - 1] === sp)) throw this.opError(this.base + start, op, 'the stack is empty')
            const vi = info[sp - 1]!
            if (vi !== 0 && (vi & SEALED) === 0) throw this.opError(this.base + start, op, 'duplicating a container still being built is not supported')
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp] = stack[sp - 1]!
            info[sp] = vi
            sp++
            continue
          }
          case Op.INT:
          case Op.LONG:
          case Op.FLOAT: {
            const nl = this.lineEnd(p, start, op)
            if (nl < 0) break
            const text = decodeLatin1(b, p, nl - p)
            p = nl + 1
            let value: PickleValue
            if (op === Op.FLOAT) {
              value = parseFloatText(text)
              if (value === null) throw this.opError(this.base + start, op, `not a float: ${JSON.stringify(text.slice(0, 40))}`)
            } else if (op === Op.INT && (text === '00' || text === '01')) {
              value = text === '01'
            } else {
              value = parseDecimal(op === Op.LONG && text.endsWith('L') ? text.slice(0, -1) : text)
              if (value === null) throw this.opError(this.base + start, op, `not an integer: ${JSON.stringify(text.slice(0, 40))}`)
            }
            if (sp === capacity) {
              this.growStack(this.base + start)
              info = this.info
              memoSlot = this.memoSlot
              capacity = info.length
            }
            stack[sp++] = value
            continue
          }
          default: {
            if (FORBIDDEN.has(op)) throw this.opError(this.base + start, op, this.forbiddenDetail(op, p, end), 'forbidden')
            const why = UNSUPPORTED[op]
            if (why !== undefined) throw this.opError(this.base + start, op, `not supported: ${why}`, 'unsupported')
            throw this.error(this.base + start, `${describeOpcode(op)}: not a pickle opcode (the file is corrupt or not a pickle)`)
          }
        }
        // Reached only by `break`: the opcode at `start` needs bytes that have not arrived.
        p = start
        break
      }
      if (final && p < end) throw this.opError(this.base + start, op, `truncated: the input ends ${end - start} bytes into this opcode`, 'truncated')
    } finally {
      this.pos = p
      this.sp = sp
      this.nm = nm
    }
  }

  /** Index of the newline ending a text argument that starts at p, or -1 if it has not arrived. */
  private lineEnd(p: number, start: number, op: number): number {
    const limit = Math.min(this.end, p + MAX_LINE + 1)
    const nl = this.buf.subarray(0, limit).indexOf(0x0a, p)
    if (nl < 0 && limit - p > MAX_LINE) throw this.opError(this.base + start, op, `an argument longer than ${MAX_LINE} bytes without a newline`, 'limit')
    return nl
  }

  private memoIndexText(p: number, nl: number, start: number, op: number): number {
    const text = decodeLatin1(this.buf, p, nl - p)
    const index = parseDecimal(text)
    if (typeof index !== 'number' || index < 0) throw this.opError(this.base + start, op, `not a memo index: ${JSON.stringify(text.slice(0, 40))}`)
    return index
  }

  /** Declared length n of the opcode at `start`, after `header` bytes: it must fit in the input. */
  private checkLength(start: number, op: number, header: number, n: number, final: boolean): void {
    const offset = this.base + start
    const available = this.totalBytes !== undefined ? this.totalBytes - offset - header : final ? this.end - start - header : Infinity
    if (n > available) {
      const declared = n > MAX_SAFE ? String(readUint64Exact(this.buf, start + header - 8)) : String(n)
      throw this.opError(
        offset,
        op,
        `truncated: declares ${declared} bytes but only ${Math.max(available, 0)} remain in the input (the file ends before the snapshot does)`,
        'truncated',
      )
    }
  }

  private need(start: number, bytes: number, final: boolean): void {
    if (final) throw this.error(this.base + start, `truncated: the opcode needs ${bytes} bytes but the input ends after ${this.end - start}`, 'truncated')
    this.needed = bytes
  }

  private notTarget(expected: string, ti: number): string {
    const what =
      ti === 0
        ? 'not a container'
        : ti & TUPLE
          ? 'a tuple'
          : ti & SEALED
            ? `a ${ti & DICT ? 'dict' : 'list'} that is already finished (fetched from the memo or duplicated)`
            : ti & DICT
              ? 'a dict'
              : 'a list'
    return `the value below the items must be ${expected} being built, it is ${what}`
  }

  /**
   * A GET of a container still on the stack (stored by a PUT, not yet added to its parent). The
   * pickler wrote it completely before referring to it again, unless the data is recursive; either
   * way it is sealed here, so appending to it later (a cycle) is refused and its depth is final.
   */
  private sealShared(index: number, slot: number, mi: number, value: PickleValue, start: number, op: number): number {
    const position = mi & POSITION
    if (position >= this.sp || this.stack[position] !== value)
      throw this.opError(this.base + start, op, `memo index ${index} refers to a container stored twice while it was being built`)
    this.info[position]! |= SEALED
    this.memoSlot[position] = -1
    const sealed = this.info[position]! | PRESENT
    this.memoInfo[slot] = sealed
    return sealed
  }

  /** The container at `position` leaves the stack: its memo entry now says what it is, sealed. */
  private finishMemo(position: number): void {
    const slot = this.memoSlot[position]!
    if (this.memo[slot >>> MEMO_SHIFT]![slot & MEMO_MASK] === this.stack[position]) this.memoInfo[slot] = this.info[position]! | SEALED | PRESENT
    this.memoSlot[position] = -1
  }

  private deepen(target: number, childDepth: number, start: number, op: number): void {
    if (childDepth >= this.maxDepth) throw this.opError(this.base + start, op, `containers nested more than ${this.maxDepth} deep (limit maxDepth)`, 'limit')
    this.info[target] = (this.info[target]! & ~DEPTH) | (childDepth + 1)
  }

  private forbiddenDetail(op: number, p: number, end: number): string {
    let what = ''
    if (op === Op.GLOBAL || op === Op.INST) {
      // Name the global (module and name lines) in the error, from what has arrived.
      const lines = decodeLatin1(this.buf, p, Math.min(end - p, 200))
        .split('\n')
        .slice(0, 2)
      what = ` ${JSON.stringify(lines.join('.').replace(/[^\x20-\x7e]/g, '?'))}`
    }
    return `forbidden${what}: a snapshot holds only plain values, and this pickle would import, call or construct Python objects; nothing was run`
  }

  // ---- streaming: recognising the lists at the path, and routing their items ----

  /**
   * Whether the list at stack position `target`, about to receive items, is one of the streamed
   * lists. A list is filled before it is added to its parent, so where it will go is read from the
   * stack: the container below the innermost MARK at or below it (the batch it is an item of), or,
   * for a single item, the list just below it (APPEND) or the dict below its key (SETITEM); and so
   * on up to the root at position 0. Python's pickler leaves no other arrangement; for any other,
   * the worst outcome is a list not streamed, whose items then stay in the result.
   */
  private isStreamed(target: number, container: PickleValue, nm: number): boolean {
    if (container === this.streamList) return true
    const spec = this.streamSpec!
    const keys: (string | number)[] = new Array(spec.path.length)
    const stack = this.stack
    const info = this.info
    let x = target
    let m = nm - 1
    for (let level = spec.path.length - 1; level >= 0; level--) {
      while (m >= 0 && this.marks[m]! > x) m--
      const mark = m >= 0 ? this.marks[m]! : 0
      let parent = -1
      let key: PickleValue | undefined
      if (mark > 0) {
        // An item of the batch that MARK opened: a list's next index, or a dict's value after its key.
        const pending = x - mark
        const pi = info[mark - 1]!
        if (pi & LIST) {
          parent = mark - 1
          key = (stack[parent] as PickleValue[]).length + pending
        } else if (pi & DICT && pending & 1) {
          parent = mark - 1
          key = stack[x - 1]
        }
      }
      if (parent < 0) {
        // A single item, added by APPEND to the list below it or by SETITEM to the dict below its key.
        if (x - 1 >= mark && (info[x - 1]! & (LIST | SEALED)) === LIST) {
          parent = x - 1
          key = (stack[parent] as PickleValue[]).length
        } else if (x - 2 >= mark && (info[x - 2]! & (DICT | SEALED)) === DICT) {
          parent = x - 2
          key = stack[x - 1]
        } else return false
      }
      if (typeof key !== 'string' && typeof key !== 'number') return false
      const want = spec.path[level]
      if (want !== null && want !== key) return false
      keys[level] = key
      x = parent
    }
    if (x !== 0) return false
    this.streamList = container
    this.streamKeys = keys
    this.streamCount = 0
    return true
  }

  private emit(item: PickleValue, offset: number): void {
    if (item === DELIVERED) this.streamCount++
    else this.streamSpec!.onItem(this.streamKeys, this.streamCount++, item, offset)
  }

  /**
   * Near DELIVERED events (the opcode about to run at `offset` may reach them): lets an opcode pass
   * that leaves them alone, ends the fence at the one that appends them to their list (emit()
   * counts them), throws LaneRestart for any other.
   */
  private passFence(op: number, sp: number, nm: number, offset: number): void {
    const mark = nm > 0 ? this.marks[nm - 1]! : -1
    // The lowest stack slot the opcode reads or changes. Every opcode not named here only pushes,
    // or is refused by run() whatever the stack holds.
    let lowest: number
    switch (op) {
      case Op.MEMOIZE:
      case Op.BINPUT:
      case Op.LONG_BINPUT:
      case Op.PUT:
      case Op.POP:
      case Op.DUP:
      case Op.TUPLE1:
        lowest = sp - 1
        break
      case Op.APPEND:
      case Op.TUPLE2:
        lowest = sp - 2
        break
      case Op.SETITEM:
      case Op.TUPLE3:
        lowest = sp - 3
        break
      case Op.APPENDS:
      case Op.SETITEMS:
        if (mark < 0) return
        lowest = mark - 1
        break
      case Op.TUPLE:
      case Op.LIST:
      case Op.DICT:
      case Op.POP_MARK:
        if (mark < 0) return
        lowest = mark
        break
      case Op.STOP:
        // Refused for an open MARK or more than one value, whatever the values are.
        if (nm > 0 || sp > 1) return
        lowest = -1
        break
      default:
        return
    }
    if (lowest >= this.fenceTop) return
    const streamMarks = this.streamSpec === undefined ? -1 : this.streamSpec.path.length
    const appendsBatch = op === Op.APPENDS && this.fenceBatch && mark === this.fenceFrom && mark > 0
    const appendsOne = op === Op.APPEND && !this.fenceBatch && sp - 1 === this.fenceFrom && sp >= 2 && mark <= sp - 2
    if (appendsBatch || appendsOne) {
      const target = appendsBatch ? mark - 1 : sp - 2
      const left = appendsBatch ? nm - 1 : nm
      if ((this.info[target]! & (LIST | SEALED)) === LIST && left <= streamMarks && this.isStreamed(target, this.stack[target]!, left)) {
        this.fenceFrom = this.fenceTop = -1
        return
      }
    }
    throw new LaneRestart(offset)
  }
}

/** Unpickles a whole pickle held in memory. */
export function unpickle(bytes: Uint8Array, options: UnpickleOptions = {}): PickleValue {
  const unpickler = new Unpickler({ totalBytes: bytes.length, ...options })
  unpickler.feed(bytes)
  return unpickler.finish()
}

export class MemoReferenceScanner {
  readonly references = new MemoReferences()
  private carry: Uint8Array = new Uint8Array(0)
  private stopped = false

  /** From byte `base` of a pickle whose memo had `memoNext` indices stored before it (0 and 0: from its start). */
  constructor(
    private base = 0,
    private memoNext = 0,
  ) {}

  feed(chunk: Uint8Array): void {
    if (this.stopped || chunk.length === 0) return
    let b: Uint8Array
    if (this.carry.length > 0) {
      b = new Uint8Array(this.carry.length + chunk.length)
      b.set(this.carry)
      b.set(chunk, this.carry.length)
    } else b = chunk
    const end = b.length
    let p = 0
    const refs = this.references
    scan: while (p < end) {
      const start = p
      const op = b[p++]!
      switch (op) {
        case Op.BINGET:
        case Op.LONG_BINGET: {
          const width = op === Op.BINGET ? 1 : 4
          if (p + width > end) {
            p = start
            break scan
          }
          const index = width === 1 ? b[p]! : (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0
          if (index < this.memoNext) refs.add(index)
          p += width
          continue
        }
        case Op.MEMOIZE:
          this.memoNext++
          continue
        case Op.BINPUT:
        case Op.LONG_BINPUT: {
          const width = op === Op.BINPUT ? 1 : 4
          if (p + width > end) {
            p = start
            break scan
          }
          const index = width === 1 ? b[p]! : (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0
          if (index > this.base + start) {
            this.stopped = true
            return
          }
          if (index >= this.memoNext) this.memoNext = index + 1
          p += width
          continue
        }
        case Op.SHORT_BINUNICODE:
        case Op.SHORT_BINBYTES:
        case Op.SHORT_BINSTRING:
        case Op.LONG1: {
          if (p >= end) {
            p = start
            break scan
          }
          const n = b[p]!
          if (p + 1 + n > end) {
            p = start
            break scan
          }
          p += 1 + n
          continue
        }
        case Op.BINUNICODE:
        case Op.BINBYTES:
        case Op.BINSTRING:
        case Op.LONG4:
        case Op.BINUNICODE8:
        case Op.BINBYTES8:
        case Op.BYTEARRAY8: {
          const width = op === Op.BINUNICODE8 || op === Op.BINBYTES8 || op === Op.BYTEARRAY8 ? 8 : 4
          if (p + width > end) {
            p = start
            break scan
          }
          let n = (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0
          if (width === 8) n += ((b[p + 4]! | (b[p + 5]! << 8) | (b[p + 6]! << 16) | (b[p + 7]! << 24)) >>> 0) * 4294967296
          if (n > 2 ** 40) {
            this.stopped = true
            return
          }
          if (p + width + n > end) {
            p = start
            break scan
          }
          p += width + n
          continue
        }
        case Op.BININT1:
        case Op.PROTO:
          p += 1
          if (p > end) {
            p = start
            break scan
          }
          continue
        case Op.BININT2:
          p += 2
          if (p > end) {
            p = start
            break scan
          }
          continue
        case Op.BININT:
          p += 4
          if (p > end) {
            p = start
            break scan
          }
          continue
        case Op.BINFLOAT:
        case Op.FRAME:
          p += 8
          if (p > end) {
            p = start
            break scan
          }
          continue
        case Op.MARK:
        case Op.EMPTY_TUPLE:
        case Op.EMPTY_LIST:
        case Op.EMPTY_DICT:
        case Op.APPEND:
        case Op.APPENDS:
        case Op.SETITEM:
        case Op.SETITEMS:
        case Op.TUPLE:
        case Op.TUPLE1:
        case Op.TUPLE2:
        case Op.TUPLE3:
        case Op.LIST:
        case Op.DICT:
        case Op.NONE:
        case Op.NEWTRUE:
        case Op.NEWFALSE:
        case Op.POP:
        case Op.POP_MARK:
        case Op.DUP:
          continue
        case Op.INT:
        case Op.LONG:
        case Op.FLOAT:
        case Op.GET:
        case Op.PUT: {
          const nl = b.indexOf(0x0a, p)
          if (nl < 0 || nl - p > MAX_LINE) {
            if (end - p > MAX_LINE) {
              this.stopped = true
              return
            }
            p = start
            break scan
          }
          if (op === Op.GET || op === Op.PUT) {
            const index = Number(decodeLatin1(b, p, nl - p))
            if (Number.isSafeInteger(index) && index >= 0) {
              if (op === Op.PUT) this.memoNext = Math.max(this.memoNext, index + 1)
              else if (index < this.memoNext) refs.add(index)
            }
          }
          p = nl + 1
          continue
        }
        default:
          // STOP, forbidden, unsupported or unknown: nothing more to learn.
          this.stopped = true
          return
      }
    }
    this.base += p
    this.carry = b.slice(p)
  }
}
