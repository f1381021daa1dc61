// The fast lane of the PyTorch snapshot import: it decodes a snapshot pickle held whole in memory and hands each
// event of device_traces to the mapper as typed fields, building no object per event, frames list
// or frame (the general lane builds them all with the restricted unpickler, then reads them back).
//
// It takes only what Python's pickler writes for a snapshot (protocols 2 to 5: dicts, lists,
// tuples, str, int, float, bool, None, the memo, frames) in the shape torch writes it, and gives
// up on anything else: another opcode, another shape, a memo index rebound or read back where the
// general lane would build an object, a value the mapper would refuse, a limit in sight. It then
// hands the general lane its state (a LaneHandoff: the general lane goes on into the same mapper):
// outside device_traces (the generic part) at the opcode it gave up on, which it gave up on before
// changing anything; inside device_traces at the start of the event it gave up in (or at the list
// or batch boundary before it), the events it already gave the mapper standing on the general
// lane's stack as DELIVERED, which the general lane counts but does not map again where they are
// appended to their list (any other use of them is a LaneRestart). Where an event, frame or frames
// list it never built is read back after that point, or in the other cases FastRestart lists, the
// caller runs the general lane from byte 0 on a new mapper. Either way the general lane gives the import or the error, so every check of the
// restricted unpickler stands as it was, and an import is the same whichever lane read which part
// (test/unit/services/import/pytorch/pytorch-lanes.test.ts compares the two on every fixture and on mutated ones).
// Nothing here throws on any input.
//
// What makes it fast: torch's pickle writes each dict key once and reads it back from the memo
// thereafter, and a frame dict once per distinct frame object. So a memo entry here is typed: a
// string (an id whose code says which key or action it is), a number, a frame (an id of its name,
// file and line) or a frames list (an id of its sequence of frames), and a string no event reads
// (compile_context) is only noted where it lies, decoded if it is ever read back; an event is a
// few table lookups and stores, no allocation. The mapper's frame and stack tables are filled in
// the same order as the general lane fills them (on an alloc's or oom's first use), so the ids are
// equal. Loops that run per event or per opcode are in plain methods, not in the generators that
// let an async caller in: V8 optimizes a generator only after many calls.
import {
  DELIVERED,
  HandoffKind,
  MemoReferenceScanner,
  PickleDict,
  appendDictPairs as appendPairs,
  binFloat,
  decodeLongAt as decodeLong,
  decodeUtf8At as decodeUtf8,
  readUint32LE as readUint32,
  type DeliveredEvents,
  type HandoffValue,
  type LaneHandoff,
  type PickleValue,
} from './pickle-vm.ts'
import { ACTION, KEY } from './snapshot-keys.ts'

const { float64, float64Bytes } = binFloat

// The opcodes this lane reads: a subset of the VM's table (pickle-vm.ts), declared again in this
// file so that they are literal case labels here too (an imported const enum is a property load
// per label: docs/perf-notes.md); test/unit/services/import/pytorch/pickle-opcodes.test.ts checks
// every value against the VM's.
const enum Op {
  MARK = 0x28,
  EMPTY_TUPLE = 0x29,
  STOP = 0x2e,
  BINFLOAT = 0x47,
  BININT = 0x4a,
  BININT1 = 0x4b,
  BININT2 = 0x4d,
  NONE = 0x4e,
  BINUNICODE = 0x58,
  EMPTY_LIST = 0x5d,
  APPEND = 0x61,
  APPENDS = 0x65,
  BINGET = 0x68,
  LONG_BINGET = 0x6a,
  BINPUT = 0x71,
  LONG_BINPUT = 0x72,
  SETITEM = 0x73,
  TUPLE = 0x74,
  SETITEMS = 0x75,
  EMPTY_DICT = 0x7d,
  PROTO = 0x80,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  MEMOIZE = 0x94,
  FRAME = 0x95,
}

/** What the decoder hands its results to (the importer's SnapshotMapper). */
export interface DecodedEventSink {
  wants(device: number): boolean
  decodedEvent(device: number, action: string, addr: number, size: number, stream: number, time: number, stack: number, metadata: string | null): void
  frameId(name: string, filename: string, line: number): number
  internStack(ids: ArrayLike<number>, n: number): number
}

/**
 * Where the fast lane hands the whole input back and the general lane reads it from byte 0 into a
 * new sink: 'declined', it read nothing (not protocol 2 to 5, or maxDepth below what it needs);
 * 'read-back', a value it never built (an event dict, frame or frames list) is read back from the
 * memo after where it gave up; 'truncated', the opcode it gave up on runs past the end (the general
 * lane gives the truncation error); 'memo-hole', inside device_traces, a memo store since the point
 * to go on from filled an index below the highest stored (Python's pickler never does);
 * 'unmatched', an open container is not where the generic part's stack holds it (a safeguard).
 */
export interface FastRestart {
  restart: 'declined' | 'read-back' | 'truncated' | 'memo-hole' | 'unmatched'
}

export interface FastDecoded {
  /** The root dict, device_traces' lists left empty (their events went to the sink), as the streaming unpickler leaves it. */
  root: PickleValue
  protocol: number
}

// Memo entry kinds.
const enum Memo {
  unset = 0,
  /** num: string id */
  string = 1,
  /** num: the number */
  number = 2,
  /** num: index in `generic` (anything the generic part built: containers, bool, None, bigint) */
  generic = 3,
  /** num: frame id (a frame dict the event decoder read) */
  frame = 4,
  /** num: local stack id, -1 for an empty list (a frames list the event decoder read) */
  frames = 5,
  /** an event dict: the general lane would have built it; reading it back gives up */
  event = 6,
  /**
   * num: offset of the SHORT_BINUNICODE of a string an event does not use (torch's compile_context
   * is a new 'N/A' per event), interned only if it is read back (resolveLazy)
   */
  lazyString = 7,
}

// Codes of the strings the decoder looks for (strings are interned; each id has a code, 0 for others).
const enum Code {
  other = 0,
  action,
  addr,
  size,
  stream,
  timeUs,
  frames,
  userMetadata,
  name,
  filename,
  line,
  deviceTraces,
  alloc,
  freeRequested,
  free,
  freeCompleted,
  segmentAlloc,
  segmentFree,
  segmentMap,
  segmentUnmap,
  oom,
  snapshot,
  deviceFree,
}
// The canonical (internalised) string of each code: the mapper switches on the action's string.
const NAMES: readonly string[] = [
  '',
  KEY.action,
  KEY.addr,
  KEY.size,
  KEY.stream,
  KEY.timeUs,
  KEY.frames,
  KEY.userMetadata,
  KEY.name,
  KEY.filename,
  KEY.line,
  KEY.deviceTraces,
  ACTION.alloc,
  ACTION.freeRequested,
  ACTION.free,
  ACTION.freeCompleted,
  ACTION.segmentAlloc,
  ACTION.segmentFree,
  ACTION.segmentMap,
  ACTION.segmentUnmap,
  ACTION.oom,
  ACTION.snapshot,
  KEY.deviceFree,
]
const CODES = new Map<string, number>(NAMES.map((n, i) => [n, i] as [string, number]).slice(1))

// Kinds of the scalar scalar() read (in `kind`).
const enum Scalar {
  string = 1,
  int,
  float,
  nil,
  bool,
}

/** Frames on the generic part's stack and MARKs, and containers nested, kept well below the general lane's limits. */
const GENERIC_STACK = 1 << 16
/** Most events in one APPENDS batch (the general lane holds them on its stack, limited to 2^20). */
const BATCH_ITEMS = 1 << 18
/** A memo index further than this past the highest one stored is not what a pickler writes. */
const MEMO_JUMP = 1 << 16
/** The general lane's limit on nesting must leave this much room for the fast lane to run. */
const DEPTH_NEEDED = 16
const MAX_DEVICE = 65535
/** The largest block a trace stores: PyTorch rounds requests to 512 bytes, and the trace stores sizes below 2^53. */
export const MAX_BLOCK = 2 ** 53 - 512

/**
 * Decodes `bytes` into `sink` and returns the root; or where it gives up, the state the general
 * lane goes on from into the same sink, or a FastRestart (the sink may then hold part of the
 * events: use a new one and start over). A generator that yields about every `yieldBytes` bytes
 * of input, so an async caller can let the event loop in; `decodeFast` drains it.
 */
export function* decodeFastSteps(
  bytes: Uint8Array,
  sink: DecodedEventSink,
  maxDepth: number,
  yieldBytes = Infinity,
): Generator<number, FastDecoded | LaneHandoff | FastRestart> {
  if (!(maxDepth >= DEPTH_NEEDED)) return { restart: 'declined' }
  return yield* new FastDecoder(bytes, sink, maxDepth, yieldBytes).run()
}

export function decodeFast(bytes: Uint8Array, sink: DecodedEventSink, maxDepth: number): FastDecoded | LaneHandoff | FastRestart {
  const steps = decodeFastSteps(bytes, sink, maxDepth)
  for (;;) {
    const step = steps.next()
    if (step.done) return step.value
  }
}

