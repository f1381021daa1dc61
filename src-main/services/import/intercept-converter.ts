// Turns the interposer's records (intercept-log.ts) into a recording as a TraceWriter streams it:
// the request trace (device and managed allocations and frees, out-of-memory failures, with
// stream, thread and API as a tag, and native stacks when captured) and the real layout as the
// program saw it, named "cuda (recorded)": each allocation a region of its own at its real address,
// virtual-memory reservations and maps, with the host latency of each call in `aux`. Pinned host
// memory is counted, not traced: it is not device memory.
import type { TraceWriter } from '../trace/file.ts'
import { LayoutOp } from '../../../src-shared/layout.ts'
import { EventKind } from '../trace/model.ts'
import { INTERCEPT_OP_NAMES, InterceptOp, type InterceptHeader, type InterceptRecord } from './intercept-log.ts'

export const RECORDED_CUDA_NAME = 'cuda (recorded)'

const DEVICE_ALLOCS = new Set<number>([
  InterceptOp.cudaMalloc,
  InterceptOp.cudaMallocAsync,
  InterceptOp.cudaMallocFromPoolAsync,
  InterceptOp.cuMemAlloc,
  InterceptOp.cuMemAllocAsync,
  InterceptOp.cuMemAllocFromPoolAsync,
  InterceptOp.cudaMallocManaged,
  InterceptOp.cuMemAllocManaged,
])
const DEVICE_FREES = new Set<number>([InterceptOp.cudaFree, InterceptOp.cudaFreeAsync, InterceptOp.cuMemFree, InterceptOp.cuMemFreeAsync])
const HOST_ALLOCS = new Set<number>([InterceptOp.cudaMallocHost, InterceptOp.cuMemAllocHost])
const HOST_FREES = new Set<number>([InterceptOp.cudaFreeHost, InterceptOp.cuMemFreeHost])
/** cudaErrorMemoryAllocation and CUDA_ERROR_OUT_OF_MEMORY are both 2. */
const OUT_OF_MEMORY_STATUS = 2

interface LiveBlock {
  id: number
  size: number
}

interface PendingCall {
  record: InterceptRecord
  frames: bigint[]
}

export interface InterceptSummary {
  records: number
  allocations: number
  frees: number
  outOfMemory: number
  failedCalls: number
  unknownFrees: number
  liveAtEnd: number
  hostAllocations: number
  maps: number
  unmaps: number
  physicalCreated: number
  peakRequested: number
  threads: number
  /** Calls whose start time preceded the previous record's (threads racing): their time was raised to keep time non-decreasing. */
  reorderedTimes: number
  nestedDriverCalls: number
  unwrappedProcAddresses: number
}

export class InterceptConverter {
  private readonly live = new Map<bigint, LiveBlock>()
  private readonly hostLive = new Map<bigint, number>()
  private readonly pending = new Map<number, PendingCall>() // by thread, when stacks are captured
  private readonly threads = new Set<number>()
  private readonly allocLatency: number[] = []
  private readonly freeLatency: number[] = []
  private nextId = 0
  private lastTime = 0
  private requested = 0
  private readonly counts: InterceptSummary = {
    records: 0,
    allocations: 0,
    frees: 0,
    outOfMemory: 0,
    failedCalls: 0,
    unknownFrees: 0,
    liveAtEnd: 0,
    hostAllocations: 0,
    maps: 0,
    unmaps: 0,
    physicalCreated: 0,
    peakRequested: 0,
    threads: 0,
    reorderedTimes: 0,
    nestedDriverCalls: 0,
    unwrappedProcAddresses: 0,
  }
  private header: InterceptHeader | undefined

  constructor(
    private readonly writer: TraceWriter,
    private readonly name = RECORDED_CUDA_NAME,
  ) {
    writer.declareStrategy(name, 'recorded', { recorder: 'libvramscope_intercept.so' })
  }

  /** The log's header, once read: properties of the recording. */
  start(header: InterceptHeader): void {
    this.header = header
    this.writer.property('pid', String(header.pid))
    this.writer.property('stack_depth', String(header.stackDepth))
    this.writer.property('start_realtime_ns', header.startRealtimeNs.toString())
  }

  add(records: readonly InterceptRecord[]): void {
    const stacks = (this.header?.stackDepth ?? 0) > 0
    for (const r of records) {
      this.counts.records++
      if (r.op === InterceptOp.frame) {
        const owner = this.pending.get(r.thread)
        if (owner && BigInt(owner.record.sequence) === r.aux) owner.frames.push(r.address)
        continue
      }
      if (r.op === InterceptOp.note) {
        this.counts.nestedDriverCalls = r.size
        this.counts.unwrappedProcAddresses = Number(r.aux)
        continue
      }
      if (!stacks) {
        this.convert(r, -1)
        continue
      }
      // A call's frames follow it from the same thread: it is complete at that thread's next call.
      this.emitPending(r.thread)
      this.pending.set(r.thread, { record: r, frames: [] })
    }
  }

