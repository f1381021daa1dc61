// The out-of-memory summary (src-shared/oom.ts) of a request trace with a recorded out-of-memory:
// the failed request and its stack's headline frame from the trace; reserved, free and the largest
// free block from the recorded layout at the failure; the limit the recording implies from the
// what-if lab (whatif.ts, impliedLimit).
import { isRecorded } from '../../../src-shared/compare.ts'
import { LayoutOp, type LayoutTrace } from '../../../src-shared/layout.ts'
import { LayoutAccount } from '../../../src-shared/layout-accounting.ts'
import { headlineFrame, type OomSummary } from '../../../src-shared/oom.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'
import { allocationSize, impliedLimit } from '../replay/device.ts'

/** The granule expandable segments map memory in (PyTorch's 2 MiB pages). */
const PAGE = 2 << 20
const BIG_PAGE = BigInt(PAGE)

interface Held {
  reserved: number
  allocated: number
  free: number
  largestFree: number
  segments: number
}

/** Pages [first, end) (in PAGE units) that one map or unmap sets. */
interface Paint {
  first: number
  end: number
  mapped: boolean
}

/**
 * The stretches of mapped memory (address, bytes) after these maps and unmaps in order: the last
 * one over a page decides it, and adjacent mapped pages are one stretch of an expandable segment.
 * O(n log n) in the events over a segment tree of their endpoints, whatever the bytes they cover.
 */
function mappedStretches(paints: readonly Paint[]): [bigint, number][] {
  if (paints.length === 0) return []
  const edges = [...new Set(paints.flatMap((p) => [p.first, p.end]))].sort((x, y) => x - y)
  const leaves = edges.length - 1
  const indexOf = new Map(edges.map((e, i) => [e, i] as [number, number]))
  // latest[node]: 1 + the index of the last paint that covered the node's whole span (0: none).
  // Paints come in order, so a later one is a larger index: a leaf's paint is the largest on its path.
  let size = 1
  while (size < leaves) size *= 2
  const latest = new Int32Array(2 * size)
  paints.forEach((p, i) => {
    let lo = indexOf.get(p.first)! + size
    let hi = indexOf.get(p.end)! + size
    for (; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) latest[lo++] = i + 1
      if (hi & 1) latest[--hi] = i + 1
    }
  })
  const stretches: [bigint, number][] = []
  let open = -1
  for (let leaf = 0; leaf <= leaves; leaf++) {
    let paint = 0
    if (leaf < leaves) for (let node = leaf + size; node >= 1; node >>= 1) paint = Math.max(paint, latest[node]!)
    const mapped = paint > 0 && paints[paint - 1]!.mapped
    if (mapped && open < 0) open = edges[leaf]!
    else if (!mapped && open >= 0) {
      stretches.push([BigInt(open) * BIG_PAGE, (edges[leaf]! - open) * PAGE])
      open = -1
    }
  }
  return stretches
}

/**
 * What the recorded layout held at `time` (its events up to and including that time): segments
 * (cudaMalloc regions; pages mapped into expandable segments, adjacent ones joined), the live
 * blocks in them (a block freed on another stream and still pending counts as live), and the
 * gaps between those blocks, the free memory the allocator could place a block in.
 */
export function heldAt(layout: LayoutTrace, time: number): Held {
  const regions = new Map<bigint, number>()
  // Maps and unmaps need not pair (an unmap may take back the end of a stretch mapped in one go):
  // each sets the pages it covers, in order; mappedStretches paints them.
  const paints: Paint[] = []
  const blocks = new Map<bigint, number>()
  // Reserved bytes by the one accounting (src-shared/layout-accounting.ts); the ranges below place the free gaps.
  const account = new LayoutAccount()
  for (let k = 0; k < layout.op.length; k++) {
    if (layout.time[k]! > time) break
    const a = layout.address[k]!
    account.apply(layout.op[k]!, Number(a), layout.size[k]!, layout.requested[k]!)
    switch (layout.op[k]) {
      case LayoutOp.regionReserve:
        regions.set(a, layout.size[k]!)
        break
      case LayoutOp.regionRelease:
        regions.delete(a)
        break
      case LayoutOp.map:
      case LayoutOp.unmap: {
        const first = Number(a / BIG_PAGE)
        const pages = Math.ceil(layout.size[k]! / PAGE)
        if (pages > 0) paints.push({ first, end: first + pages, mapped: layout.op[k] === LayoutOp.map })
        break
      }
      case LayoutOp.alloc:
        blocks.set(a, layout.size[k]!)
        break
      case LayoutOp.free:
      case LayoutOp.freeCompleted:
        blocks.delete(a)
        break
    }
  }
  const joined = mappedStretches(paints)
  const ranges: [bigint, number][] = [...regions, ...joined]
  ranges.sort((x, y) => (x[0] < y[0] ? -1 : 1))
  const live = [...blocks].sort((x, y) => (x[0] < y[0] ? -1 : 1))
  const reserved = account.reserved
  let allocated = 0
  let largestFree = 0
  let b = 0
  for (const [start, size] of ranges) {
    const end = start + BigInt(size)
    while (b < live.length && live[b]![0] < start) b++
    let cursor = start
    for (; b < live.length && live[b]![0] < end; b++) {
      const [a, s] = live[b]!
      if (a > cursor) largestFree = Math.max(largestFree, Number(a - cursor))
      allocated += s
      const blockEnd = a + BigInt(s)
      if (blockEnd > cursor) cursor = blockEnd
    }
    if (end > cursor) largestFree = Math.max(largestFree, Number(end - cursor))
  }
  return { reserved, allocated, free: Math.max(0, reserved - allocated), largestFree, segments: ranges.length }
}

/** The summary of the trace's first recorded out-of-memory; undefined when it has none. */
export function oomSummary(trace: RequestTrace, stored: readonly StrategyResult[] = []): OomSummary | undefined {
  const e = trace.events
  let event = -1
  let count = 0
  for (let i = 0; i < e.kind.length; i++)
    if (e.kind[i] === EventKind.oom) {
      if (event < 0) event = i
      count++
    }
  if (event < 0) return undefined
  const size = e.size[event]!
  const need = allocationSize(size)
  const stack = e.stack[event]!
  const frames = stack >= 0 ? [...(trace.tables.stacks[stack] ?? [])].map((f) => trace.tables.frames[f]!).filter(Boolean) : []
  const frame = headlineFrame(frames)
  const recorded = stored.find(isRecorded)
  const layout = recorded?.layout ? heldAt(recorded.layout, e.time[event]!) : undefined
  const implied = impliedLimit(trace, recorded)
  return {
    event,
    count,
    size,
    need,
    stream: trace.tables.streams[e.stream[event]!] ?? String(e.stream[event]),
    ...(frame && { frame: { name: frame.name, filename: frame.filename, line: frame.line } }),
    ...(layout && { layout }),
    ...(implied && {
      limit: {
        lowBytes: implied.lowBytes,
        highBytes: implied.highBytes,
        source: implied.source,
        ...(implied.deviceFree !== undefined && { deviceFree: implied.deviceFree }),
      },
    }),
    verdict: !layout ? 'unknown' : layout.free >= size ? 'fragmentation' : 'shortage',
  }
}