class FastDecoder {
  private readonly end: number
  /** Deepest nesting and most MARKs the generic part allows (the general lane refuses maxDepth). */
  private readonly depthLimit: number

  private memoKind: Uint8Array
  /** Per memo index: the id (string, frame, stack, generic index, index in `numbers`). */
  private memoId: Int32Array
  /** Numbers stored in the memo (few: Python's pickler does not memoize ints and floats). */
  private numbers: Float64Array
  private numberCount = 0
  /** Per memo index: 1 + the Code of a string entry, 0 for any other entry (an event key in two loads). */
  private memoKeyCode: Uint8Array
  private memoNext = 0
  private readonly generic: PickleValue[] = []
  /** Nesting depth of each generic value, -1 while the container is still being filled. */
  private readonly genericDepth: number[] = []
  /** Stack slot of a generic container while it is open (genericDepth -1). */
  private readonly genericSlot: number[] = []
  /**
   * For a generic value read back as a frames list, its local stack id + 2; as a frame, its frame
   * id + 2 (0: not yet). Apart: the same list read back as a frames list and then as a frame (a
   * damaged pickle) must not take its stack id for a frame id.
   */
  private readonly genericAsStack: number[] = []
  private readonly genericAsFrame: number[] = []

  // Strings by id; their codes; ids by content, and by bytes (open addressing over the input's offsets).
  private readonly strings: string[] = []
  private codes: Int32Array
  private readonly stringIds = new Map<string, number>()
  private byteSlots: Int32Array
  private byteAt: Int32Array
  private byteLength: Int32Array
  private byteIds: Int32Array
  private byteCount = 0

  // Frames: name and file string ids, line; deduplicated by content; the mapper's frame id once used.
  private frameName: Int32Array
  private frameFile: Int32Array
  private frameLine: Float64Array
  private frameGlobal: Int32Array
  private frameCount = 0
  private frameSlots: Int32Array
  /** Frame ids of frame dicts the generic part built (the segments' blocks), found on first read-back. */
  private readonly genericFrames = new Map<PickleDict, number>()
  private readonly genericStacks = new Map<PickleValue[], number>()

  // Local stacks: sequences of frame ids, deduplicated; the mapper's stack id once used.
  private stackFrames: Int32Array
  private stackFramesUsed = 0
  private stackStart: Int32Array
  private stackLength: Int32Array
  private stackGlobal: Int32Array
  private stackCount = 0
  private stackSlots: Int32Array
  /** The frames of the list being read. */
  private scratch: Int32Array
  private globalScratch: Uint32Array

  // Outputs of scalar() and of the readers below.
  private kind = 0
  private num = 0
  /** The code of the key dictKey() read last. */
  private keyCode = 0
  private depth = 0

  // The generic part's stack (genericPart()), kept across device_traces.
  private readonly stack: PickleValue[] = []
  /** Per slot: 0 scalar, SLOT_OPEN_LIST/SLOT_OPEN_DICT (may still be added to), SLOT_SEALED (a finished container). */
  private readonly state: number[] = []
  private readonly depths: number[] = []
  /** Generic index of the memo entry of a container stored while it was still open, else -1. */
  private readonly openMemo: number[] = []
  private readonly marks: number[] = []
  private root: PickleDict | null = null
  private sawDeviceTraces = false
  /** Where the general lane resumes if the generic part gives up: the opcode it gave up on. */
  private resumeAt = 0
  /** The generic part's tuples (the general lane tells a tuple from a list: only a tuple may be a dict key). */
  private readonly tuples = new WeakSet<PickleValue[]>()
  /**
   * device_traces' list, which the generic part holds as sealed (so it gives up on adding to it),
   * while the general lane holds it open until a GET of it seals it (outerSealed).
   */
  private outerList: PickleValue | null = null
  private outerSealed = false
  private stopped = false
  // State of the batch batch() reads, kept across the generator's yields.
  private batchItems = 0
  private batchDeepest = 0
  private batchDone = false

  // Where device_traces stands, for tracesHandoff(): the last point the general lane can go on from
  // (the start of an event, or a list or batch boundary) and the memo as it was there.
  private rewindAt = 0
  private rewindMemoNext = 0
  /** Where a BINPUT last filled an index below memoNext (a rewind to before it cannot undo that). */
  private holeFilledAt = -1
  /** device_traces' list once opened (EMPTY_LIST and its memo store read), and its generic index. */
  private tracesList: PickleValue[] | null = null
  private tracesG = -1
  /** Generic index, depth and events delivered (-1: never appended to, not even by an empty batch) of each device list added to tracesList. */
  private readonly listG: number[] = []
  private readonly listDepth: number[] = []
  private readonly listEvents: number[] = []
  /** Whether a MARK of device_traces' list is open; device lists from this index on are on the general lane's stack. */
  private outerBatch = false
  private outerStackFrom = 0
  /** Whether the last device list is still being filled; its deepest event; its events delivered before the open batch. */
  private listOpen = false
  private listDeepest = 0
  private listDelivered = 0
  /** Whether an APPENDS or APPEND to the open list was read (the general lane's stream is on it). */
  private listAppended = false
  /** Whether the open list's MARK is open, and its events delivered since. */
  private listBatch = false
  private batchDelivered = 0
  /** Depth of an event delivered and not yet appended by its APPEND, else 0. */
  private singleDelivered = 0

  private protocol = -1
  private nextYield: number

  constructor(
    private readonly b: Uint8Array,
    private readonly sink: DecodedEventSink,
    maxDepth: number,
    private readonly yieldBytes: number,
  ) {
    this.end = b.length
    // Sized once for torch's pickles (a memo entry per 22 bytes or so), grown by doubling past that.
    const memoSize = Math.max(1024, Math.min(Math.ceil(b.length / 20), 1 << 20))
    // Every first table from one ArrayBuffer (each costs about a microsecond to allocate; a
    // decoder starts with two dozen), widest elements first so that each stays aligned.
    const tables = new Tables(8 * (16 + 256) + 4 * (12 * 256 + 3 * 512 + 1024) + 6 * memoSize) // as taken below
    this.numbers = tables.float64(16)
    this.frameLine = tables.float64(256)
    this.codes = tables.int32(256)
    this.byteSlots = tables.int32(512).fill(-1)
    this.byteAt = tables.int32(256)
    this.byteLength = tables.int32(256)
    this.byteIds = tables.int32(256)
    this.frameName = tables.int32(256)
    this.frameFile = tables.int32(256)
    this.frameGlobal = tables.int32(256)
    this.frameSlots = tables.int32(512).fill(-1)
    this.stackFrames = tables.int32(1024)
    this.stackStart = tables.int32(256)
    this.stackLength = tables.int32(256)
    this.stackGlobal = tables.int32(256)
    this.stackSlots = tables.int32(512).fill(-1)
    this.scratch = tables.int32(256)
    this.globalScratch = tables.uint32(256)
    this.memoId = tables.int32(memoSize)
    this.memoKind = tables.uint8(memoSize)
    this.memoKeyCode = tables.uint8(memoSize)
    this.depthLimit = Math.min(maxDepth, 1 << 12) - 4
    this.nextYield = yieldBytes
  }

  // ---- the generic part: the root, segments, settings, annotations ----

  *run(): Generator<number, FastDecoded | LaneHandoff | FastRestart> {
    const b = this.b
    if (this.end < 3 || b[0] !== Op.PROTO || b[1]! < 2 || b[1]! > 5) return { restart: 'declined' }
    this.protocol = b[1]!
    let p = 2
    for (;;) {
      p = this.genericPart(p)
      if (p < 0) return this.handoff()
      if (this.root !== null && this.stopped) return { root: this.root, protocol: this.protocol }
      // At device_traces' value: the event decoder reads it, the generic part takes it as a sealed list.
      this.resumeAt = p
      this.tracesList = null
      p = yield* this.deviceTraces(p)
      if (p < 0) return this.tracesList === null ? this.handoff() : this.tracesHandoff()
      this.tracesList = null
      this.outerList = this.generic[this.num]!
      this.stack.push(this.generic[this.num]!)
      this.state.push(SLOT_SEALED)
      this.depths.push(this.depth)
      this.openMemo.push(-1)
    }
  }

