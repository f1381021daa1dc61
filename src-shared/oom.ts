// A recorded out-of-memory, as the app's out-of-memory panel and the CLI's `info` say it: what
// failed, what PyTorch held and had free at that moment (from the recorded layout), whether that
// was fragmentation or a true shortage, and the device limit the recording implies. The figures
// are computed on the host (src-main/services/analysis/oom.ts); the words are written here once
// so the app and the CLI say the same thing.

export interface OomFrame {
  name: string
  filename: string
  line: number
}

export interface OomSummary {
  /** The request event of the failure (kind oom) and how many the trace has in all. */
  event: number
  count: number
  /** Bytes the program asked for. */
  size: number
  /** What PyTorch's allocator asks of the device for it when no cached block fits (a new segment). */
  need: number
  stream: string
  /** The stack's headline frame: the innermost Python frame, else the innermost frame. */
  frame?: OomFrame
  /** From the recorded layout at the failure; absent without one. */
  layout?: {
    reserved: number
    /** Bytes of live blocks (rounded sizes), pending frees included. */
    allocated: number
    free: number
    largestFree: number
    segments: number
  }
  /** The device limit the recording implies: at least lowBytes, below highBytes. */
  limit?: { lowBytes: number; highBytes: number; source: 'device' | 'fraction'; deviceFree?: number }
  /**
   * 'shortage': the free memory held was less than the request, so the allocator needed more from
   * the device than the limit allowed; 'fragmentation': enough was free but no block was large
   * enough; 'unknown': no recorded layout to tell.
   */
  verdict: 'shortage' | 'fragmentation' | 'unknown'
}

/** The innermost Python frame of a stack (innermost first), else its innermost frame. */
export function headlineFrame<F extends OomFrame>(frames: readonly F[]): F | undefined {
  return frames.find((f) => f.filename.endsWith('.py')) ?? frames[0]
}

/**
 * One sentence on the failure's memory: "1.70 GiB reserved, 8.00 MiB of it free, largest free
 * block 8.00 MiB: a true shortage — …".
 */
export function oomVerdictWords(s: OomSummary, bytes: (n: number) => string): string {
  const l = s.layout
  if (!l) return 'no recorded layout: whether it was fragmentation or a true shortage is unknown'
  const held = `${bytes(l.reserved)} reserved, ${bytes(l.free)} of it free, largest free block ${bytes(l.largestFree)}`
  if (s.verdict === 'fragmentation')
    return l.largestFree >= s.size
      ? `${held}: fragmentation — a free block was large enough but held for another stream or pool`
      : `${held}: fragmentation — ${bytes(l.free)} free but no block of ${bytes(s.size)}`
  return `${held}: a true shortage — the request needed ${bytes(s.need)} more from the device, which would have taken reserved memory to ${bytes(l.reserved + s.need)}, more than the limit allowed`
}

/** "at least 1.70 GiB and below 2.17 GiB (a per-process limit)". */
export function oomLimitWords(s: OomSummary, bytes: (n: number) => string): string | undefined {
  const l = s.limit
  if (!l) return undefined
  const why = l.source === 'device' ? `the GPU itself was full: ${bytes(l.deviceFree ?? 0)} free on the device` : 'a per-process limit or a smaller GPU'
  return `at least ${bytes(l.lowBytes)} and below ${bytes(l.highBytes)} (${why})`
}

/** "event 1,234: 484 MiB on stream 0, from forward model.py:42". */
export function oomHeadlineWords(s: OomSummary, bytes: (n: number) => string, count: (n: number) => string): string {
  const where = s.frame ? `, from ${s.frame.name} ${s.frame.filename}:${s.frame.line}` : ''
  return `event ${count(s.event)}: ${bytes(s.size)} on stream ${s.stream}${where}`
}
