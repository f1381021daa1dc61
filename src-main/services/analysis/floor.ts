// The floor of a request trace (docs/architecture.md#the-floor): the most bytes live at once, as
// requested and as PyTorch rounds each block (512 B), which no allocator can reserve less than. One
// pass over the events, a slot per block id: linear in events, nothing that grows with bytes.
// The blocks are the replay's (native/core/replay/replay.cpp): an alloc of 0 bytes holds none, an
// alloc of an id still live leaves the older block live to the end, a free of an id not live frees
// nothing.
import { roundSize } from '../pytorch-size-policy.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'

export interface TraceFloor {
  /** The peak of requested bytes live, and the first event after which it was reached (-1: no block). */
  peakLiveBytes: number
  peakLiveEvent: number
  /** The peak of live bytes with each block rounded as PyTorch rounds it (512 B steps, at least 512 B). */
  peakLiveRoundedBytes: number
  peakLiveRoundedEvent: number
}

export function floorOf(trace: Pick<RequestTrace, 'events'>): TraceFloor {
  const { kind, id, size } = trace.events
  const n = kind.length
  let ids = 0
  for (let i = 0; i < n; i++) if (kind[i] === EventKind.alloc && id[i]! >= ids) ids = id[i]! + 1
  // The bytes of the block each id holds now, 0 where it holds none.
  const requested = new Float64Array(ids)
  const rounded = new Float64Array(ids)
  let live = 0
  let liveRounded = 0
  const floor: TraceFloor = { peakLiveBytes: 0, peakLiveEvent: -1, peakLiveRoundedBytes: 0, peakLiveRoundedEvent: -1 }
  for (let i = 0; i < n; i++) {
    const k = kind[i]
    if (k === EventKind.alloc) {
      const bytes = size[i]!
      const r = bytes === 0 ? 0 : roundSize(bytes)
      requested[id[i]!] = bytes
      rounded[id[i]!] = r
      live += bytes
      liveRounded += r
      if (live > floor.peakLiveBytes) {
        floor.peakLiveBytes = live
        floor.peakLiveEvent = i
      }
      if (liveRounded > floor.peakLiveRoundedBytes) {
        floor.peakLiveRoundedBytes = liveRounded
        floor.peakLiveRoundedEvent = i
      }
    } else if (k === EventKind.free && id[i]! < ids) {
      live -= requested[id[i]!]!
      liveRounded -= rounded[id[i]!]!
      requested[id[i]!] = 0
      rounded[id[i]!] = 0
    }
  }
  return floor
}