  /**
   * The generic part from p: up to STOP (then this.stopped; returns the position after it) or to
   * the value of the root's device_traces key (returns its position), -1 where it gives up. Out of
   * the generator run(), which V8 optimizes only after many calls, so that its loop is optimized as
   * it runs.
   */
  private genericPart(p: number): number {
    const b = this.b
    const stack = this.stack
    const state = this.state
    const depths = this.depths
    const openMemo = this.openMemo
    const marks = this.marks
    for (;;) {
      // Every give-up below leaves the state as it was before this opcode (the general lane resumes here).
      this.resumeAt = p
      if (stack.length >= GENERIC_STACK) return -1
      p = this.skipFrames(p)
      if (p < 0 || p >= this.end) return -1
      const op = b[p++]!
      let pushed: PickleValue | undefined
      let pushedState = 0
      let pushedDepth = 0
      let keyCandidate = false
      switch (op) {
        case Op.STOP: {
          // The root dict itself must be what is left, not a tuple or list holding it: the general
          // path would give that to the mapper, which refuses a root that is not a dict.
          if (marks.length !== 0 || stack.length !== 1 || this.root === null || stack[0] !== this.root || p !== this.end) return -1
          this.stopped = true
          return p
        }
        case Op.EMPTY_DICT:
          pushed = new PickleDict()
          pushedState = SLOT_OPEN_DICT
          pushedDepth = 1
          if (stack.length === 0) {
            if (this.root !== null) return -1
            this.root = pushed as PickleDict
          }
          break
        case Op.EMPTY_LIST:
          pushed = []
          pushedState = SLOT_OPEN_LIST
          pushedDepth = 1
          break
        case Op.EMPTY_TUPLE:
          pushed = []
          this.tuples.add(pushed)
          pushedState = SLOT_SEALED
          pushedDepth = 1
          break
        case Op.MARK:
          if (marks.length >= this.depthLimit) return -1
          marks.push(stack.length)
          continue
        case Op.SETITEMS:
        case Op.APPENDS:
        case Op.SETITEM:
        case Op.APPEND: {
          let from: number
          const batch = op === Op.SETITEMS || op === Op.APPENDS
          if (batch) {
            if (marks.length === 0) return -1
            from = marks[marks.length - 1]!
          } else {
            from = stack.length - (op === Op.SETITEM ? 2 : 1)
            // A MARK above the target (between it and the items) leaves too few values, as the general lane says.
            if (marks.length > 0 && marks[marks.length - 1]! >= from) return -1
          }
          const target = from - 1
          if (target < 0 || state[target] !== (op === Op.SETITEMS || op === Op.SETITEM ? SLOT_OPEN_DICT : SLOT_OPEN_LIST)) return -1
          if (op === Op.SETITEMS || op === Op.SETITEM) {
            if ((stack.length - from) & 1) return -1
          }
          let deepest = 0
          for (let i = from; i < stack.length; i++) {
            if (state[i] !== 0) {
              // Keys are scalars here (a tuple key is legal but not in a snapshot).
              if ((op === Op.SETITEMS || op === Op.SETITEM) && ((i - from) & 1) === 0) return -1
              if (depths[i]! > deepest) deepest = depths[i]!
            }
          }
          if (deepest + 1 >= this.depthLimit) return -1
          // Checked: from here on the opcode runs.
          if (batch) marks.pop()
          for (let i = from; i < stack.length; i++) if (state[i] !== 0) this.finished(openMemo[i]!, depths[i]!)
          if (op === Op.SETITEMS || op === Op.SETITEM) appendPairs(stack[target] as PickleDict, stack, from, stack.length)
          else {
            const list = stack[target] as PickleValue[]
            for (let i = from; i < stack.length; i++) list.push(stack[i]!)
          }
          if (deepest + 1 > depths[target]!) depths[target] = deepest + 1
          truncate(stack, state, depths, openMemo, from)
          continue
        }
        case Op.TUPLE1:
        case Op.TUPLE2:
        case Op.TUPLE3:
        case Op.TUPLE: {
          let from: number
          if (op === Op.TUPLE) {
            if (marks.length === 0) return -1
            from = marks[marks.length - 1]!
          } else {
            from = stack.length - (op - Op.TUPLE1 + 1)
            if (from < 0 || (marks.length > 0 && marks[marks.length - 1]! > from)) return -1
          }
          let deepest = 0
          for (let i = from; i < stack.length; i++) if (state[i] !== 0 && depths[i]! > deepest) deepest = depths[i]!
          if (deepest + 1 >= this.depthLimit) return -1
          if (op === Op.TUPLE) marks.pop()
          for (let i = from; i < stack.length; i++) if (state[i] !== 0) this.finished(openMemo[i]!, depths[i]!)
          pushed = stack.slice(from)
          this.tuples.add(pushed)
          pushedState = SLOT_SEALED
          pushedDepth = deepest + 1
          truncate(stack, state, depths, openMemo, from)
          break
        }
        case Op.MEMOIZE:
        case Op.BINPUT:
        case Op.LONG_BINPUT: {
          const index = this.putIndex(op, p - 1)
          if (index < 0 || stack.length === 0 || (marks.length > 0 && marks[marks.length - 1] === stack.length)) return -1
          p += op === Op.MEMOIZE ? 0 : op === Op.BINPUT ? 1 : 4
          const top = stack.length - 1
          const value = stack[top]!
          if (typeof value === 'string') this.setMemo(index, Memo.string, this.internString(value))
          else if (typeof value === 'number') this.setMemo(index, Memo.number, value)
          else {
            const open = state[top] === SLOT_OPEN_LIST || state[top] === SLOT_OPEN_DICT
            if (open && openMemo[top]! >= 0) return -1 // stored twice while open
            const g = this.addGeneric(value, open ? -1 : depths[top]!)
            this.setMemo(index, Memo.generic, g)
            if (open) {
              openMemo[top] = g
              this.genericSlot[g] = top
            }
          }
          continue
        }
        case Op.BINGET:
        case Op.LONG_BINGET: {
          const index = op === Op.BINGET ? b[p]! : readUint32(b, p)
          p += op === Op.BINGET ? 1 : 4
          if (p > this.end || index >= this.memoNext) return -1
          if (this.memoKind[index] === Memo.lazyString) this.resolveLazy(index)
          const k = this.memoKind[index]!
          const n = this.memoId[index]!
          if (k === Memo.string) {
            pushed = this.strings[n]!
            keyCandidate = true
          } else if (k === Memo.number) pushed = this.numbers[n]!
          else if (k === Memo.generic) {
            pushed = this.generic[n]!
            if (pushed === this.outerList) this.outerSealed = true
            if (pushed !== null && typeof pushed === 'object') {
              pushedDepth = this.genericDepth[n]!
              if (pushedDepth < 0) {
                // Still on the stack (an item of a batch not yet added): as the general lane does,
                // it is sealed here, so adding to it later (a cycle) gives up and its depth is final.
                const slot = this.genericSlot[n]!
                if (stack[slot] !== pushed || openMemo[slot] !== n) return -1
                state[slot] = SLOT_SEALED
                openMemo[slot] = -1
                pushedDepth = this.genericDepth[n] = depths[slot]!
              }
              pushedState = SLOT_SEALED
            }
          } else return -1
          break
        }
        case Op.LONG1:
          // Here (not in scalar()) a bigint is a value like any other.
          if (p + 1 > this.end || p + 1 + b[p]! > this.end) return -1
          pushed = decodeLong(b, p + 1, b[p]!)
          p += 1 + b[p]!
          break
        default: {
          const q = this.scalar(p - 1)
          if (q < 0) return -1
          p = q
          const kind = this.kind
          if (kind === Scalar.string) {
            pushed = this.strings[this.num]!
            keyCandidate = true
          } else if (kind === Scalar.int || kind === Scalar.float) pushed = this.num
          else if (kind === Scalar.nil) pushed = null
          else pushed = this.num === 1
        }
      }
      stack.push(pushed!)
      state.push(pushedState)
      depths.push(pushedDepth)
      openMemo.push(-1)
      // A key of the root dict: device_traces gets the event decoder.
      if (
        keyCandidate &&
        this.root !== null &&
        stack[0] === this.root &&
        state[0] === SLOT_OPEN_DICT &&
        (stack.length & 1) === 0 &&
        (marks.length === 1 ? marks[0] === 1 : marks.length === 0 && stack.length === 2) &&
        pushed === KEY.deviceTraces
      ) {
        // A give-up here resumes after the key, which is on the stack.
        this.resumeAt = p
        if (this.sawDeviceTraces) return -1
        // After the key's own memo store, if any.
        const put = this.reserveAt(p)
        if (put === -2) return -1
        this.sawDeviceTraces = true
        if (put >= 0) {
          this.setMemo(put, Memo.string, this.internString(KEY.deviceTraces))
          p += putLength(b[p]!)
        }
        return p
      }
    }
  }

  /** A generic container is finished: its memo entry (if it was stored while open) gets its depth. */
  private finished(g: number, depth: number): void {
    if (g >= 0) this.genericDepth[g] = depth
  }

  private addGeneric(value: PickleValue, depth: number): number {
    this.generic.push(value)
    this.genericDepth.push(depth)
    this.genericSlot.push(-1)
    this.genericAsStack.push(0)
    this.genericAsFrame.push(0)
    return this.generic.length - 1
  }

  // ---- the hand-off to the general lane ----

