// SnapshotMapper: turns a PyTorch memory snapshot's events into request and layout columns as
// they arrive (from either lane of the pickle reader, or from a parsed JSON document), then, given
// the rest of the snapshot, finishes the import (finish.ts holds the merge and the layout result).
//
// device_traces[d] (the allocator's ring buffer of events on device d) becomes request events:
//   alloc          -> alloc, with a dense id per live address, frames -> stack, stream -> streams
//   free_requested -> free of that id, at its free_completed (when the block went back to the pool:
//                     later for a block used on other streams; never, if it had not by the end)
//   free_completed of a live block with no free_requested -> free (as memory_viz reads it)
//   oom            -> oom (size, stream, stack; its device_free, which it carries instead of addr,
//                     in the property pytorch.oom.device_free)
//   snapshot -> a marker;  external_annotations -> markers, by time
// and layout events (native trace_op codes, LayoutTrace columns):
//   alloc -> alloc (size: PyTorch's 512-byte rounding of the request, which the trace does not
//   record); free_requested + free_completed at once -> free; apart -> free_pending ... then
//   free_completed; segment_alloc/free -> region_reserve/release and segment_map/unmap -> map/unmap
//   (expandable segments: reserved bytes are the mapped bytes), aux of reservations and mappings
//   from the segment_type of the segment listed at the end (1 small pool, 2 large, 0 unknown: freed
//   before the end); oom -> failure. Private pools (segment_pool_id): pools.ts.
// Times: time_us -> nanoseconds since the earliest event imported.
//
// A ring buffer that overflowed lost its oldest events: frees of blocks it never saw allocated,
// releases of segments it never saw reserved, and blocks or segments live in `segments` (taken at
// the end) that it never saw created. Each gets a synthesized alloc or reservation at t = 0, and
// meta.warnings says how many.
import { basename } from 'node:path'

import { plural } from '../../../../src-shared/compare.ts'
import { CHUNK_ROWS, EventChunks, LayoutChunks, YIELD_CHUNKS, toNanoseconds } from '../../trace/events-builder.ts'
import { LayoutOp, allocateLayout, type LayoutTrace } from '../../../../src-shared/layout.ts'
import { EventKind, allocateEvents, copyEventRow, type Frame, type RequestTrace, type TraceEvents } from '../../trace/model.ts'
import type { StrategyResult } from '../../../../src-shared/results.ts'
import { mergeRuns, poolOf, recordedResult, type Merge } from './finish.ts'
import { MAX_BLOCK, type DecodedEventSink } from './pickle-fast-lane.ts'
import { PickleDict, dictPairs, type PickleValue } from './pickle-vm.ts'
import { SegmentOp, poolName, segmentPools, sortPoolNames, type ListedSegment, type SegmentLog } from './pools.ts'
import { SnapshotImportError, type SnapshotErrorCode } from './snapshot-error.ts'
import { ACTION, BLOCK_STATE, KEY } from './snapshot-keys.ts'
import { DEFAULT_SIZE_POLICY, roundSize } from '../../pytorch-size-policy.ts'
import { ExpansionBudget, describe, entries, field, isDict, plainSettingsOf, type Dict } from './snapshot-values.ts'
import { STAND_IN_EVENTS, STAND_IN_ROWS, type OverflowCounts, type PytorchImport, type PytorchImportOptions } from './types.ts'

/** The request trace's device column is 16 bits. */
const MAX_DEVICE = 65535
/**
 * Most devices with events, by default: PyTorch numbers devices in 8 bits (c10::DeviceIndex), so no
 * snapshot it writes has more than 128; each device costs its own columns and tables.
 * VRAMSCOPE_MAX_DEVICES raises it, up to MAX_DEVICE + 1.
 */
const DEFAULT_MAX_DEVICES = 1024
const MAX_DEVICES_ENV = 'VRAMSCOPE_MAX_DEVICES'

function maxDevices(): number {
  const given = Number(process.env[MAX_DEVICES_ENV] ?? NaN)
  return Number.isSafeInteger(given) && given > 0 ? Math.min(given, MAX_DEVICE + 1) : DEFAULT_MAX_DEVICES
}
/** First chunk of the columns of every device after the first: a few rows, doubling as they fill. */
const LATER_DEVICE_ROWS = 4
/** Actions whose size is a block's request (rounded to 512 B in the layout: roundedSize). */
const BLOCK_ACTIONS = new Set<string>([ACTION.alloc, ACTION.freeRequested, ACTION.free, ACTION.freeCompleted])

/**
 * Device address -> id: open addressing with linear probing over typed arrays. Addresses are
 * doubles above 2^32, which a Map boxes and hashes slowly; the live set of a trace is small and
 * changes with every alloc and free.
 */
class AddressTable {
  // Small at first: a snapshot may list many devices with a few events each.
  private keys = new Float64Array(8)
  private values = new Int32Array(8).fill(-1)
  private mask = 7
  size = 0

  private slot(address: number): number {
    const hash = Math.imul((address >>> 0) ^ Math.imul(Math.floor(address / 4294967296), 0x9e3779b1), 0x85ebca6b)
    return (hash ^ (hash >>> 15)) & this.mask
  }

  /** The id at `address`, or -1. */
  get(address: number): number {
    for (let i = this.slot(address); ; i = (i + 1) & this.mask) {
      const v = this.values[i]!
      if (v < 0 || this.keys[i] === address) return v
    }
  }

  set(address: number, id: number): void {
    if (2 * (this.size + 1) > this.values.length) this.grow()
    let i = this.slot(address)
    while (this.values[i]! >= 0 && this.keys[i] !== address) i = (i + 1) & this.mask
    if (this.values[i]! < 0) this.size++
    this.keys[i] = address
    this.values[i] = id
  }

  delete(address: number): void {
    let i = this.slot(address)
    while (this.values[i]! >= 0 && this.keys[i] !== address) i = (i + 1) & this.mask
    if (this.values[i]! < 0) return
    this.size--
    // Backward-shift deletion: move later entries of the probe run into the hole.
    for (let j = (i + 1) & this.mask; this.values[j]! >= 0; j = (j + 1) & this.mask) {
      const home = this.slot(this.keys[j]!)
      if ((j - home) & this.mask) {
        if (((j - home) & this.mask) >= ((j - i) & this.mask)) {
          this.keys[i] = this.keys[j]!
          this.values[i] = this.values[j]!
          i = j
        }
      }
    }
    this.values[i] = -1
  }

  private grow(): void {
    const keys = this.keys
    const values = this.values
    this.keys = new Float64Array(keys.length * 2)
    this.values = new Int32Array(keys.length * 2).fill(-1)
    this.mask = keys.length * 2 - 1
    this.size = 0
    for (let i = 0; i < keys.length; i++) if (values[i]! >= 0) this.set(keys[i]!, values[i]!)
  }
}

/**
 * Object -> index, for objects a pickle shares (frames lists, frame dicts): a Map emptied when it
 * holds `capacity` entries, so objects the pickle does not share are not all kept alive (a WeakMap
 * of millions of keys costs the garbage collector more than the lookups save).
 */
class IdentityCache {
  private map = new Map<object, number>()
  constructor(private readonly capacity = 1 << 14) {}
  get(key: object): number | undefined {
    return this.map.get(key)
  }
  set(key: object, value: number): void {
    if (this.map.size >= this.capacity) this.map = new Map()
    this.map.set(key, value)
  }
}

/**
 * Where the fields sit in an event dict: found once, then recognised in the next dict by comparing
 * its keys with these by identity (the pickle shares one string object per key), so reading an
 * event costs no lookups.
 */
class EventShape {
  private keys: (PickleValue | undefined)[] = []
  action = -1
  addr = -1
  size = -1
  stream = -1
  time = -1
  frames = -1
  metadata = -1
  deviceFree = -1

  match(pairs: readonly PickleValue[]): void {
    const keys = this.keys
    if (pairs.length === keys.length) {
      let i = 0
      while (i < pairs.length && pairs[i] === keys[i]) i += 2
      if (i >= pairs.length) return
    }
    this.learn(pairs)
  }

