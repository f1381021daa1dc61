// The device a replay runs on (docs/architecture.md, "The device"): one rule for the CLI's replay,
// the app's replay jobs and the what-if lab. Given (--gpu, the app's field); else what the file
// implies (a recorded out-of-memory's free memory plus reserved; else the GPU the stats beside a
// snapshot name; else a recorded peak above the assumed GPU); else an assumed H100 80GB, said so
// (src-shared/device.ts words it). Also the limit a recorded out-of-memory implies, which the
// device rule reads.
import { isRecorded } from '../../../src-shared/compare.ts'
import { ASSUMED_DEVICE_BYTES, type Device } from '../../../src-shared/device.ts'
import { LayoutOp } from '../../../src-shared/layout.ts'
import { changesReserved, LayoutAccount } from '../../../src-shared/layout-accounting.ts'
import type { StrategyResult } from '../../../src-shared/results.ts'
import type { WhatifReport } from '../../../src-shared/whatif-report.ts'
import { DEFAULT_SIZE_POLICY, allocationSize as requestAllocationSize } from '../pytorch-size-policy.ts'
import { EventKind, type RequestTrace } from '../trace/model.ts'

/** An H100 80GB's memory as cudaMemGetInfo reports it: the default device size. */
export const DEFAULT_DEVICE_BYTES = ASSUMED_DEVICE_BYTES

export type ImpliedLimit = NonNullable<WhatifReport['implied']>

/** PyTorch's round_size and get_allocation_size for a request, default settings: the least a failed request asked of the device. */
export function allocationSize(size: number): number {
  return requestAllocationSize(size, DEFAULT_SIZE_POLICY)
}

/**
 * The device limit a recording's first out-of-memory implies: the run reached `low` with no
 * failure, as PyTorch's cap check counts it (reserved memory before a request that obtained
 * memory plus the request's whole allocation size: with expandable segments more than the pages
 * mapped where a free tail served part of it), and at the failure (after PyTorch released what it
 * could) reserved memory plus the segment the request needed was more than the limit. Undefined
 * without an out-of-memory or a recorded layout.
 */
export function impliedLimit(trace: RequestTrace, recorded: StrategyResult | undefined): ImpliedLimit | undefined {
  const e = trace.events
  let oom = -1
  for (let i = 0; i < e.kind.length; i++)
    if (e.kind[i] === EventKind.oom) {
      oom = i
      break
    }
  const layout = recorded?.layout
  if (oom < 0 || !layout) return undefined
  const time = e.time[oom]!
  // Reserved bytes by the one accounting (src-shared/layout-accounting.ts).
  const account = new LayoutAccount()
  let reached = 0
  // Reserved memory before the maps of the request they serve (its alloc follows them), or -1.
  let beforeMaps = -1
  for (let k = 0; k < layout.op.length; k++) {
    const t = layout.time[k]!
    if (t > time) break
    const op = layout.op[k]!
    if (op === LayoutOp.map && beforeMaps < 0) beforeMaps = account.reserved
    if (changesReserved(op)) account.apply(op, Number(layout.address[k]!), layout.size[k]!)
    else if (op === LayoutOp.alloc && beforeMaps >= 0) {
      // alloc_block checks total_allocated_memory + alloc_size against the limit before it maps
      // only what the free tail lacks; an expandable block is never left unsplit by 512 B or more,
      // so its recorded size is the request's round_size.
      reached = Math.max(reached, beforeMaps + allocationSize(layout.size[k]!))
      beforeMaps = -1
    } else if (op === LayoutOp.failure) beforeMaps = -1
    if (account.reserved > reached) reached = account.reserved
  }
  const reserved = account.reserved
  const size = e.size[oom]!
  const freeText = trace.meta.properties['pytorch.oom.device_free']
  const deviceFree = freeText ? Number(freeText.split(',')[0]) : undefined
  const need = allocationSize(size)
  const device = deviceFree !== undefined && Number.isFinite(deviceFree) && deviceFree < need
  return {
    lowBytes: reached,
    reservedBytes: reserved,
    highBytes: device ? reserved + deviceFree! + 1 : reserved + need,
    size,
    stream: trace.tables.streams[e.stream[oom]!] ?? String(e.stream[oom]),
    event: oom,
    ...(deviceFree !== undefined && Number.isFinite(deviceFree) && { deviceFree }),
    source: device ? 'device' : 'fraction',
  }
}

/**
 * The limit the lab replays a recording that ended in an out-of-memory under: where the device was
 * full, what the file says it held (reserved at the out-of-memory plus its device_free); else the
 * least the recording allows. Never below what the run reached (`lowBytes`): a file whose figures
 * say less (another process took memory between) gives that, and the report says so
 * (`whatifWords`).
 */
export function impliedLimitBytes(implied: ImpliedLimit): number {
  if (implied.source === 'device' && implied.deviceFree !== undefined) return Math.max(implied.reservedBytes + implied.deviceFree, implied.lowBytes)
  return implied.lowBytes
}

/**
 * The device's memory: given; else what the file implies, the larger of an out-of-memory's free
 * memory plus reserved at it (the device held at least that) and a recorded peak reserved above
 * the assumed GPU; else assumed, an H100 80GB. A snapshot does not name its GPU; the stats that
 * record --pytorch writes beside it do (DEVICE_PROPERTIES, read at the import): after a given
 * size and a recorded out-of-memory's figure, the GPU they name.
 */
export function deviceOf(given: number | undefined, implied: ImpliedLimit | undefined, recorded: StrategyResult | undefined, trace?: RequestTrace): Device {
  if (given !== undefined) return { bytes: given, source: 'option' }
  const named = trace && namedDevice(trace)
  const atOom = implied?.deviceFree !== undefined && implied.deviceFree >= 0 ? implied.reservedBytes + implied.deviceFree : 0
  const recordedPeak = recorded?.summary?.['peakReserved'] ?? 0
  // What the program could use, measured at its out-of-memory, is nearer the truth than the GPU's
  // nominal total (the CUDA context and other processes hold some): it stays, named where known.
  if (atOom > 0)
    return { bytes: Math.max(atOom, recordedPeak), source: 'oom', ...(named?.name && { name: named.name }), ...(named?.from && { from: named.from }) }
  if (named) return named
  if (recordedPeak > DEFAULT_DEVICE_BYTES) return { bytes: recordedPeak, source: 'recorded-peak' }
  return { bytes: DEFAULT_DEVICE_BYTES, source: 'assumed' }
}

/** The device an opened input's replay runs on: `given` bytes, else what its trace and recorded layout imply, else assumed. */
export function deviceOfInput(input: { trace: RequestTrace; strategies: readonly StrategyResult[] }, given?: number): Device {
  const recorded = input.strategies.find(isRecorded)
  return deviceOf(given, impliedLimit(input.trace, recorded), recorded, input.trace)
}

/** Trace properties that name the recording's GPU: its memory in bytes, its name, and the file they were read from. */
export const DEVICE_PROPERTIES = { bytes: 'device.total_bytes', name: 'device.name', from: 'device.from' } as const

/** The GPU the trace's properties name (DEVICE_PROPERTIES), if they name one with a whole positive size. */
export function namedDevice(trace: RequestTrace): Device | undefined {
  const p = trace.meta.properties
  const bytes = Number(p[DEVICE_PROPERTIES.bytes])
  if (!Number.isSafeInteger(bytes) || bytes <= 0) return undefined
  const name = p[DEVICE_PROPERTIES.name]
  const from = p[DEVICE_PROPERTIES.from]
  return { bytes, source: 'file', ...(name && { name }), ...(from && { from }) }
}
