/**
 * The one accounting of a layout trace (docs/architecture.md#metrics): requested, rounded and
 * reserved bytes, address space, device calls and failures after each layout event, by one set of
 * rules that every TypeScript reader follows by calling this module: the renderer's model (its
 * figures at the playhead and its peak), the host's opening peak, `vramscope top --at peak`, the
 * out-of-memory summary, the limit an out-of-memory implies and the metrics of a recorded layout.
 * The native replay's counters are the reference: a test holds this sweep of every replayed layout
 * equal to the native summary on every fixture (test/unit/shared/layout-accounting.test.ts).
 *
 * The rules, where a layout could be read two ways:
 * - A region release closes the region open at its address (and nothing when none is); a region
 *   reserved at an address still open leaves the first open for good (its bytes stay reserved).
 * - A map opens a mapping (one already open at its address stays open for good); an unmap ends the
 *   part of each open mapping it covers (OpenMappings), what stays mapped of it staying reserved.
 * - A trim releases memory with no address (a stream-ordered pool trimming its cache: async_pool)
 *   and takes its bytes off reserved, unless the layout has released memory by address before it
 *   (caching's empty_cache releases its segments, then traces a trim of their sum: counting it
 *   again would count the release twice). Reserved never goes below 0.
 * - A pending free (freed on another stream, waiting for its event) counts in neither requested
 *   nor rounded bytes; its completion changes neither again.
 */

import { LayoutOp } from './layout.ts'
import { OpenMappings } from './open-mappings.ts'

/** Device calls by kind, named as the replay's summary names them (`deviceCalls.regionAlloc`…). */
export interface LayoutDeviceCalls {
  regionAlloc: number
  regionFree: number
  vaReserve: number
  vaRelease: number
  map: number
  unmap: number
}

/** The running figures of one layout, applied one event at a time. */
export class LayoutAccount {
  /** Bytes the program asked for and holds. */
  requested = 0
  /** Bytes of the blocks handed out for them. */
  rounded = 0
  /** Address space reserved (VMM), mapped or not. */
  addressSpace = 0
  failures = 0
  readonly calls: LayoutDeviceCalls = { regionAlloc: 0, regionFree: 0, vaReserve: 0, vaRelease: 0, map: 0, unmap: 0 }
  /** Memory in open regions and mappings, before trims. */
  private memory = 0
  private trimmed = 0
  private releasedByAddress = false
  /** Open regions by address: their size and whether they are memory (not bare address space). */
  private readonly regions = new Map<number, { size: number; memory: boolean }>()
  private readonly mappings = new OpenMappings<number>((size) => size)

  /** Physical memory obtained from the device and not yet returned. */
  get reserved(): number {
    return Math.max(0, this.memory - this.trimmed)
  }

  /** Every device call counted so far. */
  get deviceCalls(): number {
    const c = this.calls
    return c.regionAlloc + c.regionFree + c.vaReserve + c.vaRelease + c.map + c.unmap
  }

  /**
   * One layout event: its op, address (exact below 2^53), size (the block's rounded size, the
   * region's, the mapping's, the bytes trimmed) and, for alloc and free events, the requested bytes.
   */
  apply(op: number, address: number, size: number, requested = 0): void {
    switch (op) {
      case LayoutOp.alloc:
        this.requested += requested
        this.rounded += size
        break
      case LayoutOp.free:
      case LayoutOp.freePending:
        this.requested -= requested
        this.rounded -= size
        break
      case LayoutOp.regionReserve:
      case LayoutOp.vaReserve: {
        const memory = op === LayoutOp.regionReserve
        if (memory) {
          this.calls.regionAlloc++
          this.memory += size
        } else {
          this.calls.vaReserve++
          this.addressSpace += size
        }
        this.regions.set(address, { size, memory })
        break
      }
      case LayoutOp.regionRelease:
      case LayoutOp.vaRelease: {
        if (op === LayoutOp.regionRelease) {
          this.calls.regionFree++
          this.releasedByAddress = true
        } else this.calls.vaRelease++
        const open = this.regions.get(address)
        if (open) {
          if (open.memory) this.memory -= open.size
          else this.addressSpace -= open.size
          this.regions.delete(address)
        }
        break
      }
      case LayoutOp.map:
        this.calls.map++
        this.mappings.open(address, size)
        this.memory += size
        break
      case LayoutOp.unmap: {
        this.calls.unmap++
        this.releasedByAddress = true
        const end = address + size
        this.mappings.unmap(address, end, (start, _size, mappingEnd) => {
          this.memory -= Math.min(mappingEnd, end) - Math.max(start, address)
          if (start < address) this.mappings.open(start, address - start)
          if (mappingEnd > end) this.mappings.open(end, mappingEnd - end)
        })
        break
      }
      case LayoutOp.trim:
        if (!this.releasedByAddress) this.trimmed += size
        break
      case LayoutOp.failure:
        this.failures++
        break
      case LayoutOp.reset: // an arena's step boundary: it takes back every block, live or not
        this.requested = 0
        this.rounded = 0
        break
    }
  }
}

/** Whether an op can change reserved bytes or address space (what a sweep of reserved bytes alone reads). */
export function changesReserved(op: number): boolean {
  return (op >= LayoutOp.regionReserve && op <= LayoutOp.unmap) || op === LayoutOp.trim
}

/** A layout's columns as the sweep reads them: addresses as u64 or numbers; `event` where the layout is placed on request events. */
export interface SweptLayout {
  op: Uint8Array
  address: BigUint64Array | Float64Array
  size: Float64Array | Uint32Array
  requested?: Float64Array | Uint32Array
  event?: Uint32Array
}

