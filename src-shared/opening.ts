/**
 * The replays a page asks for when it opens a trace (docs/architecture.md, "The opening view"):
 * the first strategy's map cut at the opening event, then the other strategies cut where the
 * playhead went. The page builds its requests here, and a host that knows which file a page will
 * open (the one it was started with) builds the same ones to start them ahead of it; a request is
 * matched to one started ahead by its key.
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

/** Two requests with one key ask for the same replay (each field as the host reads it, its default filled in). */
export function replayKey(r: ReplayRequest): string {
  return JSON.stringify([
    r.traceId,
    r.strategies,
    r.cap ?? '',
    r.targets?.first ?? 0,
    r.targets?.count ?? null,
    r.includeStored !== false,
    r.previewAt ?? null,
    r.labels ?? null,
    r.recordedSettings !== false,
  ])
}