  /** Converts what waits for its frames, writes the summary; returns the counts. */
  finish(): InterceptSummary {
    for (const thread of [...this.pending.keys()]) this.emitPending(thread)
    this.counts.liveAtEnd = this.live.size
    this.counts.threads = this.threads.size
    if (this.counts.unknownFrees > 0)
      this.writer.warn(
        `${this.counts.unknownFrees} frees of addresses the recording never saw allocated (allocated before recording began, or through a path the interposer does not see)`,
      )
    if (this.counts.unwrappedProcAddresses > 0)
      this.writer.warn(
        `${this.counts.unwrappedProcAddresses} driver entry points were handed out unwrapped (more variants than the interposer has slots): calls through them are missing`,
      )
    const figures: Record<string, number> = { ...this.counts }
    Object.assign(figures, latencyFigures('allocLatency', this.allocLatency), latencyFigures('freeLatency', this.freeLatency))
    this.writer.summary(this.name, figures)
    return { ...this.counts }
  }

  private emitPending(thread: number): void {
    const call = this.pending.get(thread)
    if (!call) return
    this.pending.delete(thread)
    const stack = call.frames.length > 0 ? this.writer.stack(call.frames.map((pc) => ({ name: `0x${pc.toString(16)}`, filename: '', line: -1 }))) : -1
    this.convert(call.record, stack)
  }

  private convert(r: InterceptRecord, stack: number): void {
    this.threads.add(r.thread)
    let time = r.time
    if (time < this.lastTime) {
      time = this.lastTime
      this.counts.reorderedTimes++
    }
    this.lastTime = time
    const api = INTERCEPT_OP_NAMES[r.op] ?? `op ${r.op}`
    const tag = this.writer.tag(`${api}, thread ${r.thread}`)
    const stream = this.writer.stream(r.stream === 0n ? '0' : `0x${r.stream.toString(16)}`)
    const latency = Math.min(r.durationNs, 0xffffffff)
    const w = this.writer
    if (DEVICE_ALLOCS.has(r.op)) {
      if (r.status === OUT_OF_MEMORY_STATUS) {
        this.counts.outOfMemory++
        w.append(EventKind.oom, 0, r.size, stream, 0, time, stack, tag)
        w.appendLayout(this.name, LayoutOp.failure, 0n, r.size, r.size, stream, time, latency)
        return
      }
      if (r.status !== 0 || r.address === 0n) {
        this.counts.failedCalls++
        return
      }
      const id = this.nextId++
      this.live.set(r.address, { id, size: r.size })
      this.counts.allocations++
      this.allocLatency.push(r.durationNs)
      this.requested += r.size
      if (this.requested > this.counts.peakRequested) this.counts.peakRequested = this.requested
      w.append(EventKind.alloc, id, r.size, stream, 0, time, stack, tag)
      w.appendLayout(this.name, LayoutOp.regionReserve, r.address, r.size, 0, stream, time, r.op)
      w.appendLayout(this.name, LayoutOp.alloc, r.address, r.size, r.size, stream, time, latency)
      return
    }
    if (DEVICE_FREES.has(r.op)) {
      if (r.status !== 0) {
        this.counts.failedCalls++
        return
      }
      const block = this.live.get(r.address)
      if (!block) {
        this.counts.unknownFrees++
        return
      }
      this.live.delete(r.address)
      this.counts.frees++
      this.freeLatency.push(r.durationNs)
      this.requested -= block.size
      w.append(EventKind.free, block.id, 0, stream, 0, time, stack, tag)
      w.appendLayout(this.name, LayoutOp.free, r.address, block.size, block.size, stream, time, latency)
      w.appendLayout(this.name, LayoutOp.regionRelease, r.address, block.size, 0, stream, time, r.op)
      return
    }
    if (r.status !== 0) {
      this.counts.failedCalls++
      return
    }
    if (HOST_ALLOCS.has(r.op)) {
      this.counts.hostAllocations++
      this.hostLive.set(r.address, r.size)
    } else if (HOST_FREES.has(r.op)) {
      this.hostLive.delete(r.address)
    } else if (r.op === InterceptOp.cuMemCreate) {
      this.counts.physicalCreated += r.size
    } else if (r.op === InterceptOp.cuMemMap) {
      this.counts.maps++
      w.appendLayout(this.name, LayoutOp.map, r.address, r.size, 0, stream, time, latency)
    } else if (r.op === InterceptOp.cuMemUnmap) {
      this.counts.unmaps++
      w.appendLayout(this.name, LayoutOp.unmap, r.address, r.size, 0, stream, time, latency)
    } else if (r.op === InterceptOp.cuMemAddressReserve) {
      w.appendLayout(this.name, LayoutOp.vaReserve, r.address, r.size, 0, stream, time, latency)
    } else if (r.op === InterceptOp.cuMemAddressFree) {
      w.appendLayout(this.name, LayoutOp.vaRelease, r.address, r.size, 0, stream, time, latency)
    }
  }
}

function latencyFigures(prefix: string, samples: number[]): Record<string, number> {
  if (samples.length === 0) return {}
  const sorted = Float64Array.from(samples).sort()
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
  return {
    [`${prefix}MeanNs`]: sorted.reduce((a, b) => a + b, 0) / sorted.length,
    [`${prefix}P50Ns`]: at(0.5),
    [`${prefix}P99Ns`]: at(0.99),
    [`${prefix}MaxNs`]: sorted[sorted.length - 1]!,
  }
}