  private learn(pairs: readonly PickleValue[]): void {
    this.keys = new Array(pairs.length)
    this.action = this.addr = this.size = this.stream = this.time = this.frames = this.metadata = this.deviceFree = -1
    // A repeated key: the later position wins, as in the dict.
    for (let i = 0; i < pairs.length; i += 2) {
      const key = pairs[i]
      this.keys[i] = key
      if (key === KEY.action) this.action = i + 1
      else if (key === KEY.addr) this.addr = i + 1
      else if (key === KEY.size) this.size = i + 1
      else if (key === KEY.stream) this.stream = i + 1
      else if (key === KEY.timeUs) this.time = i + 1
      else if (key === KEY.frames) this.frames = i + 1
      else if (key === KEY.userMetadata) this.metadata = i + 1
      else if (key === KEY.deviceFree) this.deviceFree = i + 1
    }
  }
}

/** What one device's events turn into while they arrive. */
class DeviceState {
  readonly events: EventChunks
  readonly layout: LayoutChunks
  /** Stand-ins for what the ring buffer lost, placed at t = 0 before everything else (few, if any). */
  readonly synthEvents = new EventChunks(64)
  readonly synthLayout = new LayoutChunks(64)
  /** This device's ids are dense from 0; the merge offsets them after the devices before it. */
  nextId = 0
  requestedById = new Float64Array(8)
  roundedById = new Float64Array(8)
  /** Address of each block (its segment gives its pool: pools.ts). */
  addressById = new Float64Array(8)
  /** segment_alloc/free/map/unmap as pools.ts reads them. */
  readonly segmentLog: SegmentLog = []
  /** Request id of each live block by address. */
  readonly live = new AddressTable()
  /** Blocks whose free was requested and whose free_completed has not come: address -> id. */
  readonly pending = new AddressTable()
  /** Reserved segments: address -> size. */
  readonly segments = new Map<number, number>()
  /** Layout row of each reserved segment's region_reserve (to label its pool at the end). */
  readonly reserveRow = new Map<number, number>()
  /** Addresses of segment_map events (expandable segments). */
  readonly mapped: number[] = []
  /** Address and layout row of each segment_map and segment_unmap, flat (to label their pool at the end). */
  readonly mapRows: number[] = []
  /** device_free of each oom event, in order (-1 where the entry gives none). */
  readonly oomDeviceFree: number[] = []
  /** A free_requested whose layout event waits for the next event: one free, or free_pending. */
  held = -1
  heldAddress = 0
  heldSize = 0
  heldStream = 0
  heldStreamIndex = 0
  heldTime = 0
  /** The request stream of each pending block's free (by id): its free event comes at free_completed. */
  readonly pendingStreamIndex = new Map<number, number>()
  /**
   * Segments released (segment_free / segment_unmap) since the last other event, their bytes, and
   * the first one's time and stream: an empty_cache unless an allocation follows (segment_alloc,
   * segment_map or oom: PyTorch released them to make room for it).
   */
  released = 0
  releasedTime = 0
  releasedStream: unknown = 0
  /** The smallest segment (or page) of the run, and whether a small-pool one (2 MiB) was among them. */
  releasedSmallest = 0
  releasedSmallPool = false
  readonly overflow: OverflowCounts = { orphanEvents: 0, synthesizedAllocs: 0, synthesizedBlocks: 0, synthesizedSegments: 0 }
  nextIndex = 0
  constructor(
    readonly device: number,
    firstRows: number,
  ) {
    this.events = new EventChunks(firstRows)
    this.layout = new LayoutChunks(firstRows, this.events)
  }
}

/**
 * Turns snapshot events into columns as they arrive (from the streaming unpickler or a parsed
 * JSON document), then, given the rest of the snapshot, completes the traces.
 */
export class SnapshotMapper implements DecodedEventSink {
  private readonly states = new Map<number, DeviceState>()
  private readonly wanted: number | 'all' | 'default'
  // Tables shared by every device.
  private readonly streamIndex = new Map<unknown, number>()
  private readonly streams: string[] = []
  private readonly frameByObject = new IdentityCache()
  private readonly frameByText = new Map<string, number>()
  private readonly frames: Frame[] = []
  private readonly stackByObject = new IdentityCache()
  private readonly stacksByHash = new Map<number, number[]>()
  private lastFrames: unknown = null
  private lastStack = -1
  private readonly stacks: Uint32Array[] = []
  private readonly tagIndex = new Map<string, number>()
  private readonly tags: string[] = []
  private readonly markers: string[] = []
  private readonly unknownActions = new Map<string, number>()
  private readonly shape = new EventShape()
  /** Events seen per device, imported or not (which devices the snapshot has). */
  private readonly eventCounts: number[] = []
  private devicesSeen = 0
  private readonly maxDevices = maxDevices()
  /** Allocs at an address already live (only a damaged trace has them); the first block is freed. */
  private reallocations = 0
  private earliest = Infinity
  private missingTimes = 0

  /**
   * First chunk of the first device's columns: a guess from the file's size (torch writes 60 to 90
   * bytes an event). Later devices start small and grow: the guess is the file's whole count of
   * events, so giving it to each of many devices would cost memory the file does not have.
   */
  private readonly firstRows: number
  /** Values the snapshot's generic parts may still expand to. */
  private readonly budget: ExpansionBudget

  constructor(
    private readonly file: string,
    private readonly options: PytorchImportOptions,
    fileBytes = Infinity,
  ) {
    this.firstRows = Math.max(64, Math.min(CHUNK_ROWS, Math.ceil(fileBytes / 90)))
    this.budget = new ExpansionBudget(file, fileBytes, options.maxExpandedValues)
    const d = options.device
    if (d !== undefined && d !== 'all' && !(Number.isInteger(d) && d >= 0 && d < 65536))
      throw new RangeError(`device must be 'all' or an integer from 0 to 65535, got ${String(d)}`)
    this.wanted = d ?? 'default'
  }

  private fail(problem: string, offset?: number, path?: string, code: SnapshotErrorCode = 'not-a-snapshot'): never {
    throw new SnapshotImportError(this.file, code, offset, problem, path)
  }

  private lastState: DeviceState | null = null

  private state(device: number): DeviceState | null {
    if (this.lastState !== null && this.lastState.device === device) return this.lastState
    if (this.wanted !== 'all' && this.wanted !== 'default' && device !== this.wanted) return null
    let s = this.states.get(device)
    if (s === undefined) {
      s = new DeviceState(device, this.states.size === 0 ? this.firstRows : LATER_DEVICE_ROWS)
      this.states.set(device, s)
    }
    this.lastState = s
    return s
  }

