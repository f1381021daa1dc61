// The what-if lab of the open trace: the panel's inputs, its running job, its report.
import type { JobStatus } from '../../src-shared/contract.ts'
import type { WhatifReport } from '../../src-shared/whatif-report.ts'
import { ApiCallError, waitForJob, type Client } from '../api/client.ts'
import type { TraceData } from '../viz/data.ts'

/** Bytes as a cap the host reads back exactly: "3GiB", "640MiB", else the bytes. */
export function readableSize(bytes: number): string {
  for (const [unit, size] of [
    ['TiB', 1024 ** 4],
    ['GiB', 1024 ** 3],
    ['MiB', 1024 ** 2],
    ['KiB', 1024],
  ] as const)
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`
  return String(bytes)
}

export class WhatifLab {
  private readonly client: Client
  private readonly trace: () => TraceData | null

  constructor(client: Client, trace: () => TraceData | null) {
    this.client = client
    this.trace = trace
  }

  /** The panel's inputs: device limit, GPU memory, configurations one per line. */
  cap = $state('')
  device = $state('')
  confs = $state('')
  /** The running what-if job (its own progress bar, in the panel), its report, its error. */
  job = $state<JobStatus | null>(null)
  report = $state.raw<WhatifReport | null>(null)
  error = $state<string | null>(null)

  /** No report, no error: another trace was opened. */
  clear(): void {
    this.report = null
    this.error = null
  }

  /**
   * Runs the what-if lab on the open trace with the panel's inputs: the configurations pasted (one
   * per line; none: the grid) under the device limit. Its progress shows in the panel.
   */
  async run(options: { grid?: boolean } = {}): Promise<void> {
    const trace = this.trace()
    if (!trace || this.job) return
    this.error = null
    const traceId = trace.summary.traceId
    // grid: the lab's grid under the limit the recording implies (the out-of-memory panel's one click).
    if (options.grid) this.cap = this.confs = ''
    const confs = this.confs
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => line !== '' && !line.startsWith('#'))
    try {
      const { jobId } = await this.client.call('whatif:start', {
        traceId,
        ...(confs.length > 0 && { confs }),
        ...(this.cap.trim() !== '' && { cap: this.cap.trim() }),
        ...(this.device.trim() !== '' && { device: this.device.trim() }),
      })
      this.job = { jobId, state: 'running', fraction: 0, phase: 'what-if: starting' }
      await waitForJob(this.client, jobId, (s) => (this.job = s))
      const report = await this.client.call('whatif:result', { jobId })
      // A trace opened meanwhile has its own lab to run.
      if (this.trace()?.summary.traceId === traceId) this.report = report
    } catch (e) {
      this.error = e instanceof ApiCallError && e.code === 'CANCELLED' ? null : (e as Error).message
    } finally {
      this.job = null
    }
  }

  async cancel(): Promise<void> {
    if (this.job) await this.client.call('job:cancel', { jobId: this.job.jobId })
  }
}
