/**
 * Where a layout's reserved bytes peak, from its events alone: the event the page puts the playhead
 * at when it opens a trace whose first map is a recorded layout (the renderer finds it from the
 * model, src-renderer/viz/peak.ts sweptPeak), so that a host can cut that map's preview and start
 * the other maps' replays there before a page asks (src-shared/opening.ts).
 */

import { LayoutOp } from './layout.ts'
import { OpenMappings } from './open-mappings.ts'
import type { LayoutOnEvents } from './wire.ts'

/**
 * The first request event after which the layout's reserved bytes were highest: its memory regions
 * and mapped ranges, not bare address space (a VMM reservation). Regions and mappings open and
 * close as the renderer's model has them: a release closes what is open at its address, an unmap
 * ends the part of each mapping it covers, and what opens again at an address still open leaves
 * the first open for good.
 */
export function reservedPeakEvent(l: LayoutOnEvents, events: number): number {
  const delta = new Float64Array(events + 1)
  const add = (event: number, bytes: number) => {
    if (event < events) delta[event]! += bytes
  }
  /** Open regions by address: their size, and whether they are memory (not address space). */
  const regions = new Map<number, { size: number; memory: boolean }>()
  /** Open mappings, each its size. */
  const mappings = new OpenMappings<number>((size) => size)
  for (let i = 0; i < l.op.length; i++) {
    const op = l.op[i]!
    const event = l.event[i]!
    switch (op) {
      case LayoutOp.regionReserve:
      case LayoutOp.vaReserve: {
        const memory = op === LayoutOp.regionReserve
        const size = l.size[i]!
        regions.set(Number(l.address[i]!), { size, memory })
        if (memory) add(event, size)
        break
      }
      case LayoutOp.regionRelease:
      case LayoutOp.vaRelease: {
        const address = Number(l.address[i]!)
        const open = regions.get(address)
        if (open) {
          if (open.memory) add(event, -open.size)
          regions.delete(address)
        }
        break
      }
      case LayoutOp.map: {
        const size = l.size[i]!
        mappings.open(Number(l.address[i]!), size)
        add(event, size)
        break
      }
      case LayoutOp.unmap: {
        const start = Number(l.address[i]!)
        const end = start + l.size[i]!
        mappings.unmap(start, end, (address, _size, mappingEnd) => {
          add(event, -(Math.min(mappingEnd, end) - Math.max(address, start)))
          if (address < start) mappings.open(address, start - address)
          if (mappingEnd > end) mappings.open(end, mappingEnd - end)
        })
        break
      }
    }
  }
  return peakOfDeltas(delta, events).event
}

/** The first event at which the running sum of `delta[0 ..= event]` is highest, and that sum. */
export function peakOfDeltas(delta: Float64Array, events: number): { event: number; reserved: number } {
  let reserved = 0
  let best = { event: 0, reserved: -1 }
  for (let e = 0; e < events; e++) {
    reserved += delta[e]!
    if (reserved > best.reserved) best = { event: e, reserved }
  }
  return best
}