  /** One entry of device_traces[device], in order. */
  event(device: number, index: number, item: PickleValue, offset: number | undefined): void {
    if (device > MAX_DEVICE) this.fail(`more than ${MAX_DEVICE + 1} devices`, offset, where(device, index), 'limit')
    if (this.eventCounts[device] === undefined) this.newDevice(offset, where(device, index))
    this.eventCounts[device] = (this.eventCounts[device] ?? 0) + 1
    const s = this.state(device)
    if (s === null) return
    let action: unknown, addrValue: unknown, sizeValue: unknown, streamValue: unknown, time: unknown, frames: unknown, metadata: unknown, deviceFree: unknown
    if (item instanceof PickleDict) {
      const pairs = dictPairs(item)
      const shape = this.shape
      shape.match(pairs)
      action = shape.action < 0 ? undefined : pairs[shape.action]
      addrValue = shape.addr < 0 ? undefined : pairs[shape.addr]
      sizeValue = shape.size < 0 ? undefined : pairs[shape.size]
      streamValue = shape.stream < 0 ? undefined : pairs[shape.stream]
      time = shape.time < 0 ? undefined : pairs[shape.time]
      frames = shape.frames < 0 ? undefined : pairs[shape.frames]
      metadata = shape.metadata < 0 ? undefined : pairs[shape.metadata]
      deviceFree = shape.deviceFree < 0 ? undefined : pairs[shape.deviceFree]
    } else if (isDict(item)) {
      action = field(item, KEY.action)
      addrValue = field(item, KEY.addr)
      sizeValue = field(item, KEY.size)
      streamValue = field(item, KEY.stream)
      time = field(item, KEY.timeUs)
      frames = field(item, KEY.frames)
      metadata = field(item, KEY.userMetadata)
      deviceFree = field(item, KEY.deviceFree)
    } else return this.fail(`an event must be a dict, got ${describe(item)}`, offset, where(device, index))
    if (typeof action !== 'string') this.fail(`'${KEY.action}' must be a string, got ${describe(action)}`, offset, where(device, index))
    // An oom entry carries the device's free bytes (device_free) where other entries have addr
    // (an older PyTorch wrote it as addr); addr of an oom is that value, -1 when it has neither.
    let addrKey: string = KEY.addr
    if (action === ACTION.oom) {
      if (deviceFree !== undefined) {
        addrValue = deviceFree
        addrKey = KEY.deviceFree
      } else addrValue ??= -1
    }
    const addr =
      typeof addrValue === 'number' && Number.isSafeInteger(addrValue) && (addrValue >= 0 || (addrValue === -1 && action === ACTION.oom))
        ? addrValue
        : this.badInteger(addrKey, addrValue, offset, device, index)
    const size =
      typeof sizeValue === 'number' && Number.isSafeInteger(sizeValue) && sizeValue >= 0
        ? sizeValue
        : sizeValue === undefined
          ? 0
          : this.badInteger(KEY.size, sizeValue, offset, device, index)
    // A block's size is PyTorch's 512-byte rounding of the request, which the trace stores as a
    // whole number below 2^53: a request past the last multiple of 512 below it cannot be one.
    if (size > MAX_BLOCK && BLOCK_ACTIONS.has(action as string))
      this.fail(
        `'${KEY.size}' of a block must be at most ${MAX_BLOCK} (2^53 - 512, the largest block a trace stores), got ${size}`,
        offset,
        where(device, index),
        'limit',
      )
    streamValue ??= 0
    // Streams are cudaStream_t handles (the default stream 0): the trace stores each as a whole number below 2^53.
    if (unstorableStream(streamValue))
      this.fail(`'${KEY.stream}' must be a non-negative integer below 2^53, got ${describe(streamValue)}`, offset, where(device, index), 'limit')
    if (typeof time !== 'number' || !Number.isFinite(time)) {
      // An integer of 2^53 or more reads as a bigint: no clock a snapshot keeps (microseconds since 1970 are below 2^51).
      if (typeof time === 'bigint')
        this.fail(`'${KEY.timeUs}' must be a number of microseconds below 2^53, got ${describe(time)}`, offset, where(device, index))
      if (time !== undefined) this.fail(`'${KEY.timeUs}' must be a finite number, got ${describe(time)}`, offset, where(device, index))
      this.missingTimes++
      time = s.nextIndex // no clock: keep the order
    }
    s.nextIndex++
    const t = time as number
    if (t < this.earliest) this.earliest = t
    if (!Number.isInteger(streamValue) && typeof streamValue !== 'bigint')
      this.fail(`'${KEY.stream}' must be an integer, got ${describe(streamValue)}`, offset, where(device, index))
    this.apply(s, device, action as string, addr, size, streamValue, t, frames, UNRESOLVED_STACK, metadata, offset, index)
  }

  /** Counts a device's first event against the limit on devices. */
  private newDevice(offset: number | undefined, path: string): void {
    if (++this.devicesSeen > this.maxDevices)
      this.fail(
        `more than ${this.maxDevices} devices have events (PyTorch numbers at most 128); set ${MAX_DEVICES_ENV} to raise the limit, up to ${MAX_DEVICE + 1}`,
        offset,
        path,
        'limit',
      )
  }

  /** Whether events of this device are imported (state() would give it a DeviceState). */
  wants(device: number): boolean {
    return this.wanted === 'all' || this.wanted === 'default' || device === this.wanted
  }

  /**
   * One event the fast lane (pickle-fast-lane.ts) read and checked: the same effects as event() for
   * a dict with these fields. `time` is NaN when the event has none; `stack` is the interned stack
   * (internStack) for alloc and oom, whatever else for other actions. For oom, `addr` is its
   * device_free (-1 when it has none), as event() reads it.
   */
  decodedEvent(device: number, action: string, addr: number, size: number, stream: number, time: number, stack: number, metadata: string | null): void {
    if (this.eventCounts[device] === undefined) this.newDevice(undefined, `device_traces[${device}]`)
    this.eventCounts[device] = (this.eventCounts[device] ?? 0) + 1
    const s = this.state(device)
    if (s === null) return
    let t = time
    if (t !== t) {
      this.missingTimes++
      t = s.nextIndex
    }
    s.nextIndex++
    if (t < this.earliest) this.earliest = t
    this.apply(s, device, action, addr, size, stream, t, undefined, stack, metadata, undefined, -1)
  }

  /**
   * What an event does to its device's columns, its fields checked. `stack` is the stack's index,
   * or UNRESOLVED_STACK to take it from `frames` (only alloc and oom look at either).
   */
  private apply(
    s: DeviceState,
    device: number,
    action: string,
    addr: number,
    size: number,
    streamValue: unknown,
    t: number,
    frames: unknown,
    stack: number,
    metadata: unknown,
    offset: number | undefined,
    index: number,
  ): void {
    const streamNumber = Number(streamValue)

    if (s.released > 0 && action !== ACTION.segmentFree && action !== ACTION.segmentUnmap)
      this.pushTrim(s, action === ACTION.segmentAlloc || action === ACTION.segmentMap || action === ACTION.oom)
    if (s.held >= 0) {
      if (action === ACTION.freeCompleted && addr === s.heldAddress) {
        s.events.push(EventKind.free, s.held, s.heldSize, s.heldStreamIndex, s.device, s.heldTime)
        s.layout.push(LayoutOp.free, addr, s.roundedById[s.held]!, s.heldSize, s.heldStream, s.heldTime)
        s.held = -1
        return
      }
      this.flushHeld(s)
    }

    switch (action) {
      case ACTION.alloc: {
        const previous = s.live.get(addr)
        if (previous >= 0) {
          // Allocated twice without a free between: only a damaged trace does this. Free the first.
          s.events.push(EventKind.free, previous, 0, this.stream(streamValue), device, t)
          s.layout.push(LayoutOp.free, addr, s.roundedById[previous]!, s.requestedById[previous]!, streamNumber, t)
          this.reallocations++
        }
        const id = this.newId(s, addr, size)
        s.live.set(addr, id)
        s.events.push(
          EventKind.alloc,
          id,
          size,
          this.stream(streamValue),
          device,
          t,
          stack === UNRESOLVED_STACK ? this.stack(frames, offset, device, index) : stack,
          this.tag(metadata),
        )
        s.layout.push(LayoutOp.alloc, addr, s.roundedById[id]!, size, streamNumber, t)
        return
      }
      case ACTION.freeRequested:
      case ACTION.free: {
        let id = s.live.get(addr)
        if (id < 0) id = this.orphanAlloc(s, addr, size, streamValue)
        s.live.delete(addr)
        if (action === ACTION.free) {
          s.events.push(EventKind.free, id, s.requestedById[id]!, this.stream(streamValue), device, t)
          s.layout.push(LayoutOp.free, addr, s.roundedById[id]!, s.requestedById[id]!, streamNumber, t)
        } else {
          // The request's free waits for free_completed: a block used on other streams
          // (record_stream) goes back to the pool only when their work is done, which the
          // recording timed and no allocator can do sooner.
          s.held = id
          s.heldAddress = addr
          s.heldSize = s.requestedById[id]!
          s.heldStream = streamNumber
          s.heldStreamIndex = this.stream(streamValue)
          s.heldTime = t
        }
        return
      }
      case ACTION.freeCompleted: {
        const id = s.pending.get(addr)
        if (id < 0 && s.live.get(addr) >= 0) {
          // A free_completed of a live block with no free_requested before it: some writers (the
          // generator of other viewers' test snapshots) give frees this way only, and memory_viz
          // counts it as the free. So does the import.
          const liveId = s.live.get(addr)
          s.live.delete(addr)
          s.events.push(EventKind.free, liveId, s.requestedById[liveId]!, this.stream(streamValue), device, t)
          s.layout.push(LayoutOp.free, addr, s.roundedById[liveId]!, s.requestedById[liveId]!, streamNumber, t)
          return
        }
        if (id < 0) {
          // Its alloc and free_requested were both lost: in the layout the block was pending at
          // t = 0. The program had let go of it, so the request trace has nothing to add.
          s.synthLayout.push(LayoutOp.alloc, addr, roundedSize(size), size, streamNumber, NaN)
          s.synthLayout.push(LayoutOp.freePending, addr, roundedSize(size), size, streamNumber, NaN)
          s.layout.push(LayoutOp.freeCompleted, addr, roundedSize(size), size, streamNumber, t)
          s.overflow.orphanEvents++
          s.overflow.synthesizedBlocks++
          return
        }
        s.pending.delete(addr)
        s.events.push(EventKind.free, id, s.requestedById[id]!, s.pendingStreamIndex.get(id) ?? this.stream(streamValue), device, t)
        s.pendingStreamIndex.delete(id)
        s.layout.push(LayoutOp.freeCompleted, addr, s.roundedById[id]!, s.requestedById[id]!, streamNumber, t)
        return
      }
      case ACTION.segmentAlloc:
        s.segmentLog.push(s.nextId, SegmentOp.reserve, addr, size)
        s.segments.set(addr, size)
        s.reserveRow.set(addr, s.layout.length)
        s.layout.push(LayoutOp.regionReserve, addr, size, size, streamNumber, t)
        return
      case ACTION.segmentFree:
        this.noteRelease(s, size, streamValue, t)
        s.segmentLog.push(s.nextId, SegmentOp.release, addr, size)
        if (!s.segments.has(addr)) {
          s.synthLayout.push(LayoutOp.regionReserve, addr, size, size, streamNumber, NaN)
          s.overflow.orphanEvents++
          s.overflow.synthesizedSegments++
        }
        s.segments.delete(addr)
        s.layout.push(LayoutOp.regionRelease, addr, size, size, streamNumber, t)
        return
      case ACTION.segmentMap:
        s.segmentLog.push(s.nextId, SegmentOp.map, addr, size)
        s.mapped.push(addr)
        s.mapRows.push(addr, s.layout.length)
        s.layout.push(LayoutOp.map, addr, size, size, streamNumber, t)
        return
      case ACTION.segmentUnmap:
        this.noteRelease(s, size, streamValue, t)
        s.segmentLog.push(s.nextId, SegmentOp.unmap, addr, size)
        s.mapRows.push(addr, s.layout.length)
        s.layout.push(LayoutOp.unmap, addr, size, size, streamNumber, t)
        return
      case ACTION.oom:
        s.oomDeviceFree.push(addr)
        s.events.push(
          EventKind.oom,
          0,
          size,
          this.stream(streamValue),
          device,
          t,
          stack === UNRESOLVED_STACK ? this.stack(frames, offset, device, index) : stack,
          this.tag(metadata),
        )
        s.layout.push(LayoutOp.failure, 0, size, size, streamNumber, t)
        return
      case ACTION.snapshot:
        this.markers.push(ACTION.snapshot)
        s.events.push(EventKind.marker, this.markers.length - 1, 0, this.stream(streamValue), device, t)
        return
      default:
        this.unknownActions.set(action, (this.unknownActions.get(action) ?? 0) + 1)
    }
  }

