// The finish of a PyTorch snapshot import, once every event is mapped: the devices' request
// events merged in time order with the annotation markers, and PyTorch's layout of a device as a
// strategy result. SnapshotMapper.finishSteps drives these.
import { CHUNK_ROWS, YIELD_CHUNKS, type EventChunks } from '../../trace/events-builder.ts'
import type { LayoutTrace } from '../../../../src-shared/layout.ts'
import { EventKind, type TraceEvents } from '../../trace/model.ts'
import type { StrategyResult } from '../../../../src-shared/results.ts'
import { field, type Dict } from './snapshot-values.ts'
import { RECORDED_LAYOUT_NAME } from './types.ts'

/** Where mergeEvents is: the devices' events and the markers (by time) copied so far. */
export interface Merge {
  main: EventChunks[]
  out: TraceEvents
  /** Rows of `out` written. */
  at: number
  /** Per device, its next row. */
  cursors: number[]
  /** Index in `order` of the next marker. */
  next: number
  order: number[]
  markerTimes: number[]
  markerIds: number[]
  markerDevices: number[]
  markerStream: number
  /** Per device, the row of `out` each of its events went to (what places its layout's rows: recordedEvents). */
  positions: Uint32Array[]
}

/**
 * Copies runs of events and markers in time order until `out` holds `yieldAt` rows (false) or all
 * of them (true). A plain function, not mergeEvents' generator, for V8 to optimize it early.
 */
export function mergeRuns(merge: Merge, yieldAt: number): boolean {
  const { main, out, cursors, order, markerTimes } = merge
  for (;;) {
    // The device whose next event is earliest; a marker goes before events later than it.
    let best = -1
    let bestTime = Infinity
    for (let d = 0; d < main.length; d++) {
      const c = cursors[d]!
      if (c < main[d]!.length && main[d]!.time(c) < bestTime) {
        best = d
        bestTime = main[d]!.time(c)
      }
    }
    if (merge.next < order.length && (markerTimes[order[merge.next]!]! < bestTime || best < 0)) {
      const m = order[merge.next++]!
      const at = merge.at++
      out.kind[at] = EventKind.marker
      out.id[at] = merge.markerIds[m]!
      out.stream[at] = merge.markerStream
      out.device[at] = merge.markerDevices[m]!
      out.time[at] = markerTimes[m]!
      continue
    }
    if (best < 0) return true
    // The run of this device's events up to the next marker or the next other device's event.
    let limit = merge.next < order.length ? markerTimes[order[merge.next]!]! : Infinity
    for (let d = 0; d < main.length; d++) if (d !== best && cursors[d]! < main[d]!.length) limit = Math.min(limit, main[d]!.time(cursors[d]!))
    const part = main[best]!
    const end = part.runEnd(cursors[best]! + 1, Math.min(part.length, cursors[best]! + YIELD_CHUNKS * CHUNK_ROWS), limit)
    const positions = merge.positions[best]!
    for (let j = cursors[best]!, to = merge.at; j < end; j++, to++) positions[j] = to
    merge.at = part.moveTo(cursors[best]!, end, out, merge.at)
    cursors[best] = end
    if (merge.at >= yieldAt) return false
  }
}

/** PyTorch's own layout of one device as a strategy result. */
export function recordedResult(device: number, layout: LayoutTrace, settings: [string, unknown][], several: boolean): StrategyResult {
  const params: Record<string, unknown> = { device }
  for (const [k, v] of settings) params[k] = v
  return {
    name: several ? `${RECORDED_LAYOUT_NAME}, cuda:${device}` : RECORDED_LAYOUT_NAME,
    strategy: 'pytorch',
    params,
    layout,
  }
}

/** aux of a segment's reservation: 1 small pool, 2 large, 0 unknown. */
export function poolOf(seg: Dict): number {
  const type = field(seg, 'segment_type')
  return type === 'small' ? 1 : type === 'large' ? 2 : 0
}
