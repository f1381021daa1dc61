// The trace's stacks as the views show them: filtered by src-shared/frames.ts (allocator,
// dispatcher, interpreter and unwinder frames hidden, the user's frame first), one filter per trace,
// each stack filtered once.
import { frameLabel, StackFilter, type FilteredStack } from '../../src-shared/frames.ts'
import type { Frame, TraceData } from './data.ts'

/** Headline not computed yet (stacks are filtered when first asked for). */
const UNKNOWN = -2

const filters = new WeakMap<TraceData, { filter: StackFilter; headlines: Int32Array; complete: boolean }>()

function cached(trace: TraceData): { filter: StackFilter; headlines: Int32Array; complete: boolean } {
  let c = filters.get(trace)
  if (!c) {
    c = { filter: new StackFilter(trace.frames), headlines: new Int32Array(Math.max(0, trace.stackOffsets.length - 1)).fill(UNKNOWN), complete: false }
    filters.set(trace, c)
  }
  return c
}

function headlineOf(trace: TraceData, s: number): number {
  const c = cached(trace)
  let h = c.headlines[s]!
  if (h === UNKNOWN) {
    h = c.filter.filter(stackIndices(trace, s), s).headline
    c.headlines[s] = h
  }
  return h
}

/** The frame indices of stack `s`, innermost first. */
export function stackIndices(trace: TraceData, s: number): Uint32Array {
  return trace.stackFrames.subarray(trace.stackOffsets[s]!, trace.stackOffsets[s + 1]!)
}

/** The filter over this trace's frames table (cached per trace). */
export function stackFilter(trace: TraceData): StackFilter {
  return cached(trace).filter
}

/** The headline frame (frames-table index) of every stack; -1 for an empty stack. */
export function stackHeadlines(trace: TraceData): Int32Array {
  const c = cached(trace)
  if (!c.complete) {
    for (let s = 0; s < c.headlines.length; s++) headlineOf(trace, s)
    c.complete = true
  }
  return c.headlines
}

/** The headline frame of the stack an event recorded, or -1 (no stack, or an empty one). */
export function headlineAt(trace: TraceData, event: number): number {
  const s = trace.stack[event] ?? -1
  return s < 0 || s >= cached(trace).headlines.length ? -1 : headlineOf(trace, s)
}

/** The filtered stack of an event, or null when it recorded none. */
export function filteredStackAt(trace: TraceData, event: number): FilteredStack | null {
  const s = trace.stack[event] ?? -1
  if (s < 0) return null
  return stackFilter(trace).filter(stackIndices(trace, s), s)
}

/** One frame's label by its index ("train.py:42 step"). */
export function frameLabelAt(trace: TraceData, frame: number): string {
  const f: Frame | undefined = trace.frames[frame]
  return f ? frameLabel(f) : `frame ${frame}`
}

/**
 * What a hover says of an event's stack: its headline ("train.py:42 step") and up to `n` shown
 * frames inside it, innermost first (the operation, then the modules that called it).
 */
export function hoverFrames(trace: TraceData, event: number, n: number): { headline: string | null; inner: string[] } {
  const f = filteredStackAt(trace, event)
  if (!f) return { headline: null, inner: [] }
  const at = f.shown.findIndex((s) => s.frame === f.headline)
  const inner = (at >= 0 ? f.shown.slice(0, at) : f.shown).slice(0, n)
  return {
    headline: f.headline >= 0 ? frameLabelAt(trace, f.headline) : null,
    inner: inner.map((s) => frameLabelAt(trace, s.frame) + (s.repeats > 1 ? ` ×${s.repeats}` : '')),
  }
}
