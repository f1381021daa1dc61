// What a reader's result must hold to (shared by the seeded fuzzer, fuzz-runner.ts, and the
// Jazzer.js targets in test/fuzz/), and fixChecksums, which lets damage to a trace file reach the
// decoder instead of stopping at its CRC.
import { BEFORE_PROFILER_TAG, type KinetoImport } from '../../src-main/services/import/kineto.ts'
import type { NsysImport } from '../../src-main/services/import/nsys.ts'
import type { PytorchImport } from '../../src-main/services/import/pytorch/index.ts'
import type { RmmImport } from '../../src-main/services/import/rmm.ts'
import type { UmpireImport } from '../../src-main/services/import/umpire.ts'
import { readMessage } from '../../src-main/services/trace/arrow-messages.ts'
import { crc32Hex } from '../../src-main/services/trace/crc32.ts'
import type { TraceFileContents } from '../../src-main/services/trace/file.ts'
import { EventKind, type RequestTrace } from '../../src-main/services/trace/model.ts'

/**
 * Rewrites every chunk's stored CRC-32 to match its (damaged) bytes, so the damage reaches the
 * decoder instead of stopping at the checksum. The stored value is found as its 8 hex characters
 * inside the chunk's schema message and overwritten in place.
 */
export function fixChecksums(b: Uint8Array): Uint8Array {
  const out = b.slice()
  let at = 0
  try {
    while (at < out.length) {
      const schema = readMessage(out, at)
      if (schema.header.kind !== 'schema') break
      const stored = schema.header.metadata.get('vramscope.crc32')
      let end = schema.end
      for (;;) {
        const m = readMessage(out, end)
        end = m.end
        if (m.header.kind === 'eos') break
      }
      if (stored && /^[0-9a-f]{8}$/.test(stored)) {
        const fresh = crc32Hex(out.subarray(schema.end, end - 8))
        const position = indexOfAscii(out.subarray(at, schema.end), stored)
        if (position >= 0) for (let k = 0; k < 8; k++) out[at + position + k] = fresh.charCodeAt(k)
      }
      at = end
    }
  } catch {
    // unframeable from here on: leave it
  }
  return out
}

function indexOfAscii(haystack: Uint8Array, ascii: string): number {
  outer: for (let i = 0; i + ascii.length <= haystack.length; i++) {
    for (let k = 0; k < ascii.length; k++) if (haystack[i + k] !== ascii.charCodeAt(k)) continue outer
    return i
  }
  return -1
}

export function checkTraceContents(c: TraceFileContents): void {
  checkTrace(c.trace)
  for (const s of c.strategies) {
    if (s.layout) {
      const n = s.layout.op.length
      for (const column of Object.values(s.layout)) if ((column as ArrayLike<unknown>).length !== n) throw new Error(`layout of ${s.name}: ragged columns`)
    }
    if (s.metrics) {
      const n = s.metrics.time.length
      for (const column of Object.values(s.metrics)) if ((column as Float64Array).length !== n) throw new Error(`metrics of ${s.name}: ragged columns`)
    }
  }
}

/** What any consumer may assume of a trace a reader returned. */
export function checkTrace(t: RequestTrace): void {
  const e = t.events
  const n = e.kind.length
  for (const column of Object.values(e)) if ((column as ArrayLike<number>).length !== n) throw new Error('ragged event columns')
  const { streams, stacks, tags, markers, frames } = t.tables
  for (let i = 0; i < n; i++) {
    const kind = e.kind[i]!
    if (kind > EventKind.trim) throw new Error(`event ${i}: kind ${kind}`)
    if (kind === EventKind.trim && (e.id[i] !== 0 || !(e.size[i]! >= 0))) throw new Error(`event ${i}: trim id ${e.id[i]} size ${e.size[i]}`)
    if (kind !== EventKind.marker && e.stream[i]! >= streams.length) throw new Error(`event ${i}: stream out of range`)
    if (e.stack[i]! < -1 || e.stack[i]! >= stacks.length) throw new Error(`event ${i}: stack out of range`)
    if (e.tag[i]! < -1 || e.tag[i]! >= tags.length) throw new Error(`event ${i}: tag out of range`)
    if (kind === EventKind.marker && e.id[i]! >= markers.length) throw new Error(`event ${i}: marker out of range`)
    if (!Number.isFinite(e.time[i]!) || !Number.isSafeInteger(e.size[i]!) || e.size[i]! < 0) throw new Error(`event ${i}: bad time or size`)
  }
  for (const s of stacks) for (const f of s) if (f >= frames.length) throw new Error('stack frame out of range')
  if (typeof t.meta.source !== 'string' || !Array.isArray(t.meta.warnings)) throw new Error('bad meta')
}

