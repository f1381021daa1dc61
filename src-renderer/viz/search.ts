// Finding blocks in one strategy's records by what a user remembers of them: an address inside
// the block (hex), a requested size or a range of sizes ("1MiB", ">=512KiB"), or text from the
// stack that allocated it (a frame's function or file name: the frames shown, src-shared/frames.ts,
// and the hidden ones only when no shown frame matches). Pure functions, tested in Node.
import type { TraceData } from './data.ts'
import { stackFilter, stackIndices } from './frames.ts'
import type { StrategyModel } from './model.ts'

export type SizeComparison = '=' | '>=' | '<=' | '>' | '<'

export type SearchQuery =
  { kind: 'empty' } | { kind: 'address'; address: number } | { kind: 'size'; comparison: SizeComparison; bytes: number } | { kind: 'frame'; text: string }

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
  tib: 1024 ** 4,
}

/**
 * Bytes of a size as people type it: "4096", "512 KiB", "1.5MiB", "2g". Units are binary whether
 * or not the "i" is typed, as the rest of the UI shows them. Null when it is not a size.
 */
export function parseBytes(text: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text)
  if (!m) return null
  const unit = UNITS[m[2]!.toLowerCase()]
  if (unit === undefined) return null
  return Math.round(Number(m[1]) * unit)
}

/**
 * What a search box's text asks for. "0x…" is an address; a number with a unit, or any number
 * after a comparison, is a size (a bare number is a size too: addresses are typed in hex);
 * anything else is frame text.
 */
export function parseQuery(text: string): SearchQuery {
  const t = text.trim()
  if (t === '') return { kind: 'empty' }
  if (/^0x[0-9a-f]+$/i.test(t)) return { kind: 'address', address: Number.parseInt(t.slice(2), 16) }
  const compared = /^(>=|<=|=|>|<)\s*(.+)$/.exec(t)
  if (compared) {
    const bytes = parseBytes(compared[2]!)
    if (bytes !== null) return { kind: 'size', comparison: compared[1] as SizeComparison, bytes }
  } else {
    const bytes = parseBytes(t)
    if (bytes !== null) return { kind: 'size', comparison: '=', bytes }
  }
  return { kind: 'frame', text: t }
}

function compare(value: number, comparison: SizeComparison, bytes: number): boolean {
  switch (comparison) {
    case '=':
      return value === bytes
    case '>=':
      return value >= bytes
    case '<=':
      return value <= bytes
    case '>':
      return value > bytes
    case '<':
      return value < bytes
  }
}

/**
 * Which stacks hold a frame whose function or file name contains `text` (case-insensitive), one
 * flag per stack: frames are shared by many stacks and stacks by many allocations, so each frame
 * and each stack is tested once, not once per block. The frames a stack shows are searched
 * (src-shared/frames.ts: "forward" does not match every stack through the dispatcher's frames);
 * only when no stack matches there are the hidden frames searched too ("CUDACachingAllocator").
 */
export function stacksMatching(trace: TraceData, text: string): Uint8Array {
  const needle = text.toLowerCase()
  const frameMatches = trace.frames.map((f) => f.name.toLowerCase().includes(needle) || f.filename.toLowerCase().includes(needle))
  const stacks = Math.max(0, trace.stackOffsets.length - 1)
  const filter = stackFilter(trace)
  const out = new Uint8Array(stacks)
  let any = false
  for (let s = 0; s < stacks; s++) {
    const shown = filter.filter(stackIndices(trace, s), s).shown
    if (shown.some((f) => frameMatches[f.frame])) {
      out[s] = 1
      any = true
    }
  }
  if (any) return out
  for (let s = 0; s < stacks; s++) {
    for (let k = trace.stackOffsets[s]!; k < trace.stackOffsets[s + 1]!; k++) {
      if (frameMatches[trace.stackFrames[k]!]) {
        out[s] = 1
        break
      }
    }
  }
  return out
}

/**
 * The blocks of a strategy that match, in the order they were allocated. Sizes compare with what
 * the program requested (the rounded size depends on the strategy; the request does not). An
 * address matches every block that ever covered it.
 */
export function searchBlocks(model: StrategyModel, trace: TraceData, query: SearchQuery): Uint32Array {
  const b = model.blocks
  const out: number[] = []
  switch (query.kind) {
    case 'empty':
      break
    case 'address':
      for (let k = 0; k < b.count; k++) if (b.address[k]! <= query.address && query.address < b.address[k]! + b.size[k]!) out.push(k)
      break
    case 'size':
      for (let k = 0; k < b.count; k++) if (compare(b.requested[k]!, query.comparison, query.bytes)) out.push(k)
      break
    case 'frame': {
      const matching = stacksMatching(trace, query.text)
      for (let k = 0; k < b.count; k++) {
        const s = trace.stack[b.from[k]!] ?? -1
        if (s >= 0 && matching[s] === 1) out.push(k)
      }
      break
    }
  }
  // Records are in layout order, which is event order; a stable sort keeps it so for any input.
  out.sort((x, y) => b.from[x]! - b.from[y]!)
  return Uint32Array.from(out)
}

/**
 * The match to go to next (direction 1) or back to (-1), wrapping around. From the match the user
 * is on (`current`, when the playhead still stands at its alloc event) it steps by one; after the
 * playhead moved elsewhere it goes to the first match after it (or the last before it), so Enter
 * never jumps back to where the user came from. -1 when there are no matches.
 */
export function stepMatch(matchEvents: ArrayLike<number>, current: number, playhead: number, direction: 1 | -1): number {
  const n = matchEvents.length
  if (n === 0) return -1
  if (current >= 0 && current < n && matchEvents[current] === playhead) return (current + direction + n) % n
  if (direction > 0) {
    for (let i = 0; i < n; i++) if (matchEvents[i]! > playhead) return i
    return 0
  }
  for (let i = n - 1; i >= 0; i--) if (matchEvents[i]! < playhead) return i
  return n - 1
}
