/**
 * The replays a page asks for when it opens a trace (docs/architecture.md, "The opening view"):
 * the first strategy's map cut at the opening event, then the other strategies cut where the
 * playhead went. The host starts them as it opens a trace (AppSession.startOpening) and names
 * them in the summary (TraceSummary.opening); a page that wants other strategies builds its own
 * requests here.
 */

import type { ReplayRequest, TraceSummary } from './contract.ts'

/** Strategies the first replay job runs: none when recorded layouts can be drawn at once. */
export function firstCount(stored: readonly string[]): number {
  return stored.length > 0 ? 0 : 1
}

/** Where a trace's first maps are cut: at a recorded out-of-memory, else at the first strategy's peak ('peak'). */
function openingEvent(summary: TraceSummary): number | 'peak' {
  return summary.oom ? Math.min(summary.oom.event, Math.max(0, summary.events - 1)) : 'peak'
}

/** The first replay of an open: the first strategy (none with recorded layouts) and the recorded ones, cut at the opening event. */
export function firstReplay(summary: TraceSummary, strategies: string): ReplayRequest {
  return {
    traceId: summary.traceId,
    strategies,
    targets: { first: 0, count: firstCount(summary.stored) },
    includeStored: true,
    previewAt: openingEvent(summary),
  }
}

/** The rest of an open's replays: the strategies after the first, cut at `at`, the event the first maps put the playhead at. */
export function restReplay(summary: TraceSummary, strategies: string, at: number): ReplayRequest {
  return { traceId: summary.traceId, strategies, targets: { first: firstCount(summary.stored) }, includeStored: false, previewAt: at }
}

/**
 * Where the other maps are cut when the first could not be (a first map sent whole): the recorded
 * out-of-memory, else the trace's last event, where the page's playhead stands until it finds the
 * first map's peak.
 */
export function openingFallbackEvent(summary: TraceSummary): number {
  const last = Math.max(0, summary.events - 1)
  return summary.oom ? Math.min(summary.oom.event, last) : last
}