export function checkRmm(result: RmmImport): void {
  checkTrace(result.trace)
  if (result.trace.meta.source !== 'rmm-log') throw new Error('wrong source')
  for (let i = 1; i < result.trace.events.time.length; i++)
    if (result.trace.events.time[i]! < result.trace.events.time[i - 1]!) throw new Error(`time goes backwards at event ${i}`)
}

/** A successful import must hold together: same-length columns, indices inside their tables. */
export function checkPytorchImport(result: PytorchImport): void {
  const e = result.trace.events
  const n = e.kind.length
  for (const column of [e.id, e.size, e.stream, e.device, e.time, e.stack, e.tag]) if (column.length !== n) throw new Error('event columns differ in length')
  const t = result.trace.tables
  const allocated = new Set<number>()
  for (let i = 0; i < n; i++) {
    const kind = e.kind[i]!
    if (kind > EventKind.trim) throw new Error(`event ${i}: kind ${kind}`)
    if (kind === EventKind.trim && (e.id[i] !== 0 || !(e.size[i]! >= 0))) throw new Error(`event ${i}: trim id ${e.id[i]} size ${e.size[i]}`)
    if (!Number.isFinite(e.time[i]!) || e.time[i]! < 0) throw new Error(`event ${i}: time ${e.time[i]}`)
    if (e.stream[i]! >= Math.max(1, t.streams.length)) throw new Error(`event ${i}: stream ${e.stream[i]} of ${t.streams.length}`)
    if (e.stack[i]! < -1 || e.stack[i]! >= t.stacks.length) throw new Error(`event ${i}: stack ${e.stack[i]}`)
    if (e.tag[i]! < -1 || e.tag[i]! >= t.tags.length) throw new Error(`event ${i}: tag ${e.tag[i]}`)
    if (kind === EventKind.alloc) {
      if (allocated.has(e.id[i]!)) throw new Error(`event ${i}: id ${e.id[i]} allocated twice`)
      allocated.add(e.id[i]!)
    }
    if (kind === EventKind.free && !allocated.has(e.id[i]!)) throw new Error(`event ${i}: free of id ${e.id[i]} never allocated`)
    if (kind === EventKind.marker && e.id[i]! >= t.markers.length) throw new Error(`event ${i}: marker ${e.id[i]}`)
  }
  for (let id = 0; id < allocated.size; id++) if (!allocated.has(id)) throw new Error(`ids not dense: ${id} missing`)
  for (const stack of t.stacks) for (const f of stack) if (f >= t.frames.length) throw new Error(`stack frame ${f}`)
  for (const r of result.recorded) {
    const l = r.layout!
    const m = l.op.length
    for (const column of [l.address, l.size, l.requested, l.stream, l.time, l.aux]) if (column.length !== m) throw new Error('layout columns differ in length')
    for (let i = 0; i < m; i++) {
      if (l.op[i]! > 14) throw new Error(`layout ${i}: op ${l.op[i]}`)
      if (!Number.isFinite(l.time[i]!) || l.time[i]! < 0) throw new Error(`layout ${i}: time ${l.time[i]}`)
    }
  }
}

/**
 * A profiler trace's import: the trace holds together, in time order, its counts add up; the
 * stand-ins for what was live before the profiler started are its first events, allocs at t = 0
 * under their own tag, and every free names a block allocated before it.
 */
