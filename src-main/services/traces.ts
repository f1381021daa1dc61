// The traces a session keeps open (app-session.ts): each by its id, with the page that opened it
// and when it was last used, bounded per page and in all (the least recently used closed first);
// why each recently closed one was closed, for the error a later request about it gets. What a
// closed trace's jobs become is the session's: the registry tells it of each close (onClose).
import type { TraceSummary } from '../../src-shared/contract.ts'
import { ApiError } from '../../src-shared/api-error.ts'
import type { OpenedInput } from './import/open-input.ts'

/**
 * The page of a host that does not tell its pages apart (the desktop app, whose windows share one
 * worker): only the session's limit applies to it, and it is never closed as idle.
 */
export const DEFAULT_PAGE = ''
/** Traces a page keeps open: the one shown, a second for the diff, one being replaced. */
export const MAX_TRACES_PER_PAGE = 3
/** Traces the session keeps open in all. */
export const MAX_TRACES_OPEN = 24
/** Why closed traces were closed, kept for this many, for the error a later request about one gets. */
const CLOSED_REMEMBERED = 4096

export interface OpenedTrace {
  summary: TraceSummary
  input: OpenedInput
  page: string
  /** When it was last used, in uses of the registry (the least recently used is closed first). */
  lastUsed: number
}

export interface TraceLimits {
  /** Open traces a page keeps (MAX_TRACES_PER_PAGE); an older one of the page is closed first. */
  perPage?: number
  /** Open traces kept in all (MAX_TRACES_OPEN); the least recently used is closed first. */
  inAll?: number
}

export class TraceRegistry {
  private readonly traces = new Map<string, OpenedTrace>()
  /** Why each recently closed trace was closed. */
  private readonly closed = new Map<string, string>()
  private uses = 0

  /** `onClose` is told of every trace closed, by close(), closePage() or a newer one's admit(). */
  constructor(
    private readonly limits: TraceLimits = {},
    private readonly onClose: (traceId: string, reason: string) => void = () => {},
  ) {}

  /** How many traces are open (all pages). */
  get size(): number {
    return this.traces.size
  }

  /** Keeps a newly opened trace, closing the least recently used beyond the page's and the registry's limits. */
  admit(traceId: string, trace: Omit<OpenedTrace, 'lastUsed'>): void {
    const kept: OpenedTrace = { ...trace, lastUsed: ++this.uses }
    this.traces.set(traceId, kept)
    const byAge = (page?: string) =>
      [...this.traces].filter(([id, t]) => id !== traceId && (page === undefined || t.page === page)).sort((a, b) => a[1].lastUsed - b[1].lastUsed)
    const perPage = this.limits.perPage ?? MAX_TRACES_PER_PAGE
    if (kept.page !== DEFAULT_PAGE) {
      const older = byAge(kept.page)
      for (const [id] of older.slice(0, Math.max(0, older.length + 1 - perPage)))
        this.close(id, `vramscope keeps at most ${perPage} open traces a page (maxTracesPerPage) and this page opened newer ones`)
    }
    const inAll = this.limits.inAll ?? MAX_TRACES_OPEN
    const older = byAge()
    for (const [id] of older.slice(0, Math.max(0, older.length + 1 - inAll)))
      this.close(id, `vramscope keeps at most ${inAll} open traces in all (maxTracesOpen) and newer ones were opened`)
  }

  /** The open trace `traceId`, now its most recently used; NOT_FOUND saying why if it was closed. */
  use(traceId: string): OpenedTrace {
    const t = this.traces.get(traceId)
    if (!t) {
      const closed = this.closed.get(traceId)
      throw new ApiError(
        'NOT_FOUND',
        closed !== undefined
          ? `trace: ${JSON.stringify(traceId)} was closed: ${closed}; open the file again`
          : `trace: no open trace ${JSON.stringify(traceId)}`,
      )
    }
    t.lastUsed = ++this.uses
    return t
  }

  /** The open trace `traceId`, if it is open, without counting a use. */
  peek(traceId: string): OpenedTrace | undefined {
    return this.traces.get(traceId)
  }

  /** Closes a trace, remembering `reason` for later requests about it; false if it was not open. */
  close(traceId: string, reason: string): boolean {
    if (!this.traces.delete(traceId)) return false
    this.closed.set(traceId, reason)
    if (this.closed.size > CLOSED_REMEMBERED) this.closed.delete(this.closed.keys().next().value!)
    this.onClose(traceId, reason)
    return true
  }

  /** Closes every trace of `page`; how many it closed. */
  closePage(page: string, reason: string): number {
    let closed = 0
    for (const [id, trace] of this.traces) if (trace.page === page && this.close(id, reason)) closed++
    return closed
  }
}