  /**
   * The generic part gave up at resumeAt: its state as the general lane holds it there (the same
   * stack, MARKs and memo, told in the general lane's terms), or a FastRestart where that cannot be
   * told: an event dict, frame or frames list this lane stored in the memo without building it is
   * read back after resumeAt, or the last opcode ran past the end. On truncation the general lane
   * from byte 0 only gives the truncation error, at the same offset, so it is not worth more.
   */
  private handoff(): LaneHandoff | FastRestart {
    const at = this.resumeAt
    // Past the end: the last opcode read its fixed-width argument beyond it (scalar() leaves that check to the caller).
    if (at > this.end) return { restart: 'truncated' }
    let unbuilt = false
    for (let i = 0; i < this.memoNext && !unbuilt; i++) {
      const k = this.memoKind[i]
      unbuilt = k === Memo.event || k === Memo.frame || k === Memo.frames
    }
    if (unbuilt) {
      const scanner = new MemoReferenceScanner(at, this.memoNext)
      scanner.feed(this.b.subarray(at))
      const read = scanner.references
      for (let i = 0; i < this.memoNext; i++) {
        const k = this.memoKind[i]
        if ((k === Memo.event || k === Memo.frame || k === Memo.frames) && read.has(i)) return { restart: 'read-back' }
      }
    }
    const stack: HandoffValue[] = this.stack.map((value, i) =>
      this.described(value, this.state[i] === 0 ? -1 : this.depths[i]!, this.state[i] === SLOT_SEALED && (value !== this.outerList || this.outerSealed)),
    )
    const stackMemo = this.stack.map(() => -1)
    const memo = new Map<number, HandoffValue | { open: number }>()
    for (let i = 0; i < this.memoNext; i++) {
      const id = this.memoId[i]!
      switch (this.memoKind[i]) {
        case Memo.string:
          memo.set(i, this.described(this.strings[id]!, -1, false))
          break
        case Memo.lazyString:
          memo.set(i, this.described(this.strings[this.resolveLazy(i)]!, -1, false))
          break
        case Memo.number:
          memo.set(i, this.described(this.numbers[id]!, -1, false))
          break
        case Memo.generic: {
          const value = this.generic[id]!
          if (value === null || typeof value !== 'object' || value instanceof Uint8Array) {
            memo.set(i, this.described(value, -1, false))
            break
          }
          // Open where the general lane holds it open: on the stack, not added anywhere, not read back.
          const open = this.genericDepth[id]! < 0 ? this.genericSlot[id]! : value === this.outerList && !this.outerSealed ? this.stack.indexOf(value) : -1
          if (open >= 0) {
            if (this.stack[open] !== value) return { restart: 'unmatched' }
            stackMemo[open] = i
            memo.set(i, { open })
          } else memo.set(i, this.described(value, this.genericDepth[id]!, true))
          break
        }
        default:
        // unset, or a value not built (not read back after `at`, checked above): absent.
      }
    }
    return { at, protocol: this.protocol, stack, stackMemo, marks: this.marks.slice(), memoNext: this.memoNext, memo }
  }

  /** A value in the hand-off's terms; depth -1 for a scalar. */
  private described(value: PickleValue, depth: number, sealed: boolean): HandoffValue {
    if (depth < 0) return { value, kind: HandoffKind.scalar, depth: 0, sealed: false }
    const kind = value instanceof PickleDict ? HandoffKind.dict : this.tuples.has(value as PickleValue[]) ? HandoffKind.tuple : HandoffKind.list
    return { value, kind, depth, sealed }
  }

  /** A point inside device_traces the general lane can go on from, with the memo as it is. */
  private rewind(p: number): void {
    this.rewindAt = p
    this.rewindMemoNext = this.memoNext
  }

  /**
   * The fast lane gave up inside device_traces (past its list's EMPTY_LIST and memo store): the
   * general lane's state at the last rewind point, as handoff() tells it, with what this lane holds
   * apart put back on the stack: device_traces' list, its open MARK, the device lists not yet added
   * to it, the open list's MARK, and DELIVERED for its events already handed to the sink. Null where
   * a memo store after that point filled an index below the highest (undoing it is not worth it).
   */
  private tracesHandoff(): LaneHandoff | FastRestart {
    if (this.holeFilledAt >= this.rewindAt) return { restart: 'memo-hole' }
    const outer = this.tracesList!
    const push = (value: PickleValue, state: number, depth: number, g: number) => {
      if (g >= 0) {
        this.genericDepth[g] = -1
        this.genericSlot[g] = this.stack.length
      }
      this.stack.push(value)
      this.state.push(state)
      this.depths.push(depth)
      this.openMemo.push(-1)
    }
    let outerDepth = 1
    for (let i = 0; i < this.outerStackFrom; i++) outerDepth = Math.max(outerDepth, this.listDepth[i]! + 1)
    push(outer, SLOT_OPEN_LIST, outerDepth, this.tracesG)
    if (this.outerBatch) this.marks.push(this.stack.length)
    if (this.listOpen) this.listEvents[outer.length - 1] = this.listAppended ? this.listDelivered : -1
    // The general lane streams a list's events as it appends them, and keeps counting while it appends to the same list.
    let streamed: LaneHandoff['streamed']
    for (let i = outer.length - 1; i >= 0 && streamed === undefined; i--) {
      if (this.listEvents[i]! >= 0) streamed = { list: outer[i]!, keys: [KEY.deviceTraces, i], count: this.listEvents[i]! }
    }
    const lists = outer.splice(this.outerStackFrom)
    let delivered: DeliveredEvents | undefined
    for (let i = 0; i < lists.length; i++) {
      const at = this.outerStackFrom + i
      const open = this.listOpen && i === lists.length - 1
      push(lists[i]!, SLOT_OPEN_LIST, open ? this.listDeepest + 1 : this.listDepth[at]!, this.listG[at]!)
      if (!open) continue
      if (this.listBatch) this.marks.push(this.stack.length)
      const from = this.stack.length
      const n = this.listBatch ? this.batchDelivered : this.singleDelivered > 0 ? 1 : 0
      const depth = this.listBatch ? this.batchDeepest : this.singleDelivered
      for (let k = 0; k < n; k++) push(DELIVERED, SLOT_OPEN_DICT, depth, -1)
      if (n > 0) delivered = { from, to: from + n, batch: this.listBatch }
    }
    this.memoNext = this.rewindMemoNext
    this.resumeAt = this.rewindAt
    const handoff = this.handoff()
    if ('restart' in handoff) return handoff
    if (delivered !== undefined) handoff.delivered = delivered
    if (streamed !== undefined) handoff.streamed = streamed
    return handoff
  }

  // ---- device_traces: lists of event lists ----

  /**
   * The value of the root's device_traces key, at p: a list of per-device lists, each filled in
   * batches (MARK ... APPENDS) or by one APPEND. Returns the position after it (-1: give up); the
   * list, kept in `generic`, is this.num and its depth this.depth.
   */
  private *deviceTraces(p: number): Generator<number, number> {
    const b = this.b
    p = this.skipFrames(p)
    if (p < 0 || b[p] !== Op.EMPTY_LIST) return -1
    const outer: PickleValue[] = []
    const g = this.addGeneric(outer, -1)
    p = this.putContainer(p + 1, Memo.generic, g)
    if (p < 0) return -1
    this.tracesList = outer
    this.tracesG = g
    this.listG.length = this.listDepth.length = this.listEvents.length = 0
    this.outerBatch = this.listOpen = this.listBatch = false
    this.outerStackFrom = 0
    this.singleDelivered = 0
    let deepest = 0
    for (;;) {
      this.rewind(p)
      p = this.skipFrames(p)
      if (p < 0) return -1
      const op = b[p]
      if (op === Op.MARK) {
        p++
        this.outerBatch = true
        for (;;) {
          this.rewind(p)
          p = this.skipFrames(p)
          if (p < 0) return -1
          if (b[p] === Op.APPENDS) {
            p++
            this.outerBatch = false
            this.outerStackFrom = outer.length
            break
          }
          if (b[p] !== Op.EMPTY_LIST || outer.length >= BATCH_ITEMS) return -1
          p = yield* this.deviceList(p, outer)
          if (p < 0) return -1
          if (this.depth > deepest) deepest = this.depth
        }
      } else if (op === Op.EMPTY_LIST) {
        p = yield* this.deviceList(p, outer)
        if (p < 0) return -1
        if (this.depth > deepest) deepest = this.depth
        this.rewind(p)
        p = this.skipFrames(p)
        if (p < 0 || b[p] !== Op.APPEND) return -1
        p++
        this.outerStackFrom = outer.length
      } else break
    }
    this.genericDepth[g] = this.depth = deepest + 1
    this.num = g
    return p
  }