  /** A segment released: part of a run that ends as an empty_cache or as room for an allocation. */
  private noteRelease(s: DeviceState, size: number, streamValue: unknown, t: number): void {
    if (s.released === 0) {
      s.releasedTime = t
      s.releasedStream = streamValue
      s.releasedSmallest = size
      s.releasedSmallPool = false
    }
    s.released += size
    if (size < s.releasedSmallest) s.releasedSmallest = size
    if (size === SMALL_SEGMENT) s.releasedSmallPool = true
  }

  /**
   * Segments released by the allocator as a whole: a trim event where the run began. PyTorch
   * releases every cached segment in empty_cache and, the same way, when the device refuses a new
   * segment (its out-of-memory retry): both are a trim. Only garbage collection and max_split_size's
   * release of oversize blocks release some segments to make room for an allocation; a run just
   * before one is marked (id 1) until the settings say whether either could have done it.
   */
  private pushTrim(s: DeviceState, beforeAllocation = false): void {
    // Until keepTrims decides, a run before an allocation carries in its id (1, +2 with a small-pool
    // segment) and its stack (the smallest segment, KiB) what tells PyTorch's partial releases apart.
    const id = beforeAllocation ? 1 | (s.releasedSmallPool ? 2 : 0) : 0
    const smallestKiB = beforeAllocation ? Math.min(Math.floor(s.releasedSmallest / 1024), 2 ** 31 - 1) : -1
    s.events.push(EventKind.trim, id, s.released, this.stream(s.releasedStream), s.device, s.releasedTime, smallestKiB)
    s.released = 0
  }

  private badInteger(key: string, value: unknown, offset: number | undefined, device: number, index: number): never {
    return this.fail(`'${key}' must be a non-negative integer below 2^53, got ${describe(value)}`, offset, where(device, index))
  }

  private flushHeld(s: DeviceState): void {
    s.layout.push(LayoutOp.freePending, s.heldAddress, s.roundedById[s.held]!, s.heldSize, s.heldStream, s.heldTime)
    s.pending.set(s.heldAddress, s.held)
    s.pendingStreamIndex.set(s.held, s.heldStreamIndex)
    s.held = -1
  }

  /** A free of a block the trace never saw allocated: it was allocated before the window, at t = 0. */
  private orphanAlloc(s: DeviceState, addr: number, size: number, streamValue: unknown): number {
    const id = this.newId(s, addr, size)
    s.synthEvents.push(EventKind.alloc, id, size, this.stream(streamValue), s.device, NaN)
    s.synthLayout.push(LayoutOp.alloc, addr, s.roundedById[id]!, size, Number(streamValue), NaN)
    s.overflow.orphanEvents++
    s.overflow.synthesizedAllocs++
    s.overflow.synthesizedBlocks++
    return id
  }

  private newId(s: DeviceState, address: number, requested: number, rounded = roundedSize(requested)): number {
    const id = s.nextId++
    if (id === s.requestedById.length) {
      const a = new Float64Array(id * 2)
      a.set(s.addressById)
      s.addressById = a
      const r = new Float64Array(id * 2)
      r.set(s.requestedById)
      s.requestedById = r
      const b = new Float64Array(id * 2)
      b.set(s.roundedById)
      s.roundedById = b
    }
    s.requestedById[id] = requested
    s.roundedById[id] = rounded
    s.addressById[id] = address
    return id
  }

  private lastStreamValue: unknown = undefined
  private lastStream = -1

  private stream(value: unknown): number {
    if (value === this.lastStreamValue) return this.lastStream
    let i = this.streamIndex.get(value)
    if (i === undefined) {
      i = this.streams.length
      this.streams.push(String(value))
      this.streamIndex.set(value, i)
    }
    this.lastStreamValue = value
    this.lastStream = i
    return i
  }

  private tag(value: unknown): number {
    if (typeof value !== 'string' || value === '') return -1
    let i = this.tagIndex.get(value)
    if (i === undefined) {
      i = this.tags.length
      this.tags.push(value)
      this.tagIndex.set(value, i)
    }
    return i
  }

  /** Index of the deduplicated stack for a frames list (innermost first, as PyTorch lists them), or -1. */
  private stack(frames: unknown, offset: number | undefined, device: number, index: number): number {
    if (frames === undefined || frames === null) return -1
    if (!Array.isArray(frames)) return this.fail(`'${KEY.frames}' must be a list, got ${describe(frames)}`, offset, where(device, index))
    if (frames.length === 0) return -1
    // The pickle often shares one list per traceback, so identity answers many lookups.
    if (frames === this.lastFrames) return this.lastStack
    let stack = this.stackByObject.get(frames)
    if (stack === undefined) {
      // A list the pickle shares is looked up again once it left the cache.
      this.budget.spend(frames.length, where(device, index))
      const ids = new Uint32Array(frames.length)
      for (let i = 0; i < frames.length; i++) ids[i] = this.frame(frames[i], offset, device, index)
      stack = this.internStack(ids, ids.length)
      this.stackByObject.set(frames, stack)
    }
    this.lastFrames = frames
    this.lastStack = stack
    return stack
  }

  /** Index of the stack of frame ids ids[0, n) in the stacks table, added if new (the array is not kept). */
  internStack(ids: ArrayLike<number>, n: number): number {
    let hash = n
    for (let i = 0; i < n; i++) hash = Math.imul(hash ^ ids[i]!, 0x9e3779b1)
    const candidates = this.stacksByHash.get(hash)
    if (candidates !== undefined) for (const c of candidates) if (sameIds(this.stacks[c]!, ids, n)) return c
    const stack = this.stacks.length
    const kept = new Uint32Array(n)
    for (let i = 0; i < n; i++) kept[i] = ids[i]!
    this.stacks.push(kept)
    if (candidates === undefined) this.stacksByHash.set(hash, [stack])
    else candidates.push(stack)
    return stack
  }

  /** Index of the frame with this name, file and line in the frames table, added if new. */
  frameId(name: string, filename: string, line: number): number {
    const text = `${name}\u0000${filename}\u0000${line}`
    let i = this.frameByText.get(text)
    if (i === undefined) {
      i = this.frames.length
      this.frames.push({ name, filename, line })
      this.frameByText.set(text, i)
    }
    return i
  }

