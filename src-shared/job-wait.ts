// How long a job's status may be waited for, and whether a job has yet to end: the pieces of the
// job lifecycle (src-main/services/jobs.ts) that every host answering `job:status` shares, the
// Electron main's and the web host's copies of the worker's statuses included, which may not
// reach the services (docs/architecture.md#jobs).
import type { JobStatus } from './contract.ts'

/** The longest a `job:status` call with waitMs holds its answer back, whichever host answers it. */
export const MAX_STATUS_WAIT_MS = 1000
/** Whether a job has yet to end: waiting for a slot or running. */
export function isLive(status: Pick<JobStatus, 'state'>): boolean {
  return status.state === 'queued' || status.state === 'running'
}

/**
 * Waits until `settled` resolves or `waitMs` passes (at most MAX_STATUS_WAIT_MS), whichever comes
 * first: the one wait behind every `job:status` with waitMs, so a poller learns of a job's end
 * the moment it happens, where polling at intervals learns it up to an interval late.
 */
export async function waitSettled(settled: Promise<unknown>, waitMs: number | undefined): Promise<void> {
  const ms = Math.min(Math.max(0, waitMs ?? 0), MAX_STATUS_WAIT_MS)
  if (!(ms > 0)) return
  let timer: ReturnType<typeof setTimeout> | undefined
  await Promise.race([settled, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))])
  clearTimeout(timer)
}