  /** One device's list at p (EMPTY_LIST), appended to `outer`; its events go to the sink. */
  private *deviceList(p: number, outer: PickleValue[]): Generator<number, number> {
    const b = this.b
    const device = outer.length
    const list: PickleValue[] = []
    const g = this.addGeneric(list, -1)
    p = this.putContainer(p + 1, Memo.generic, g)
    if (p < 0) return -1
    outer.push(list)
    this.listG.push(g)
    this.listDepth.push(1)
    this.listEvents.push(-1)
    this.listOpen = true
    this.listDeepest = 0
    this.listDelivered = 0
    this.listAppended = false
    const wanted = this.sink.wants(device)
    let deepest = 0
    for (;;) {
      this.rewind(p)
      p = this.skipFrames(p)
      if (p < 0) return -1
      const op = b[p]
      if (op === Op.MARK) {
        this.batchItems = 0
        this.batchDeepest = deepest
        p++
        this.listBatch = true
        this.batchDelivered = 0
        for (;;) {
          p = this.batch(p, device, wanted)
          if (p < 0) return -1
          if (this.batchDone) break
          this.nextYield = p + this.yieldBytes
          yield p
        }
        this.listBatch = false
        this.listAppended = true
        this.listDelivered += this.batchDelivered
        deepest = this.listDeepest = this.batchDeepest
      } else if (op === Op.EMPTY_DICT) {
        if (device > MAX_DEVICE) return -1
        p = this.event(p, device, wanted)
        if (p < 0) return -1
        this.singleDelivered = this.depth
        if (this.depth > deepest) deepest = this.depth
        this.rewind(p)
        p = this.skipFrames(p)
        if (p < 0 || b[p] !== Op.APPEND) return -1
        p++
        this.singleDelivered = 0
        this.listAppended = true
        this.listDelivered++
        this.listDeepest = deepest
      } else break
    }
    this.listOpen = false
    this.genericDepth[g] = this.depth = deepest + 1
    this.listDepth[this.listDepth.length - 1] = this.depth
    this.listEvents[this.listEvents.length - 1] = this.listAppended ? this.listDelivered : -1
    return p
  }

  /**
   * The events of a batch (after its MARK) from p up to its APPENDS (then this.batchDone) or to
   * the first past nextYield. The loop is here, not in the generator deviceList: V8 optimizes a
   * generator only once it has been called often, a plain function's loop as it runs.
   */
  private batch(p: number, device: number, wanted: boolean): number {
    const b = this.b
    for (;;) {
      this.rewindAt = p
      this.rewindMemoNext = this.memoNext
      if (b[p] === Op.FRAME) {
        p = this.skipFrames(p)
        if (p < 0) return -1
      }
      if (b[p] === Op.APPENDS) {
        this.batchDone = true
        return p + 1
      }
      if (b[p] !== Op.EMPTY_DICT || ++this.batchItems > BATCH_ITEMS || device > MAX_DEVICE) return -1
      p = this.event(p, device, wanted)
      if (p < 0) return -1
      this.batchDelivered++
      if (this.depth > this.batchDeepest) this.batchDeepest = this.depth
      if (p >= this.nextYield) {
        this.batchDone = false
        return p
      }
    }
  }