/** What one pass over a layout finds. */
export interface LayoutSweep {
  peakRequested: number
  peakRounded: number
  /** The highest reserved bytes after any request event (after any layout event, where the layout has no request events). */
  peakReserved: number
  /** The first request event after which reserved bytes were at the peak (-1: the layout has no request events, or reserves nothing). */
  peakReservedEvent: number
  /** The layout event at which the peak was first reached (the last of its request event's, where events are given). */
  peakReservedLayoutEvent: number
  finalRequested: number
  finalRounded: number
  finalReserved: number
  finalAddressSpace: number
  failures: number
  deviceCalls: number
  calls: LayoutDeviceCalls
}

/**
 * One pass over a layout. With request events (`layout.event`), peaks are of the state after each
 * request event, as the native replay measures them (a region reserved and released within one
 * request leaves no peak); without, after each layout event. `upTo`: only the layout events of
 * request events below it (or, with no events, the layout events below it). `each`: called after
 * every layout event with its index and the account (a series of figures).
 */
export function sweepLayout(layout: SweptLayout, options: { upTo?: number; each?: (k: number, account: LayoutAccount) => void } = {}): LayoutSweep {
  const account = new LayoutAccount()
  const { op, address, size, requested, event } = layout
  const upTo = options.upTo ?? Infinity
  const each = options.each
  const n = op.length
  let peakRequested = 0
  let peakRounded = 0
  let peakReserved = 0
  let peakEvent = -1
  let peakLayoutEvent = -1
  for (let k = 0; k < n; k++) {
    const e = event ? event[k]! : k
    if (e >= upTo) break
    account.apply(op[k]!, Number(address[k]!), size[k]!, requested ? requested[k]! : 0)
    each?.(k, account)
    // The state after a request event is the state after its last layout event.
    if (event && k + 1 < n && event[k + 1] === e) continue
    if (account.requested > peakRequested) peakRequested = account.requested
    if (account.rounded > peakRounded) peakRounded = account.rounded
    if (account.reserved > peakReserved) {
      peakReserved = account.reserved
      peakEvent = event ? e : -1
      peakLayoutEvent = k
    }
  }
  return {
    peakRequested,
    peakRounded,
    peakReserved,
    peakReservedEvent: peakEvent,
    peakReservedLayoutEvent: peakLayoutEvent,
    finalRequested: account.requested,
    finalRounded: account.rounded,
    finalReserved: account.reserved,
    finalAddressSpace: account.addressSpace,
    failures: account.failures,
    deviceCalls: account.deviceCalls,
    calls: { ...account.calls },
  }
}

/**
 * Reserved bytes and address space as steps over request events: after event `event[i]` (and
 * until the next step) the layout reserved `reserved[i]` and `addressSpace[i]`. One step per
 * request event that changed either; events ascending. Built as the layout's events arrive
 * (`add`), so the renderer's model makes it piece by piece.
 */
export class ReservedSteps {
  private readonly account = new LayoutAccount()
  private events: number[] = []
  private reserved: number[] = []
  private addressSpace: number[] = []

  /** One layout event, in order, with its request event. */
  add(op: number, address: number, size: number, event: number): void {
    if (!changesReserved(op)) return
    const a = this.account
    a.apply(op, address, size)
    const last = this.events.length - 1
    if (last >= 0 && this.events[last] === event) {
      this.reserved[last] = a.reserved
      this.addressSpace[last] = a.addressSpace
    } else {
      this.events.push(event)
      this.reserved.push(a.reserved)
      this.addressSpace.push(a.addressSpace)
    }
  }

  finish(): Steps {
    return { event: Uint32Array.from(this.events), reserved: Float64Array.from(this.reserved), addressSpace: Float64Array.from(this.addressSpace) }
  }
}

/** ReservedSteps' result: after `event[i]` (until the next step), `reserved[i]` and `addressSpace[i]`. */
export interface Steps {
  event: Uint32Array
  reserved: Float64Array
  addressSpace: Float64Array
}

/** The index of the last step at or before request event `e`, or -1 when none is. */
export function stepAt(steps: Steps, e: number): number {
  const t = steps.event
  let lo = 0
  let hi = t.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (t[mid]! <= e) lo = mid + 1
    else hi = mid
  }
  return lo - 1
}

/** Reserved bytes and address space after request event `e`. */
export function reservedAt(steps: Steps, e: number): { reserved: number; addressSpace: number } {
  const i = stepAt(steps, e)
  return i < 0 ? { reserved: 0, addressSpace: 0 } : { reserved: steps.reserved[i]!, addressSpace: steps.addressSpace[i]! }
}

/** The first request event below `events` after which reserved bytes were highest, and the bytes (event 0 and 0 bytes when nothing was reserved). */
export function peakOfSteps(steps: Steps, events: number): { event: number; reserved: number } {
  let best = { event: 0, reserved: 0 }
  for (let i = 0; i < steps.event.length && steps.event[i]! < events; i++)
    if (steps.reserved[i]! > best.reserved) best = { event: steps.event[i]!, reserved: steps.reserved[i]! }
  return best
}

/**
 * The first request event below `events` after which a layout placed on request events reserved
 * the most (0 when it reserves nothing): where the page puts the playhead when the layout is the
 * first map, so a host cuts that map's preview and starts the other maps' replays there before a
 * page asks (src-shared/opening.ts); the page finds the same event from its model (peakOfSteps).
 */
export function reservedPeakEvent(layout: SweptLayout & { event: Uint32Array }, events: number): number {
  return Math.max(0, sweepLayout(layout, { upTo: events }).peakReservedEvent)
}