export function checkKineto(result: KinetoImport): void {
  checkTrace(result.trace)
  if (result.trace.meta.source !== 'kineto-trace') throw new Error('wrong source')
  checkTimeOrder(result.trace)
  const e = result.trace.events
  const seeded = result.standInAllocs
  if (String(seeded) !== result.trace.meta.properties['kineto.stand_in_allocs']) throw new Error('kineto.stand_in_allocs is not the stand-ins counted')
  if (seeded < result.unknownFrees) throw new Error(`${seeded} stand-ins for ${result.unknownFrees} frees of unknown blocks`)
  // At most two request events from each memory event (an alloc at a live address frees the older block first).
  if (result.memoryEvents < 0 || e.kind.length - seeded > 2 * result.memoryEvents) throw new Error('more events than memory events')
  const tag = result.trace.tables.tags.indexOf(BEFORE_PROFILER_TAG)
  for (let i = 0; i < seeded; i++)
    if (e.kind[i] !== EventKind.alloc || e.time[i] !== 0 || e.tag[i] !== tag || !(e.size[i]! > 0)) throw new Error(`event ${i} is not a stand-in alloc`)
  for (let i = seeded; i < e.kind.length; i++) if (e.tag[i] === tag && tag >= 0) throw new Error(`event ${i}: a recorded event under the stand-ins' tag`)
  checkFreesOfLive(result.trace)
  let allocs = 0
  let top = -1
  for (let i = 0; i < e.kind.length; i++) if (e.kind[i] === EventKind.alloc) (allocs++, (top = Math.max(top, e.id[i]!)))
  if (top + 1 !== allocs) throw new Error(`block ids not dense: ${allocs} allocs, the largest id ${top}`)
  if (result.recordedReserved && result.recordedReserved.index.length > 0 && result.recordedReserved.index[0]! < seeded)
    throw new Error('the recorded reserved curve starts among the stand-ins')
}

/** An Umpire log's import: the trace holds together, in time order, every free of a live alloc. */
export function checkUmpire(result: UmpireImport): void {
  checkTrace(result.trace)
  if (result.trace.meta.source !== 'umpire-log') throw new Error('wrong source')
  for (const [name, n] of Object.entries({
    leftOut: result.leftOut,
    unknownFrees: result.unknownFrees,
    unanswered: result.unanswered,
    liveAtEnd: result.liveAtEnd,
  }))
    if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} is ${n}`)
  checkTimeOrder(result.trace)
  checkFreesOfLive(result.trace)
}

/** An Nsight Systems import: the trace and its recorded layout hold together, the layout's columns of one length. */
export function checkNsys(result: NsysImport): void {
  checkTrace(result.trace)
  if (result.trace.meta.source !== 'nsys-sqlite') throw new Error('wrong source')
  checkTimeOrder(result.trace)
  checkFreesOfLive(result.trace)
  const l = result.recorded.layout!
  for (const column of Object.values(l)) if ((column as ArrayLike<unknown>).length !== l.op.length) throw new Error('recorded layout: ragged columns')
  // Each alloc a region and its block, each free the block and its region.
  if (l.op.length !== 2 * result.trace.events.kind.length) throw new Error('recorded layout: events do not match the trace')
}

function checkTimeOrder(t: RequestTrace): void {
  for (let i = 1; i < t.events.time.length; i++) if (t.events.time[i]! < t.events.time[i - 1]!) throw new Error(`time goes backwards at event ${i}`)
}

function checkFreesOfLive(t: RequestTrace): void {
  const live = new Set<number>()
  const e = t.events
  for (let i = 0; i < e.kind.length; i++)
    if (e.kind[i] === EventKind.alloc) {
      if (live.has(e.id[i]!)) throw new Error(`event ${i}: id ${e.id[i]} allocated twice`)
      live.add(e.id[i]!)
    } else if (e.kind[i] === EventKind.free && !live.delete(e.id[i]!)) throw new Error(`event ${i}: free of ${e.id[i]}, not live`)
}