  /**
   * One event dict at p (EMPTY_DICT ... SETITEMS), handed to the sink. Returns the position after
   * it, or -1; its nesting depth in this.depth.
   */
  private event(p: number, device: number, wanted: boolean): number {
    const b = this.b
    p = this.putContainer(p + 1, Memo.event, 0)
    if (p < 0) return -1
    if (b[p] === Op.FRAME) p = this.skipFrames(p)
    if (p < 0 || b[p] !== Op.MARK) return -1
    p++
    let action = -1
    let addr = -1
    let deviceFree = -1
    let size = 0
    let stream = 0
    let time = NaN
    let stack = -2 // -2: no frames key (or None); -1: empty list; else a local stack id
    let metadata: string | null = null
    let depth = 1
    for (;;) {
      let op = b[p]!
      if (op === Op.FRAME) {
        p = this.skipFrames(p)
        if (p < 0) return -1
        op = b[p]!
      }
      if (op === Op.SETITEMS) {
        p++
        break
      }
      // The key: a string, new (and stored) or read back.
      p = this.dictKey(p)
      if (p < 0) return -1
      const code = this.keyCode
      // The value.
      if (code === Code.frames) {
        if (b[p] === Op.FRAME) p = this.skipFrames(p)
        if (p < 0) return -1
        op = b[p]!
        if (op === Op.EMPTY_LIST) {
          p = this.framesList(p + 1)
          if (p < 0) return -1
          stack = this.num
          if (this.depth + 1 > depth) depth = this.depth + 1
          continue
        }
        if (op === Op.BINGET || op === Op.LONG_BINGET) {
          const index = op === Op.BINGET ? b[p + 1]! : readUint32(b, p + 1)
          p += op === Op.BINGET ? 2 : 5
          if (index >= this.memoNext) return -1
          const k = this.memoKind[index]
          let d: number
          if (k === Memo.frames) {
            stack = this.memoId[index]!
            d = stack < 0 ? 1 : 2
          } else if (k === Memo.generic) {
            // A list the generic part built (torch shares one empty frames list from the segments on).
            const g = this.memoId[index]!
            const known = this.genericAsStack[g]!
            if (known > 0) stack = known - 2
            else {
              stack = this.genericStack(this.generic[g]!)
              if (stack === -2) return -1
              this.genericAsStack[g] = stack + 2
            }
            d = this.genericDepth[g]!
            if (d < 0) return -1
          } else return -1
          if (d + 1 > depth) depth = d + 1
          continue
        }
        if (op === Op.NONE) {
          // putScalar stores what this.kind says: without this, a memoized None was stored as the scalar read before it.
          this.kind = Scalar.nil
          p = this.putScalar(p + 1)
          if (p < 0) return -1
          stack = -2
          continue
        }
        return -1
      }
      // The hot opcodes inline, the rest (and FRAME) through scalar().
      let kind: number
      let value: number
      op = b[p]!
      switch (op) {
        case Op.BINGET:
        case Op.LONG_BINGET: {
          const index = op === Op.BINGET ? b[p + 1]! : readUint32(b, p + 1)
          p += op === Op.BINGET ? 2 : 5
          if (index >= this.memoNext) return -1
          const k = this.memoKind[index]
          if (k === Memo.string) {
            kind = Scalar.string
            value = this.memoId[index]!
          } else if (k === Memo.number) {
            value = this.numbers[this.memoId[index]!]!
            kind = Number.isSafeInteger(value) ? Scalar.int : Scalar.float
          } else if (k === Memo.lazyString) {
            kind = Scalar.string
            value = this.resolveLazy(index)
          } else return -1
          break
        }
        case Op.BININT1:
          kind = Scalar.int
          value = b[p + 1]!
          p += 2
          break
        case Op.BININT2:
          kind = Scalar.int
          value = b[p + 1]! | (b[p + 2]! << 8)
          p += 3
          break
        case Op.BININT:
          kind = Scalar.int
          value = b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)
          p += 5
          break
        case Op.LONG1: {
          const n = b[p + 1]!
          if (n > 8 || p + 2 + n > this.end) return -1
          // Addresses and times: 6 and 7 bytes, non-negative (and below 2^53: a 7th byte below 0x20),
          // read as a 29-bit and a 24-bit integer.
          if ((n === 6 && b[p + 7]! < 0x80) || (n === 7 && b[p + 8]! < 0x20)) {
            value =
              (b[p + 5]! | (b[p + 6]! << 8) | (b[p + 7]! << 16) | (n === 7 ? b[p + 8]! << 24 : 0)) * 16777216 +
              (b[p + 2]! | (b[p + 3]! << 8) | (b[p + 4]! << 16))
          } else {
            value = smallLong(b, p + 2, n)
            if (value !== value) return -1
          }
          kind = Scalar.int
          p += 2 + n
          break
        }
        case Op.SHORT_BINUNICODE: {
          const n = b[p + 1]!
          if (p + 2 + n > this.end) return -1
          if ((code === Code.other || code > Code.userMetadata) && b[p + 2 + n] === Op.MEMOIZE && this.memoNext < this.memoKind.length) {
            // A string the event does not use: stored unread (decoding never fails: bad UTF-8 is replaced).
            const index = this.memoNext++
            this.memoKind[index] = Memo.lazyString
            this.memoId[index] = p
            this.memoKeyCode[index] = 0
            p += 3 + n
            continue
          }
          kind = Scalar.string
          value = this.internBytes(p + 2, n)
          p += 2 + n
          break
        }
        default:
          p = this.scalar(p)
          if (p < 0) return -1
          kind = this.kind
          value = this.num
      }
      op = b[p]!
      if (op === Op.MEMOIZE || op === Op.BINPUT || op === Op.LONG_BINPUT) {
        this.kind = kind
        this.num = value
        p = this.putScalar(p)
        if (p < 0) return -1
      }
      switch (code) {
        case Code.action:
          if (kind !== Scalar.string) return -1
          action = value
          break
        case Code.addr:
          if (kind !== Scalar.int || value < 0) return -1
          addr = value
          break
        case Code.size:
          // Past the largest block a trace stores (a segment may be larger): the general lane says where.
          if (kind !== Scalar.int || value < 0 || value > MAX_BLOCK) return -1
          size = value
          break
        case Code.deviceFree:
          if (kind !== Scalar.int || value < 0) return -1
          deviceFree = value
          break
        case Code.stream:
          // A negative stream is one the trace cannot store: the general lane says where.
          if (kind === Scalar.int && value >= 0) stream = value
          else if (kind === Scalar.nil) stream = 0
          else return -1
          break
        case Code.timeUs:
          // A float time must be finite; an int always is.
          if (kind === Scalar.int || (kind === Scalar.float && value - value === 0)) time = value
          else return -1
          break
        case Code.userMetadata:
          metadata = kind === Scalar.string ? this.strings[value]! : null
          break
        default:
        // compile_context, and whatever a newer torch adds: any scalar is skipped.
      }
    }
    if (action < 0) return -1
    const actionName = this.strings[action]!
    const actionCode = this.codes[action]!
    // An oom gives device_free where other events give addr (an older PyTorch wrote it as addr):
    // it goes to the sink as addr, -1 when the entry has neither.
    if (actionCode === Code.oom) {
      if (deviceFree >= 0) addr = deviceFree
    } else if (addr < 0) return -1
    this.depth = depth
    let globalStack = -1
    if (wanted && (actionCode === Code.alloc || actionCode === Code.oom) && stack >= 0) globalStack = this.globalStack(stack)
    this.sink.decodedEvent(device, actionName, addr, size, stream, time, globalStack, metadata)
    return p
  }

  /**
   * A frames list after its EMPTY_LIST: frame dicts, new or read back, in batches or one APPEND.
   * Returns the position after it; this.num is its local stack id (-1 when empty), this.depth its depth.
   */
  private framesList(p: number): number {
    const b = this.b
    // Reserved now, its stack known at the end.
    const memoIndex = this.reserveAt(p)
    if (memoIndex === -2) return -1
    if (memoIndex >= 0) p += putLength(b[p]!)
    let n = 0
    let deepest = 0
    for (;;) {
      p = this.skipFrames(p)
      if (p < 0) return -1
      const op = b[p]!
      let single = false
      if (op === Op.MARK) p++
      else if (op === Op.EMPTY_DICT) single = true
      else if ((op === Op.BINGET || op === Op.LONG_BINGET) && b[p + (op === Op.BINGET ? 2 : 5)] === Op.APPEND) single = true
      else break
      for (;;) {
        p = this.skipFrames(p)
        if (p < 0) return -1
        const item = b[p]!
        if (!single && item === Op.APPENDS) {
          p++
          break
        }
        let frame: number
        if (item === Op.EMPTY_DICT) {
          p = this.frameDict(p + 1)
          if (p < 0) return -1
          frame = this.num
          if (this.depth > deepest) deepest = this.depth
        } else if (item === Op.BINGET || item === Op.LONG_BINGET) {
          const index = item === Op.BINGET ? b[p + 1]! : readUint32(b, p + 1)
          p += item === Op.BINGET ? 2 : 5
          if (index >= this.memoNext) return -1
          const k = this.memoKind[index]
          if (k === Memo.frame) frame = this.memoId[index]!
          else if (k === Memo.generic) {
            const g = this.memoId[index]!
            const known = this.genericAsFrame[g]!
            if (known > 0) frame = known - 2
            else {
              frame = this.genericFrame(this.generic[g]!)
              if (frame < 0) return -1
              this.genericAsFrame[g] = frame + 2
            }
            if (this.genericDepth[g]! > deepest) deepest = this.genericDepth[g]!
          } else return -1
          if (deepest < 1) deepest = 1
        } else return -1
        if (n === this.scratch.length) {
          if (n >= BATCH_ITEMS) return -1
          this.scratch = grownInt32(this.scratch, n * 2)
        }
        this.scratch[n++] = frame
        if (single) {
          p = this.skipFrames(p)
          if (p < 0 || b[p] !== Op.APPEND) return -1
          p++
          break
        }
      }
    }
    const local = n === 0 ? -1 : this.internLocalStack(n)
    if (memoIndex >= 0) this.setMemo(memoIndex, Memo.frames, local)
    this.num = local
    this.depth = deepest + 1
    return p
  }

  /**
   * A dict key at p: a string, new (and stored) or read back from the memo. Its code goes to
   * this.keyCode; returns the position after it, or -1 for anything but a known string key.
   */
  private dictKey(p: number): number {
    const b = this.b
    const op = b[p]!
    if (op === Op.BINGET || op === Op.LONG_BINGET) {
      const index = op === Op.BINGET ? b[p + 1]! : readUint32(b, p + 1)
      // 0 for anything but a string, past memoNext and past the end (undefined) alike.
      let known = this.memoKeyCode[index]!
      if (!(known > 0)) {
        if (index >= this.memoNext || this.memoKind[index] !== Memo.lazyString) return -1
        this.resolveLazy(index)
        known = this.memoKeyCode[index]!
      }
      this.keyCode = known - 1
      return p + (op === Op.BINGET ? 2 : 5)
    }
    p = this.scalar(p)
    if (p < 0 || this.kind !== Scalar.string) return -1
    this.keyCode = this.codes[this.num]!
    return this.putScalar(p)
  }

  /** A frame dict after its EMPTY_DICT: name, filename and line. this.num is its frame id. */
  private frameDict(p: number): number {
    const b = this.b
    const memoIndex = this.reserveAt(p)
    if (memoIndex === -2) return -1
    if (memoIndex >= 0) p += putLength(b[p]!)
    p = this.skipFrames(p)
    if (p < 0 || b[p] !== Op.MARK) return -1
    p++
    let name = -1
    let file = -1
    let line = NaN
    for (;;) {
      p = this.skipFrames(p)
      if (p < 0) return -1
      const op = b[p]!
      if (op === Op.SETITEMS) {
        p++
        break
      }
      p = this.dictKey(p)
      if (p < 0) return -1
      const code = this.keyCode
      p = this.scalar(p)
      if (p < 0) return -1
      const kind = this.kind
      const value = this.num
      p = this.putScalar(p)
      if (p < 0) return -1
      if (code === Code.name) name = kind === Scalar.string ? value : -1
      else if (code === Code.filename) file = kind === Scalar.string ? value : -1
      else if (code === Code.line) line = kind === Scalar.int || kind === Scalar.float ? value : NaN
    }
    // The general lane refuses a frame without a string name and filename and a number line (NaN is a number, but never a line).
    if (name < 0 || file < 0 || line !== line) return -1
    const frame = this.internFrame(name, file, line)
    if (memoIndex >= 0) this.setMemo(memoIndex, Memo.frame, frame)
    this.num = frame
    this.depth = 1
    return p
  }

  /** Frame id of a frame dict the generic part built (a segment's block), or -1 if it is not a plain frame. */
  private genericFrame(value: PickleValue): number {
    if (!(value instanceof PickleDict)) return -1
    const known = this.genericFrames.get(value)
    if (known !== undefined) return known
    const name = value.get(KEY.name)
    const filename = value.get(KEY.filename)
    const line = value.get(KEY.line)
    if (typeof name !== 'string' || typeof filename !== 'string' || typeof line !== 'number' || line !== line) return -1
    const frame = this.internFrame(this.internString(name), this.internString(filename), line)
    this.genericFrames.set(value, frame)
    return frame
  }

  /** Local stack id of a frames list the generic part built (-1 when empty), or -2 if it is not one. */
  private genericStack(value: PickleValue): number {
    if (!Array.isArray(value)) return -2
    if (value.length === 0) return -1
    const known = this.genericStacks.get(value)
    if (known !== undefined) return known
    if (this.scratch.length < value.length) this.scratch = new Int32Array(value.length)
    for (let i = 0; i < value.length; i++) {
      const frame = this.genericFrame(value[i]!)
      if (frame < 0) return -2
      this.scratch[i] = frame
    }
    const local = this.internLocalStack(value.length)
    this.genericStacks.set(value, local)
    return local
  }

  /** The mapper's stack id of a local stack, its frames given the mapper's ids first (as the general lane does on first use). */
  private globalStack(local: number): number {
    const known = this.stackGlobal[local]!
    if (known >= 0) return known
    const start = this.stackStart[local]!
    const n = this.stackLength[local]!
    if (this.globalScratch.length < n) this.globalScratch = new Uint32Array(n)
    for (let i = 0; i < n; i++) {
      const f = this.stackFrames[start + i]!
      let id = this.frameGlobal[f]!
      if (id < 0) {
        id = this.sink.frameId(this.strings[this.frameName[f]!]!, this.strings[this.frameFile[f]!]!, this.frameLine[f]!)
        this.frameGlobal[f] = id
      }
      this.globalScratch[i] = id
    }
    const id = this.sink.internStack(this.globalScratch, n)
    this.stackGlobal[local] = id
    return id
  }

  // ---- scalars and the memo ----

  /**
   * The scalar whose opcode is at p: sets this.kind and this.num (string id, number, 1/0 for a
   * bool). Returns the position after it, or -1 for anything else (an int beyond 2^53 included).
   * A number read back is an int when it is a safe integer, as the general lane's checks see it.
   */
  private scalar(p: number): number {
    const b = this.b
    if (p >= this.end) return -1
    const op = b[p]!
    switch (op) {
      case Op.BINGET:
      case Op.LONG_BINGET: {
        const index = op === Op.BINGET ? b[p + 1]! : readUint32(b, p + 1)
        if (index >= this.memoNext) return -1
        const k = this.memoKind[index]
        if (k === Memo.string || k === Memo.lazyString) {
          this.kind = Scalar.string
          this.num = k === Memo.string ? this.memoId[index]! : this.resolveLazy(index)
        } else if (k === Memo.number) {
          const v = this.numbers[this.memoId[index]!]!
          this.kind = Number.isSafeInteger(v) ? Scalar.int : Scalar.float
          this.num = v
        } else return -1
        return p + (op === Op.BINGET ? 2 : 5)
      }
      case Op.SHORT_BINUNICODE: {
        const n = b[p + 1]!
        if (p + 2 + n > this.end) return -1
        this.kind = Scalar.string
        this.num = this.internBytes(p + 2, n)
        return p + 2 + n
      }
      case Op.BINUNICODE:
      case Op.BINUNICODE8: {
        const width = op === Op.BINUNICODE ? 4 : 8
        if (p + 1 + width > this.end) return -1
        const n = width === 4 ? readUint32(b, p + 1) : readUint32(b, p + 5) * 4294967296 + readUint32(b, p + 1)
        if (n > this.end - p - 1 - width) return -1
        this.kind = Scalar.string
        this.num = this.internBytes(p + 1 + width, n)
        return p + 1 + width + n
      }
      case Op.BININT1:
        this.kind = Scalar.int
        this.num = b[p + 1]!
        return p + 2
      case Op.BININT2:
        this.kind = Scalar.int
        this.num = b[p + 1]! | (b[p + 2]! << 8)
        return p + 3
      case Op.BININT:
        this.kind = Scalar.int
        this.num = b[p + 1]! | (b[p + 2]! << 8) | (b[p + 3]! << 16) | (b[p + 4]! << 24)
        return p + 5
      case Op.LONG1: {
        const n = b[p + 1]!
        if (n > 8 || p + 2 + n > this.end) return -1
        const v = smallLong(b, p + 2, n)
        if (v !== v) return -1
        this.kind = Scalar.int
        this.num = v
        return p + 2 + n
      }
      case Op.BINFLOAT:
        for (let i = 0; i < 8; i++) float64Bytes[7 - i] = b[p + 1 + i]!
        this.kind = Scalar.float
        this.num = float64[0]!
        return p + 9
      case Op.NONE:
        this.kind = Scalar.nil
        return p + 1
      case Op.NEWTRUE:
      case Op.NEWFALSE:
        this.kind = Scalar.bool
        this.num = op === Op.NEWTRUE ? 1 : 0
        return p + 1
      case Op.FRAME: {
        const q = this.skipFrames(p)
        return q < 0 || this.b[q] === Op.FRAME ? -1 : this.scalar(q)
      }
      default:
        return -1
    }
  }

  /** A memo store of the scalar just read (by scalar()), if one follows at p. */
  private putScalar(p: number): number {
    const op = this.b[p]
    if (op === Op.MEMOIZE) {
      // The common case, inline: the next index, never stored before.
      const index = this.memoNext
      if (index < this.memoKind.length) {
        const kind = this.kind
        if (kind === Scalar.string) {
          this.memoKind[index] = Memo.string
          this.memoId[index] = this.num
          this.memoKeyCode[index] = this.codes[this.num]! + 1
          this.memoNext = index + 1
          return p + 1
        }
        if (kind === Scalar.int || kind === Scalar.float) {
          this.memoKind[index] = Memo.number
          this.memoId[index] = this.addNumber(this.num)
          this.memoNext = index + 1
          return p + 1
        }
      }
    } else if (op !== Op.BINPUT && op !== Op.LONG_BINPUT) return p
    const index = this.reserveAt(p)
    if (index === -1) return p
    if (index === -2) return -1
    const kind = this.kind
    if (kind === Scalar.string) this.setMemo(index, Memo.string, this.num)
    else if (kind === Scalar.int || kind === Scalar.float) this.setMemo(index, Memo.number, this.num)
    else this.setMemo(index, Memo.generic, this.addGeneric(kind === Scalar.nil ? null : this.num === 1, 0))
    return p + putLength(this.b[p]!)
  }

  /** A memo store of a container just opened, if one follows at p: its entry says what it is. */
  private putContainer(p: number, kind: Memo, num: number): number {
    if (this.b[p] === Op.MEMOIZE && this.memoNext < this.memoKind.length) {
      const index = this.memoNext++
      this.memoKind[index] = kind
      this.memoId[index] = num
      return p + 1
    }
    const index = this.reserveAt(p)
    if (index === -1) return p
    if (index === -2) return -1
    this.setMemo(index, kind, num)
    return p + putLength(this.b[p]!)
  }

  /**
   * The memo index stored by the opcode at p, reserved (an entry that gives up when read back, so a
   * container read back from within itself does), -1 if it is not a memo store, -2 if it is one this
   * decoder will not follow.
   */
  private reserveAt(p: number): number {
    const op = this.b[p]
    if (op !== Op.MEMOIZE && op !== Op.BINPUT && op !== Op.LONG_BINPUT) return -1
    const index = this.putIndex(op, p)
    if (index < 0) return -2
    this.setMemo(index, Memo.event, 0)
    return index
  }

  /**
   * The memo index the store at `start` writes; -1 where the general lane would refuse it (an index
   * larger than the bytes before it) or where a pickler would not write it (an index stored before:
   * a rebinding; a jump far past the highest index).
   */
  private putIndex(op: number, start: number): number {
    let index: number
    if (op === Op.MEMOIZE) index = this.memoNext
    else {
      const width = op === Op.BINPUT ? 1 : 4
      if (start + 1 + width > this.end) return -1
      index = width === 1 ? this.b[start + 1]! : readUint32(this.b, start + 1)
      if (index > start || index > this.memoNext + MEMO_JUMP) return -1
    }
    if (index >= this.memoKind.length) {
      let size = this.memoKind.length * 2
      while (size <= index) size *= 2
      const kinds = new Uint8Array(size)
      kinds.set(this.memoKind)
      this.memoKind = kinds
      const keyCodes = new Uint8Array(size)
      keyCodes.set(this.memoKeyCode)
      this.memoKeyCode = keyCodes
      const ids = new Int32Array(size)
      ids.set(this.memoId)
      this.memoId = ids
    }
    if (index < this.memoNext) {
      if (this.memoKind[index] !== Memo.unset) return -1
      this.holeFilledAt = start
    }
    return index
  }

  /** Interns a Memo.lazyString entry's string, which the entry then holds (Memo.string); returns its id. */
  private resolveLazy(index: number): number {
    const at = this.memoId[index]!
    const id = this.internBytes(at + 2, this.b[at + 1]!)
    this.memoKind[index] = Memo.string
    this.memoId[index] = id
    this.memoKeyCode[index] = this.codes[id]! + 1
    return id
  }

  private setMemo(index: number, kind: Memo, num: number): void {
    this.memoKind[index] = kind
    this.memoKeyCode[index] = kind === Memo.string ? this.codes[num]! + 1 : 0
    this.memoId[index] = kind === Memo.number ? this.addNumber(num) : num
    if (index >= this.memoNext) this.memoNext = index + 1
  }

  private addNumber(value: number): number {
    const i = this.numberCount++
    if (i === this.numbers.length) {
      const grown = new Float64Array(i * 2)
      grown.set(this.numbers)
      this.numbers = grown
    }
    this.numbers[i] = value
    return i
  }

  /** Skips FRAME opcodes at p (each checked as the general lane checks it). */
  private skipFrames(p: number): number {
    const b = this.b
    while (b[p] === Op.FRAME) {
      if (p + 9 > this.end) return -1
      const n = readUint32(b, p + 5) * 4294967296 + readUint32(b, p + 1)
      if (n > this.end - p - 9) return -1
      p += 9
    }
    return p
  }

  // ---- interning ----

  private internString(s: string): number {
    let id = this.stringIds.get(s)
    if (id === undefined) {
      id = this.strings.length
      const code = CODES.get(s) ?? Code.other
      this.strings.push(code === Code.other ? s : NAMES[code]!)
      this.stringIds.set(s, id)
      if (id === this.codes.length) this.codes = grownInt32(this.codes, id * 2)
      this.codes[id] = code
    }
    return id
  }

  /** The id of the string whose UTF-8 bytes are b[at, at + n): looked up by its bytes, decoded only the first time. */
  private internBytes(at: number, n: number): number {
    const b = this.b
    let hash = n
    for (let i = at; i < at + n; i++) hash = Math.imul(hash ^ b[i]!, 0x9e3779b1)
    hash ^= hash >>> 15
    const mask = this.byteSlots.length - 1
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const e = this.byteSlots[slot]!
      if (e < 0) {
        const id = this.internString(decodeUtf8(b, at, n))
        this.addByteEntry(slot, at, n, id)
        return id
      }
      if (this.byteLength[e] === n) {
        const other = this.byteAt[e]!
        let i = 0
        while (i < n && b[other + i] === b[at + i]) i++
        if (i === n) return this.byteIds[e]!
      }
    }
  }

  private addByteEntry(slot: number, at: number, n: number, id: number): void {
    const e = this.byteCount++
    if (e === this.byteAt.length) {
      this.byteAt = grownInt32(this.byteAt, e * 2)
      this.byteLength = grownInt32(this.byteLength, e * 2)
      this.byteIds = grownInt32(this.byteIds, e * 2)
    }
    this.byteAt[e] = at
    this.byteLength[e] = n
    this.byteIds[e] = id
    this.byteSlots[slot] = e
    if (2 * this.byteCount > this.byteSlots.length) {
      // Rehash into twice the slots.
      const slots = new Int32Array(this.byteSlots.length * 2).fill(-1)
      const mask = slots.length - 1
      for (let k = 0; k < this.byteCount; k++) {
        let hash = this.byteLength[k]!
        const from = this.byteAt[k]!
        for (let i = from; i < from + this.byteLength[k]!; i++) hash = Math.imul(hash ^ this.b[i]!, 0x9e3779b1)
        hash ^= hash >>> 15
        let s = hash & mask
        while (slots[s]! >= 0) s = (s + 1) & mask
        slots[s] = k
      }
      this.byteSlots = slots
    }
  }

  private internFrame(name: number, file: number, line: number): number {
    let hash = Math.imul(name, 0x9e3779b1) ^ Math.imul(file, 0x85ebca6b) ^ (line | 0) ^ Math.imul((line / 4294967296) | 0, 0xc2b2ae35)
    hash ^= hash >>> 15
    let mask = this.frameSlots.length - 1
    let slot = hash & mask
    for (; ; slot = (slot + 1) & mask) {
      const f = this.frameSlots[slot]!
      if (f < 0) break
      if (this.frameName[f] === name && this.frameFile[f] === file && Object.is(this.frameLine[f], line)) return f
    }
    const f = this.frameCount++
    if (f === this.frameName.length) {
      this.frameName = grownInt32(this.frameName, f * 2)
      this.frameFile = grownInt32(this.frameFile, f * 2)
      const lines = new Float64Array(f * 2)
      lines.set(this.frameLine)
      this.frameLine = lines
      this.frameGlobal = grownInt32(this.frameGlobal, f * 2)
    }
    this.frameName[f] = name
    this.frameFile[f] = file
    this.frameLine[f] = line
    this.frameGlobal[f] = -1
    this.frameSlots[slot] = f
    if (2 * this.frameCount > this.frameSlots.length) {
      const slots = new Int32Array(this.frameSlots.length * 2).fill(-1)
      mask = slots.length - 1
      for (let k = 0; k < this.frameCount; k++) {
        const l = this.frameLine[k]!
        let h = Math.imul(this.frameName[k]!, 0x9e3779b1) ^ Math.imul(this.frameFile[k]!, 0x85ebca6b) ^ (l | 0) ^ Math.imul((l / 4294967296) | 0, 0xc2b2ae35)
        h ^= h >>> 15
        let s = h & mask
        while (slots[s]! >= 0) s = (s + 1) & mask
        slots[s] = k
      }
      this.frameSlots = slots
    }
    return f
  }

  /** The local stack id of the frames scratch[0, n). */
  private internLocalStack(n: number): number {
    const scratch = this.scratch
    let hash = n
    for (let i = 0; i < n; i++) hash = Math.imul(hash ^ scratch[i]!, 0x9e3779b1)
    hash ^= hash >>> 15
    let mask = this.stackSlots.length - 1
    let slot = hash & mask
    for (; ; slot = (slot + 1) & mask) {
      const s = this.stackSlots[slot]!
      if (s < 0) break
      if (this.stackLength[s] === n) {
        const start = this.stackStart[s]!
        let i = 0
        while (i < n && this.stackFrames[start + i] === scratch[i]) i++
        if (i === n) return s
      }
    }
    const s = this.stackCount++
    if (s === this.stackStart.length) {
      this.stackStart = grownInt32(this.stackStart, s * 2)
      this.stackLength = grownInt32(this.stackLength, s * 2)
      this.stackGlobal = grownInt32(this.stackGlobal, s * 2)
    }
    if (this.stackFramesUsed + n > this.stackFrames.length)
      this.stackFrames = grownInt32(this.stackFrames, Math.max(this.stackFrames.length * 2, this.stackFramesUsed + n))
    this.stackFrames.set(scratch.subarray(0, n), this.stackFramesUsed)
    this.stackStart[s] = this.stackFramesUsed
    this.stackLength[s] = n
    this.stackGlobal[s] = -1
    this.stackFramesUsed += n
    this.stackSlots[slot] = s
    if (2 * this.stackCount > this.stackSlots.length) {
      const slots = new Int32Array(this.stackSlots.length * 2).fill(-1)
      mask = slots.length - 1
      for (let k = 0; k < this.stackCount; k++) {
        const start = this.stackStart[k]!
        const len = this.stackLength[k]!
        let h = len
        for (let i = 0; i < len; i++) h = Math.imul(h ^ this.stackFrames[start + i]!, 0x9e3779b1)
        h ^= h >>> 15
        let q = h & mask
        while (slots[q]! >= 0) q = (q + 1) & mask
        slots[q] = k
      }
      this.stackSlots = slots
    }
    return s
  }
}