  private frame(frame: unknown, offset: number | undefined, device: number, index: number): number {
    if (!isDict(frame)) return this.fail(`a frame must be a dict, got ${describe(frame)}`, offset, where(device, index))
    const known = this.frameByObject.get(frame)
    if (known !== undefined) return known
    const name = field(frame, KEY.name)
    const filename = field(frame, KEY.filename)
    const line = field(frame, KEY.line)
    if (typeof name !== 'string' || typeof filename !== 'string' || typeof line !== 'number')
      return this.fail(
        `a frame needs a string name and filename and a number line, got ${describe(name)}, ${describe(filename)}, ${describe(line)}`,
        offset,
        where(device, index),
      )
    const i = this.frameId(name, filename, line)
    this.frameByObject.set(frame, i)
    return i
  }

  /** The whole snapshot is read: add what only its end says, and build the traces. */
  finish(root: PickleValue | unknown, format: 'pickle' | 'json', protocol: number | undefined): PytorchImport {
    const steps = this.finishSteps(root, format, protocol)
    for (;;) {
      const step = steps.next()
      if (step.done) return step.value
    }
  }

  /** finish() with the event loop let in between its steps (each a copy of at most one column set). */
  async finishYielding(root: PickleValue | unknown, format: 'pickle' | 'json', protocol: number | undefined): Promise<PytorchImport> {
    const steps = this.finishSteps(root, format, protocol)
    for (;;) {
      const step = steps.next()
      if (step.done) return step.value
      await new Promise<void>((resolve) => setImmediate(resolve))
    }
  }

  private *finishSteps(root: PickleValue | unknown, format: 'pickle' | 'json', protocol: number | undefined): Generator<void, PytorchImport> {
    if (!isDict(root)) this.fail(`the root must be a dict (a memory snapshot), got ${describe(root)}`)
    const traces = field(root, KEY.deviceTraces)
    if (!Array.isArray(traces))
      this.fail(
        traces === undefined
          ? `no '${KEY.deviceTraces}': not a memory snapshot (torch.cuda.memory._dump_snapshot writes one; record with torch.cuda.memory._record_memory_history)`
          : `'${KEY.deviceTraces}' must be a list, got ${describe(traces)}`,
      )
    // Events the unpickler kept (JSON, or a list it did not recognise as streamed) go through the same path.
    traces.forEach((list: unknown, device: number) => {
      if (!Array.isArray(list)) this.fail(`device_traces[${device}] must be a list, got ${describe(list)}`)
      // A list read back from the memo is kept, not streamed, and may be listed for many devices.
      this.budget.spend(list.length, `device_traces[${device}]`)
      const s = this.states.get(device)
      const first = s === undefined ? 0 : s.nextIndex
      for (let i = 0; i < list.length; i++) this.event(device, first + i, list[i] as PickleValue, undefined)
    })
    const segmentsValue = field(root, KEY.segments) ?? []
    if (!Array.isArray(segmentsValue)) this.fail(`'${KEY.segments}' must be a list, got ${describe(segmentsValue)}`)
    const segments: Dict[] = segmentsValue.map((seg: unknown, i: number) => {
      if (!isDict(seg)) this.fail(`segments[${i}] must be a dict, got ${describe(seg)}`)
      return seg
    })

    const devices = new Set<number>()
    this.eventCounts.forEach((count, device) => {
      if (count > 0) devices.add(device)
    })
    for (const seg of segments) {
      const d = field(seg, KEY.device)
      if (typeof d === 'number' && Number.isInteger(d) && d >= 0) devices.add(d)
    }
    const present = [...devices].sort((a, b) => a - b)
    let selected: number[]
    if (this.wanted === 'all') selected = present
    else if (this.wanted === 'default') selected = present.includes(0) || present.length === 0 ? [0] : [present[0]!]
    else {
      if (!present.includes(this.wanted) && present.length > 0)
        throw new SnapshotImportError(
          this.file,
          'not-a-snapshot',
          undefined,
          `device ${this.wanted} has no events or segments in this snapshot (it has device${present.length > 1 ? 's' : ''} ${present.join(', ')})`,
        )
      selected = [this.wanted]
    }
    for (const d of selected) this.state(d)
    const selectedSet = new Set(selected)
    for (const [d] of this.states) if (!selectedSet.has(d)) this.states.delete(d)
    this.lastState = null

    const settings = field(root, KEY.allocatorSettings)
    const plainSettings = plainSettingsOf(settings, this.budget)
    const segmentsOf = new Map<unknown, Dict[]>()
    for (const seg of segments) {
      const given = field(seg, KEY.device)
      const d = given === undefined ? 0 : given
      const list = segmentsOf.get(d)
      if (list === undefined) segmentsOf.set(d, [seg])
      else list.push(seg)
    }
    for (const s of this.states.values()) {
      if (s.held >= 0) this.flushHeld(s)
      if (s.released > 0) this.pushTrim(s)
      this.addLiveAtSnapshot(s, segmentsOf.get(s.device) ?? [])
    }
    const markerTimes: number[] = []
    const markerIds: number[] = []
    const markerDevices: number[] = []
    this.annotationMarkers(field(root, KEY.externalAnnotations), markerTimes, markerIds, markerDevices)
    const t0 = Number.isFinite(this.earliest) ? this.earliest : 0

    const ordered = [...this.states.values()].sort((a, b) => a.device - b.device)
    // The stand-ins for the window-open state come first: in the request events and in each layout.
    const standInEvents = ordered.reduce((n, s) => n + s.synthEvents.length, 0)
    const standInRows = ordered.map((s) => s.synthLayout.length)
    yield
    const merged = yield* this.mergeEvents(ordered, t0, markerTimes, markerIds, markerDevices)
    const { events, kept } = keepTrims(merged.events, partialReleases(plainSettings))
    const pools = this.assignPools(events, ordered, segmentsOf)
    const recorded: StrategyResult[] = []
    for (const [d, s] of ordered.entries()) {
      yield
      // The settings as JSON-ready data once (an object of 16 integer keys costs microseconds to
      // build); the first layout takes them, any other its own copy.
      const deviceSettings = recorded.length === 0 ? plainSettings : plainSettingsOf(settings, this.budget)
      const placed: EventPlaces = { positions: merged.positions[d]!, kept, events }
      recorded.push(yield* this.recordedLayout(s, t0, deviceSettings, ordered.length > 1, placed))
    }

    const overflow: OverflowCounts = { orphanEvents: 0, synthesizedAllocs: 0, synthesizedBlocks: 0, synthesizedSegments: 0 }
    for (const s of ordered) {
      overflow.orphanEvents += s.overflow.orphanEvents
      overflow.synthesizedAllocs += s.overflow.synthesizedAllocs
      overflow.synthesizedBlocks += s.overflow.synthesizedBlocks
      overflow.synthesizedSegments += s.overflow.synthesizedSegments
    }
    const result = this.assemble(
      events,
      recorded,
      overflow,
      present,
      selected,
      settings,
      plainSettings,
      format,
      protocol,
      oomDeviceFree(events, ordered),
      pools,
    )
    if (standInRows.some((n) => n > 0)) {
      result.trace.meta.properties[STAND_IN_EVENTS] = String(standInEvents)
      result.trace.meta.properties[STAND_IN_ROWS] = standInRows.join(',')
    }
    return result
  }

  /**
   * The pool column and table (pools.ts) where a listed segment of an imported device is in a
   * private pool; otherwise nothing is computed and the trace has neither.
   */
  private assignPools(events: TraceEvents, states: DeviceState[], segmentsOf: Map<unknown, Dict[]>): PoolsFound | undefined {
    const names = new Set<string>()
    for (const s of states) for (const seg of segmentsOf.get(s.device) ?? []) names.add(poolName(field(seg, KEY.segmentPoolId)))
    names.delete('')
    if (names.size === 0) return undefined
    const table = sortPoolNames(names)
    const index = new Map(table.map((n, i) => [n, i + 1]))
    const found: PoolsFound = { names: table, unknownSegments: 0, unknownBlocks: 0 }
    const byDevice = new Map<number, { base: number; poolById: Uint32Array }>()
    let base = 0
    for (const s of states) {
      const listed: ListedSegment[] = []
      for (const seg of segmentsOf.get(s.device) ?? []) {
        const address = field(seg, KEY.address)
        const size = field(seg, KEY.totalSize)
        // addLiveAtSnapshot checked them: non-negative integers.
        listed.push({ address: address as number, size: size as number, pool: index.get(poolName(field(seg, KEY.segmentPoolId))) ?? 0 })
      }
      const result = segmentPools(s.segmentLog, s.nextId, s.addressById, listed)
      found.unknownSegments += result.unknownSegments
      found.unknownBlocks += result.unknownBlocks
      byDevice.set(s.device, { base, poolById: result.poolById })
      base += s.nextId
    }
    const pool = new Uint32Array(events.kind.length)
    const { kind, id, device } = events
    let lastDevice = -1
    let current: { base: number; poolById: Uint32Array } = { base: 0, poolById: new Uint32Array(0) }
    for (let i = 0; i < kind.length; i++) {
      if (kind[i] !== EventKind.alloc && kind[i] !== EventKind.free) continue
      if (device[i] !== lastDevice) {
        lastDevice = device[i]!
        current = byDevice.get(lastDevice)!
      }
      pool[i] = current.poolById[id[i]! - current.base]!
    }
    events.pool = pool
    return found
  }

