// The out-of-memory summary (src-shared/oom.ts) of a request trace with a recorded out-of-memory:
// the failed request and its stack's headline frame from the trace; reserved, free and the largest
// free block from the recorded layout at the failure; the limit the recording implies from the
// what-if lab (whatif.ts, impliedLimit).
import { isRecorded } from '../../../src-shared/compare.ts'
import { LayoutOp, type LayoutTrace } from '../../../src-shared/layout.ts'
import { headlineFrame, type OomSummary } from '../../../src-shared/oom.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'
import { allocationSize, impliedLimit } from '../whatif/whatif.ts'

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

/**
 * What the recorded layout held at `time` (its events up to and including that time): segments
 * (cudaMalloc regions; pages mapped into expandable segments, adjacent ones joined), the live
 * blocks in them (a block freed on another stream and still pending counts as live), and the
 * gaps between those blocks, the free memory the allocator could place a block in.
 */
export function heldAt(layout: LayoutTrace, time: number): Held {
  const regions = new Map<bigint, number>()
  // Mapped memory in pages of PAGE bytes (maps and unmaps need not pair: an unmap may take back
  // the end of a stretch mapped in one go).
  const pages = new Set<bigint>()
  const blocks = new Map<bigint, number>()
  for (let k = 0; k < layout.op.length; k++) {
    if (layout.time[k]! > time) break
    const a = layout.address[k]!
    switch (layout.op[k]) {
      case LayoutOp.regionReserve:
        regions.set(a, layout.size[k]!)
        break
      case LayoutOp.regionRelease:
        regions.delete(a)
        break
      case LayoutOp.map:
      case LayoutOp.unmap: {
        const n = BigInt(Math.ceil(layout.size[k]! / PAGE))
        for (let p = 0n; p < n; p++)
          if (layout.op[k] === LayoutOp.map) pages.add(a / BIG_PAGE + p)
          else pages.delete(a / BIG_PAGE + p)
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
  // Mapped pages next to each other are one stretch of an expandable segment.
  const joined: [bigint, number][] = []
  for (const p of [...pages].sort((x, y) => (x < y ? -1 : 1))) {
    const last = joined.at(-1)
    if (last && last[0] + BigInt(last[1]) === p * BIG_PAGE) last[1] += PAGE
    else joined.push([p * BIG_PAGE, PAGE])
  }
  const ranges: [bigint, number][] = [...regions, ...joined]
  ranges.sort((x, y) => (x[0] < y[0] ? -1 : 1))
  const live = [...blocks].sort((x, y) => (x[0] < y[0] ? -1 : 1))
  let reserved = 0
  let allocated = 0
  let largestFree = 0
  let b = 0
  for (const [start, size] of ranges) {
    reserved += size
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