/** Typed arrays carved in turn from one ArrayBuffer of the bytes they take together. */
class Tables {
  private readonly buffer: ArrayBuffer
  private at = 0
  constructor(bytes: number) {
    this.buffer = new ArrayBuffer(bytes)
  }
  float64(n: number): Float64Array {
    const a = new Float64Array(this.buffer, this.at, n)
    this.at += 8 * n
    return a
  }
  int32(n: number): Int32Array {
    const a = new Int32Array(this.buffer, this.at, n)
    this.at += 4 * n
    return a
  }
  uint32(n: number): Uint32Array {
    const a = new Uint32Array(this.buffer, this.at, n)
    this.at += 4 * n
    return a
  }
  uint8(n: number): Uint8Array {
    const a = new Uint8Array(this.buffer, this.at, n)
    this.at += n
    return a
  }
}

// Slot states of the generic part's stack.
const SLOT_OPEN_LIST = 1
const SLOT_OPEN_DICT = 2
const SLOT_SEALED = 3

/** Cuts the generic part's four parallel stacks to `length` (popping: setting .length is a runtime call). */
function truncate(stack: PickleValue[], state: number[], depths: number[], openMemo: number[], length: number): void {
  while (stack.length > length) {
    stack.pop()
    state.pop()
    depths.pop()
    openMemo.pop()
  }
}