  /** The import from its finished columns: warnings, properties, tables. */
  private assemble(
    events: TraceEvents,
    recorded: StrategyResult[],
    overflow: OverflowCounts,
    present: number[],
    selected: number[],
    settings: unknown,
    plainSettings: [string, unknown][],
    format: 'pickle' | 'json',
    protocol: number | undefined,
    deviceFree: string | undefined,
    pools: PoolsFound | undefined,
  ): PytorchImport {
    const warnings: string[] = []
    if (overflow.orphanEvents + overflow.synthesizedAllocs + overflow.synthesizedBlocks + overflow.synthesizedSegments > 0) {
      warnings.push(existedBeforeWarning(overflow))
    }
    if (pools !== undefined && pools.unknownSegments > 0)
      warnings.push(
        `${pools.unknownSegments} segments were freed before the snapshot was taken, so their pool is unknown (the snapshot has CUDA-graph private pools): their ${pools.unknownBlocks} allocations count as the default pools`,
      )
    if (this.reallocations > 0) warnings.push(`${this.reallocations} allocs at an address already live (a damaged trace): the earlier block was freed there`)
    if (this.missingTimes > 0) warnings.push(`${this.missingTimes} events have no time_us (an old PyTorch?): their times are their order, not nanoseconds`)
    for (const [action, count] of this.unknownActions) warnings.push(`${count} events with the unknown action ${JSON.stringify(action)} were skipped`)
    if (isDict(settings)) {
      const divisions = field(settings, 'roundup_power2_divisions')
      if (
        isDict(divisions) &&
        [...(divisions instanceof PickleDict ? divisions.values() : Object.values(divisions))].some((v) => typeof v === 'number' && v > 0)
      )
        warnings.push(
          'roundup_power2_divisions is set: the recorded layout rounds blocks to 512 bytes only, so its block sizes are smaller than PyTorch made them',
        )
    }

    const properties: Record<string, string> = {
      'pytorch.format': format,
      'pytorch.devices': present.join(','),
      'pytorch.device': selected.join(','),
    }
    if (protocol !== undefined && protocol >= 0) properties['pickle.protocol'] = String(protocol)
    if (isDict(settings))
      entries(settings).forEach(
        ([k, v], i) => (properties[`pytorch.allocator.${String(k)}`] = typeof v === 'string' ? v : JSON.stringify(plainSettings[i]![1])),
      )
    properties['pytorch.overflow.orphan_events'] = String(overflow.orphanEvents)
    properties['pytorch.overflow.synthesized_allocs'] = String(overflow.synthesizedAllocs)
    properties['pytorch.overflow.synthesized_segments'] = String(overflow.synthesizedSegments)
    if (deviceFree !== undefined) properties['pytorch.oom.device_free'] = deviceFree
    if (pools !== undefined) properties['pytorch.pools'] = String(pools.names.length)

    const trace: RequestTrace = {
      meta: { source: 'pytorch-snapshot', origin: this.options.origin ?? basename(this.file), warnings, properties },
      events,
      tables: {
        streams: this.streams,
        frames: this.frames,
        stacks: this.stacks,
        tags: this.tags,
        markers: this.markers,
        ...(pools === undefined ? {} : { pools: pools.names }),
      },
    }
    return { trace, recorded, devices: present, format, overflow }
  }

  /**
   * external_annotations of the imported devices as markers: their names, times, ids and devices.
   * Out of finishSteps, a generator V8 optimizes only after many imports.
   */
  private annotationMarkers(annotations: unknown, markerTimes: number[], markerIds: number[], markerDevices: number[]): void {
    if (!Array.isArray(annotations)) return
    for (const a of annotations) {
      if (!isDict(a)) continue
      const device = field(a, KEY.device)
      const time = field(a, KEY.timeUs)
      const name = field(a, KEY.name)
      if (typeof time !== 'number' || !Number.isFinite(time) || typeof name !== 'string' || !this.states.has(typeof device === 'number' ? device : 0)) continue
      const stage = field(a, KEY.stage)
      this.markers.push(typeof stage === 'string' ? `${name} (${stage.toLowerCase()})` : name)
      markerTimes.push(time)
      markerIds.push(this.markers.length - 1)
      markerDevices.push(typeof device === 'number' ? device : 0)
      if (time < this.earliest) this.earliest = time
    }
  }

  /** Blocks and segments live at the snapshot that the trace never saw created (ring buffer overflow). */
  private addLiveAtSnapshot(s: DeviceState, segments: Dict[]): void {
    const isAmount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
    // Expandable segments' mappings first: the blocks below lie in them.
    const listedMaps: ListedMapping[] = []
    for (const seg of segments) {
      const address = field(seg, KEY.address)
      const total = field(seg, KEY.totalSize)
      if (field(seg, KEY.isExpandable) !== true || !isAmount(address) || !isAmount(total) || total === 0) continue
      const given = field(seg, KEY.stream)
      listedMaps.push({ address, size: total, pool: poolOf(seg), stream: Number(Number.isInteger(given) || typeof given === 'bigint' ? given : 0) })
    }
    if (listedMaps.length > 0 || s.mapRows.length > 0)
      for (const m of mappedAtOpen(listedMaps, s.mapRows, s.layout)) {
        s.synthLayout.push(LayoutOp.map, m.address, m.size, m.size, m.stream, NaN, m.pool)
        s.overflow.synthesizedSegments++
      }
    for (const seg of segments) {
      // A segment, or a blocks list, that the pickle shares is visited at each reference.
      this.budget.spend(1, `segments (device ${s.device})`)
      const address = field(seg, KEY.address)
      const total = field(seg, KEY.totalSize)
      if (!isAmount(address) || !isAmount(total))
        this.fail(
          `a segment needs a non-negative integer address and total_size, got ${describe(address)}, ${describe(total)}`,
          undefined,
          `segments (device ${s.device})`,
        )
      const given = field(seg, KEY.stream)
      if (unstorableStream(given))
        this.fail(
          `a segment's '${KEY.stream}' must be a non-negative integer below 2^53, got ${describe(given)}`,
          undefined,
          `segments (device ${s.device})`,
          'limit',
        )
      const streamValue = Number.isInteger(given) || typeof given === 'bigint' ? given : 0
      const streamNumber = Number(streamValue)
      const expandable = field(seg, KEY.isExpandable) === true
      if (expandable) {
        // The mappings inside the range it lists are its own: their pool too (those unmapped before the end stay unknown).
        const pool = poolOf(seg)
        if (pool !== 0)
          for (let i = 0; i < s.mapRows.length; i += 2)
            if (s.mapRows[i]! >= address && s.mapRows[i]! < address + total) s.layout.setAux(s.mapRows[i + 1]!, pool)
      } else if (!s.segments.has(address)) {
        s.synthLayout.push(LayoutOp.regionReserve, address, total, total, streamNumber, NaN, poolOf(seg))
        s.segments.set(address, total)
        s.overflow.synthesizedSegments++
      } else {
        const row = s.reserveRow.get(address)
        if (row !== undefined) s.layout.setAux(row, poolOf(seg))
      }
      const blocks = field(seg, KEY.blocks)
      if (!Array.isArray(blocks)) continue
      this.budget.spend(blocks.length, `segments (device ${s.device})`)
      let at = address
      for (const block of blocks) {
        if (!isDict(block)) continue
        const size = field(block, KEY.size)
        if (!isAmount(size)) break
        // Older snapshots give no block addresses: blocks tile their segment in order.
        const listed = field(block, KEY.address)
        const blockAddress = isAmount(listed) ? listed : at
        at = blockAddress + size
        const state = field(block, KEY.state)
        const { requested, frames } = blockRequest(block, size)
        if (state === BLOCK_STATE.activeAllocated && s.live.get(blockAddress) < 0) {
          const id = this.newId(s, blockAddress, requested, size)
          s.live.set(blockAddress, id)
          s.synthEvents.push(EventKind.alloc, id, requested, this.stream(streamValue), s.device, NaN, this.stack(frames, undefined, s.device, -1))
          s.synthLayout.push(LayoutOp.alloc, blockAddress, size, requested, streamNumber, NaN)
          s.overflow.synthesizedAllocs++
          s.overflow.synthesizedBlocks++
        } else if (state === BLOCK_STATE.activePendingFree && s.pending.get(blockAddress) < 0 && s.live.get(blockAddress) < 0) {
          // Freed by the program before the window, still waiting for its stream at the end.
          s.synthLayout.push(LayoutOp.alloc, blockAddress, size, requested, streamNumber, NaN)
          s.synthLayout.push(LayoutOp.freePending, blockAddress, size, requested, streamNumber, NaN)
          s.overflow.synthesizedBlocks++
        }
      }
    }
  }

  /**
   * The request events of every imported device in one time order (stand-ins at t = 0 first,
   * then each device's events, markers from annotations placed by time), times in ns from t0.
   */
  private *mergeEvents(
    states: DeviceState[],
    t0: number,
    markerTimes: number[],
    markerIds: number[],
    markerDevices: number[],
  ): Generator<void, { events: TraceEvents; positions: Uint32Array[] }> {
    // Each device numbered its blocks from 0: follow on from the devices before it.
    let base = 0
    for (const s of states) {
      if (base > 0) {
        for (const part of [s.synthEvents, s.events]) {
          for (const c of part.chunks)
            for (let i = 0; i < c.kind.length; i++) if (c.kind[i] === EventKind.alloc || c.kind[i] === EventKind.free) c.id[i]! += base
        }
      }
      base += s.nextId
    }
    const main = states.map((s) => s.events)
    const total = states.reduce((n, s) => n + s.synthEvents.length + s.events.length, 0) + markerTimes.length
    const out = allocateEvents(total)
    let at = 0
    for (const s of states) at = s.synthEvents.moveTo(0, s.synthEvents.length, out, at)
    const order = markerTimes.map((_, i) => i).sort((a, b) => markerTimes[a]! - markerTimes[b]!)
    const merge: Merge = {
      main,
      out,
      at,
      cursors: main.map(() => 0),
      next: 0,
      order,
      markerTimes,
      markerIds,
      markerDevices,
      markerStream: order.length > 0 ? this.stream(0) : 0,
      positions: main.map((m) => new Uint32Array(m.length)),
    }
    let yieldAt = YIELD_CHUNKS * CHUNK_ROWS
    while (!mergeRuns(merge, yieldAt)) {
      yield
      yieldAt = merge.at + YIELD_CHUNKS * CHUNK_ROWS
    }
    const time = out.time
    for (let from = 0; from < time.length; from += YIELD_CHUNKS * CHUNK_ROWS) {
      if (from > 0) yield
      toNanoseconds(time, from, Math.min(time.length, from + YIELD_CHUNKS * CHUNK_ROWS), time, from, t0)
    }
    return { events: out, positions: merge.positions }
  }

  private *recordedLayout(s: DeviceState, t0: number, settings: [string, unknown][], several: boolean, placed: EventPlaces): Generator<void, StrategyResult> {
    const n = s.synthLayout.length + s.layout.length
    const layout = allocateLayout(n)
    const before = new Uint32Array(n)
    const synthRows = yield* s.synthLayout.moveTo(layout, 0, t0)
    yield* s.layout.moveTo(layout, synthRows, t0, 1000, before)
    layout.event = recordedEvents(layout, before, synthRows, placed)
    return recordedResult(s.device, layout, settings, several)
  }
}

/**
 * What a listed block was asked for and what allocated it, read as memory_viz reads them
 * (_block_extra): a block with `frames` gives `requested_size`; one without (PyTorch 2.0's
 * format) gives its newest `history` entry's `real_size` and frames; else the block's size.
 */
function blockRequest(block: Dict, size: number): { requested: number; frames: unknown } {
  const isAmount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
  const frames = field(block, KEY.frames)
  if (frames === undefined) {
    const history = field(block, KEY.history)
    const newest = Array.isArray(history) && history.length > 0 ? history[0] : undefined
    if (isDict(newest)) {
      const real = field(newest, KEY.realSize)
      return { requested: isAmount(real) ? real : size, frames: field(newest, KEY.frames) }
    }
  }
  const requested = field(block, KEY.requestedSize)
  return { requested: isAmount(requested) ? requested : size, frames }
}

/** A mapped range of an expandable segment: its pool's aux (1 small, 2 large, 0 unknown) and stream. */
interface ListedMapping {
  address: number
  size: number
  pool: number
  stream: number
}

/**
 * The ranges of expandable segments mapped when the window opened, rebuilt backwards from the
 * final `segments` (their mapped runs, `listed`) as memory_viz does: a range the window maps or
 * unmaps was, before its first such event, the opposite; a range it never touches was as listed.
 * `mapRows` holds each segment_map and segment_unmap's address and layout row, in order. Costs
 * O((events + segments) log) over their endpoints, whatever the sizes.
 */
export function mappedAtOpen(listed: readonly ListedMapping[], mapRows: readonly number[], layout: LayoutChunks): ListedMapping[] {
  const row = (r: number, column: 'op' | 'size' | 'stream'): number => layout.chunks[Math.floor(r / CHUNK_ROWS)]![column][r % CHUNK_ROWS]!
  const points: number[] = []
  for (const m of listed) points.push(m.address, m.address + m.size)
  for (let i = 0; i < mapRows.length; i += 2) points.push(mapRows[i]!, mapRows[i]! + row(mapRows[i + 1]!, 'size'))
  points.sort((a, b) => a - b)
  const coords: number[] = []
  for (const p of points) if (coords.length === 0 || coords[coords.length - 1] !== p) coords.push(p)
  const pieces = Math.max(coords.length - 1, 0)
  const index = (v: number): number => {
    let lo = 0
    let hi = coords.length - 1
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (coords[mid]! < v) lo = mid + 1
      else hi = mid
    }
    return lo
  }
  // Each piece's state at the opening: 1 mapped, 0 not, -1 not yet known; the first event decides.
  const state = new Int8Array(pieces).fill(-1)
  const stream = new Float64Array(pieces)
  const pool = new Uint8Array(pieces)
  // next[i]: the first piece at or after i not yet decided (path-halving union-find).
  const next = new Int32Array(pieces + 1).map((_, i) => i)
  const find = (i: number): number => {
    while (next[i] !== i) {
      next[i] = next[next[i]!]!
      i = next[i]!
    }
    return i
  }
  for (let i = 0; i < mapRows.length; i += 2) {
    const r = mapRows[i + 1]!
    const end = index(mapRows[i]! + row(r, 'size'))
    const before = row(r, 'op') === LayoutOp.map ? 0 : 1
    for (let k = find(index(mapRows[i]!)); k < end; k = find(k + 1)) {
      state[k] = before
      stream[k] = row(r, 'stream')
      next[k] = k + 1
    }
  }
  // What the final segments say: of every piece, its pool and stream; of an untouched one, its state.
  for (const m of listed)
    for (let k = index(m.address), end = index(m.address + m.size); k < end; k++) {
      pool[k] = m.pool
      if (state[k] === -1) {
        state[k] = 1
        stream[k] = m.stream
      }
    }
  // Touching pieces are one mapped run of one segment (of one stream): joined, taking the pool that
  // is known (a piece unmapped before the end has none of its own).
  const out: ListedMapping[] = []
  for (let k = 0; k < pieces; k++) {
    if (state[k] !== 1) continue
    const last = out[out.length - 1]
    if (last !== undefined && last.address + last.size === coords[k] && (last.pool === pool[k] || last.pool === 0 || pool[k] === 0)) {
      last.size += coords[k + 1]! - coords[k]!
      last.pool = Math.max(last.pool, pool[k]!)
    } else out.push({ address: coords[k]!, size: coords[k + 1]! - coords[k]!, pool: pool[k]!, stream: stream[k]! })
  }
  return out
}

/** PyTorch's small-pool segment (kSmallBuffer), and an expandable segment's small-pool page. */
const SMALL_SEGMENT = 2 * 1024 * 1024