/** Bytes of a memo store opcode with its argument. */
function putLength(op: number): number {
  return op === Op.MEMOIZE ? 1 : op === Op.BINPUT ? 2 : 5
}

/**
 * LONG1's n (at most 8) little-endian two's complement bytes as decodeLong reads them, NaN where
 * that gives a bigint (beyond 2^53).
 */
function smallLong(b: Uint8Array, at: number, n: number): number {
  if (n <= 4) {
    if (n === 0) return 0
    let v = 0
    for (let i = n - 1; i >= 0; i--) v = (v << 8) | b[at + i]!
    const unused = 32 - 8 * n
    return unused === 0 ? v : (v << unused) >> unused
  }
  // In 32-bit integers (no float per byte): the high word sign-extended from its n - 4 bytes.
  let hi = b[at + 4]!
  if (n > 5) hi |= b[at + 5]! << 8
  if (n > 6) hi |= b[at + 6]! << 16
  if (n > 7) hi |= b[at + 7]! << 24
  const unused = 64 - 8 * n
  hi = (hi << unused) >> unused
  const lo = readUint32(b, at)
  // |hi * 2^32 + lo| <= 2^53 - 1 exactly when these hold.
  if (hi >= 0x200000 || hi < -0x200000 || (hi === -0x200000 && lo === 0)) return NaN
  return hi * 4294967296 + lo
}

function grownInt32(a: Int32Array, size: number): Int32Array<ArrayBuffer> {
  const grown = new Int32Array(size)
  grown.set(a)
  return grown
}