/** What of the recorded settings lets PyTorch release some cached segments to make room: garbage collection, max_split_size. */
interface PartialReleases {
  garbageCollection: boolean
  /** max_split_size in bytes; 0 when unset. */
  maxSplitSize: number
}

function partialReleases(settings: [string, unknown][]): PartialReleases {
  const value = (key: string): unknown => settings.find(([k]) => k === key)?.[1]
  const split = value(KEY.maxSplitSize)
  const gc = value(KEY.garbageCollectionThreshold)
  return { garbageCollection: typeof gc === 'number' && gc > 0, maxSplitSize: typeof split === 'number' && split > 0 ? split : 0 }
}

/**
 * Whether a release run just before an allocation was a release of the whole cache (an
 * empty_cache, or the out-of-memory retry: a trim either way) rather than one of PyTorch's partial
 * releases, which the replay's own model makes: garbage collection releases only large-pool
 * segments, and max_split_size's release only blocks at least that large.
 */
function wholeRelease(partial: PartialReleases, smallPool: boolean, smallestBytes: number): boolean {
  if (smallPool) return true
  if (partial.garbageCollection) return false
  return partial.maxSplitSize === 0 || smallestBytes < partial.maxSplitSize
}

/**
 * The trims of a trace, decided: a release run just before an allocation (id 1, 3) that one of
 * PyTorch's partial releases could have made is the model's own business and is dropped; every
 * trim kept gets id 0 and no stack.
 */
function keepTrims(events: TraceEvents, partial: PartialReleases): { events: TraceEvents; kept?: Uint32Array } {
  const n = events.kind.length
  let dropped = 0
  for (let i = 0; i < n; i++) {
    if (events.kind[i] !== EventKind.trim) continue
    const id = events.id[i]!
    if (id !== 0 && !wholeRelease(partial, (id & 2) !== 0, events.stack[i]! * 1024)) {
      events.id[i] = 1
      dropped++
    } else {
      events.id[i] = 0
    }
    if (events.id[i] === 0) events.stack[i] = -1
  }
  if (dropped === 0) return { events }
  const out = allocateEvents(n - dropped)
  // Each old row's new one; a dropped trim's is the event after it (the allocation its release made room for).
  const kept = new Uint32Array(n)
  let j = 0
  for (let i = 0; i < n; i++) {
    kept[i] = j
    if (events.kind[i] !== EventKind.trim || events.id[i] !== 1) copyEventRow(events, i, out, j++)
  }
  return { events: out, kept }
}

/** Where a device's request events went in the trace: its layout rows are placed by them. */
interface EventPlaces {
  /** Row of the merged events each of the device's events went to (mergeRuns). */
  positions: Uint32Array
  /** keepTrims' new row of each merged row, where it dropped any (a dropped row's is the row after it). */
  kept: Uint32Array | undefined
  /** The trace's events, as kept. */
  events: TraceEvents
}

/**
 * The request event each row of a recorded layout belongs to (LayoutTrace.event), from the count of
 * its device's request events pushed before it (`before`). A block's alloc, free and free_pending
 * and a failure come after their request event (or after the event before them, where they have
 * none): the last event before the row, and an annotation marker the merge put between them when
 * it is earlier than the row (one of the same time the merge puts after the row's own event). Memory reserved, mapped, released or unmapped comes before what it
 * is for (PyTorch logs a segment just before the allocation that needed it, and a release before
 * the trim or allocation it makes room for): the next event. The stand-ins (`synthRows`) are the
 * window-open state, at event 0.
 */
export function recordedEvents(layout: LayoutTrace, before: Uint32Array, synthRows: number, placed: EventPlaces): Uint32Array {
  const { positions, kept, events } = placed
  const { op, time } = layout
  const out = new Uint32Array(op.length)
  const n = events.kind.length
  const last = positions.length - 1
  if (n === 0) return out
  /** The kept row of merged row `at`; a dropped one's is the row after it, or (`after`) the row before. */
  const keptRow = (at: number, after: boolean): number => {
    if (!kept) return at
    const row = kept[at]!
    const dropped = at + 1 < kept.length ? kept[at + 1] === row : row === n
    return dropped && after ? Math.max(0, row - 1) : row
  }
  for (let r = synthRows; r < op.length; r++) {
    const o = op[r]!
    const after = o === LayoutOp.alloc || o === LayoutOp.free || o === LayoutOp.freePending || o === LayoutOp.freeCompleted || o === LayoutOp.failure
    let at: number
    if (last < 0) at = 0
    else if (after) {
      const k = before[r]! - 1
      at = k >= 0 ? keptRow(positions[Math.min(k, last)]!, true) : Math.max(0, keptRow(positions[0]!, false) - 1)
      while (at + 1 < n && events.kind[at + 1] === EventKind.marker && events.time[at + 1]! < time[r]!) at++
    } else at = keptRow(positions[Math.min(before[r]!, last)]!, false)
    out[r] = Math.min(at, n - 1)
  }
  return out
}

/**
 * device_free of the trace's oom events, in their order in the merged events, comma-separated (an
 * empty item where the entry gave none); undefined when there are none.
 */
function oomDeviceFree(events: TraceEvents, states: DeviceState[]): string | undefined {
  if (!states.some((s) => s.oomDeviceFree.length > 0)) return undefined
  const next = new Map<number, number>()
  const byDevice = new Map(states.map((s) => [s.device, s.oomDeviceFree]))
  const out: string[] = []
  for (let i = 0; i < events.kind.length; i++) {
    if (events.kind[i] !== EventKind.oom) continue
    const d = events.device[i]!
    const k = next.get(d) ?? 0
    next.set(d, k + 1)
    const free = byDevice.get(d)?.[k] ?? -1
    out.push(free < 0 ? '' : String(free))
  }
  return out.join(',')
}

/** An integer stream the trace cannot store (negative, or 2^53 or more); other values are checked elsewhere. */
function unstorableStream(value: unknown): boolean {
  if (typeof value === 'bigint') return value < 0n || value >= 2n ** 53n
  return typeof value === 'number' && Number.isInteger(value) && !(value >= 0 && Number.isSafeInteger(value))
}

function where(device: number, index: number): string {
  return index < 0 ? `segments (device ${device})` : `device_traces[${device}][${index}]`
}

function sameIds(a: Uint32Array, b: ArrayLike<number>, n: number): boolean {
  if (a.length !== n) return false
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false
  return true
}

/** The private pools of an import: their names (pool k is names[k - 1]) and what was not known. */
interface PoolsFound {
  names: string[]
  unknownSegments: number
  unknownBlocks: number
}

/** apply()'s stack argument when the stack is still to be found from the frames. */
const UNRESOLVED_STACK = -2

/**
 * A recorded block's size in the layout: PyTorch's round_size under the default settings (at
 * least 512 bytes, a multiple of 512), without roundup_power2_divisions even where the snapshot
 * set it (the import warns of that).
 */
export function roundedSize(requested: number): number {
  return roundSize(requested, DEFAULT_SIZE_POLICY)
}

/**
 * What a trace that begins with memory already in use says happened: blocks and segments existed
 * before its first event (recording started after the program had allocated, or a full ring
 * buffer dropped the oldest events; the snapshot does not tell which), how many later events refer
 * to them, and the stand-ins made for them at t = 0.
 */
export function existedBeforeWarning(o: OverflowCounts): string {
  const blocks = Math.max(o.synthesizedAllocs, o.synthesizedBlocks)
  const existed: string[] = []
  if (blocks > 0) existed.push(plural(blocks, 'block'))
  if (o.synthesizedSegments > 0) existed.push(plural(o.synthesizedSegments, 'segment'))
  const stood = [plural(o.synthesizedAllocs, 'allocation') + ' in the request trace']
  if (o.synthesizedBlocks + o.synthesizedSegments > 0)
    stood.push(`${plural(o.synthesizedBlocks, 'block')} and ${plural(o.synthesizedSegments, 'segment')} in the recorded layout`)
  return (
    `memory was already in use when recording started: ${existed.join(' and ')} existed before the first recorded event` +
    (o.orphanEvents > 0 ? ` (${plural(o.orphanEvents, 'later event')} ${o.orphanEvents === 1 ? 'refers' : 'refer'} to them)` : '') +
    `; they stand in at t = 0 as ${stood.join(', ')}. ` +
    "Recording began after the program allocated them, or the trace's ring buffer was full and dropped its oldest events (record earlier, or with a larger max_entries, to keep everything). " +
    "Replays of PyTorch's policy start from those segments as they stood then, free space included; other strategies start empty, with the blocks allocated at t = 0"
  )
}
