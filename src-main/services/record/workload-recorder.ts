// Records a built-in GPU workload into a trace file: loads the addon, runs the workload through
// recordWorkload and streams each chunk into a TraceWriter, so the file opens even when the
// recording process dies. Runs in the recorder process (workload-child.ts) or, in the desktop app's
// worker, in process (workload.ts chooses). An abort of its signal raises the addon's cancel flag,
// which the native run reads at every step and allocation: it ends there, and the file, closed as
// usual, is a valid partial recording with a warning that says it was cancelled.
import type { StrategyParams, WorkloadChunk, WorkloadRecordResult } from '../../../native/index.js'
import { loadNative } from '../../native.ts'
import { TraceWriter } from '../trace/file.ts'
import type { LayoutOp } from '../../../src-shared/layout.ts'
import { EventKind, type EventKind as EventKindType } from '../trace/model.ts'

export interface WorkloadSpec {
  workload: string
  strategy?: string
  strategyParams?: StrategyParams
  workloadParams?: Record<string, string>
  device?: number
  /** Bytes the backing may hand out (a cap below the device's memory). */
  capacity?: number
}

/** What a recorded workload did (the native result), and how many events the file holds. */
export interface WorkloadOutcome extends WorkloadRecordResult {
  events: number
  layoutEvents: number
}

export type WorkloadRun =
  | { kind: 'done'; outcome: WorkloadOutcome }
  /** The signal aborted mid-run: `output` holds what was recorded until then, closed and valid. */
  | { kind: 'cancelled'; outcome: WorkloadOutcome; output: string }
  /** No GPU or driver (or a build without CUDA): nothing was recorded. */
  | { kind: 'no-device'; reason: string }
  /** A bad workload, strategy or parameter: nothing was recorded. */
  | { kind: 'bad-input'; message: string }
  /** The recorder died (a signal) or failed; the trace file holds what was streamed before. */
  | { kind: 'crashed'; message: string }

export const RECORDED_WORKLOAD_SUFFIX = '(recorded)'

export type RecorderMessage = WorkloadRun | { progress: number }

/**
 * Records `spec` into `output` in this process, telling `send` the progress and the outcome. The
 * CLI and the web host run it in a child process (workload-child.ts); the desktop app's worker, itself
 * a utility process that main restarts if it dies, runs it directly.
 */
export async function recordWorkloadHere(spec: WorkloadSpec, output: string, send: (message: RecorderMessage) => void, signal?: AbortSignal): Promise<void> {
  const native = loadNative()
  if (!native.builtWithCuda()) return send({ kind: 'no-device', reason: 'this build of vramscope has no CUDA backings' })
  const device = native.cudaDeviceAvailable()
  if (!device.available) return send({ kind: 'no-device', reason: device.reason })
  const info = native.workloads().find((w) => w.name === spec.workload)
  if (!info)
    return send({
      kind: 'bad-input',
      message: `--workload: unknown workload '${spec.workload}' (known: ${native
        .workloads()
        .map((w) => w.name)
        .join(', ')})`,
    })
  const strategy = info.fixedStrategy || (spec.strategy ?? 'caching')
  const name = `${strategy} ${RECORDED_WORKLOAD_SUFFIX}`
  const writer = await TraceWriter.create(output, {
    source: 'recording',
    warnings: [],
    properties: {
      recorder: 'vramscope workload',
      workload: spec.workload,
      workload_params: JSON.stringify(spec.workloadParams ?? {}),
      strategy,
      strategy_params: JSON.stringify(spec.strategyParams ?? {}),
    },
  })
  writer.declareStrategy(name, strategy, spec.strategyParams ?? {})
  const streams: number[] = []
  const stream = (index: number) => (streams[index] ??= writer.stream(String(index)))
  const stepGpuNs: number[] = []
  const stepHostNs: number[] = []
  let layoutEvents = 0
  const onChunk = (chunk: WorkloadChunk) => {
    const r = chunk.requests
    for (let i = 0; i < r.kind.length; i++) {
      const kind = r.kind[i]! as EventKindType
      if (kind === EventKind.marker) writer.append(EventKind.marker, writer.marker(chunk.markerNames[r.id[i]!]!), 0, 0, 0, r.time[i]!)
      else writer.append(kind, r.id[i]!, r.size[i]!, stream(r.stream[i]!), spec.device ?? 0, r.time[i]!)
    }
    const l = chunk.layout
    for (let i = 0; i < l.op.length; i++)
      writer.appendLayout(name, l.op[i]! as LayoutOp, l.address[i]!, l.size[i]!, l.requested[i]!, l.stream[i]!, l.time[i]!, l.latencyNs[i]!)
    layoutEvents += l.op.length
    for (let i = 0; i < chunk.steps.gpuNs.length; i++) {
      stepGpuNs.push(chunk.steps.gpuNs[i]!)
      stepHostNs.push(chunk.steps.hostNs[i]!)
    }
    send({ progress: writer.eventCount })
  }
  // Raised on abort, or at once if the signal has aborted already: the run stops at its first check.
  const cancelFlag = signal && native.cancelFlag()
  const cancel = () => native.raiseCancelFlag(cancelFlag!)
  if (signal?.aborted) cancel()
  else signal?.addEventListener('abort', cancel, { once: true })
  let result
  try {
    result = await native.recordWorkload(
      {
        workload: spec.workload,
        strategy,
        strategyParams: spec.strategyParams ?? {},
        workloadParams: spec.workloadParams ?? {},
        device: spec.device ?? 0,
        capacity: spec.capacity ?? 0,
        ...(cancelFlag && { cancelFlag }),
      },
      onChunk,
    )
  } catch (e) {
    const error = e as Error & { code?: string }
    writer.warn(`the recording stopped: ${error.message}`)
    await writer.close()
    if (error.code === 'INVALID_ARGUMENT') return send({ kind: 'bad-input', message: error.message })
    if (error.code === 'NO_CUDA_DEVICE') return send({ kind: 'no-device', reason: error.message })
    return send({ kind: 'crashed', message: error.message })
  } finally {
    signal?.removeEventListener('abort', cancel)
  }
  const cancelled = result.stoppedBy === 'cancelled'
  writer.property('gpu_step_ns', stepGpuNs.map((n) => Math.round(n)).join(','))
  writer.property('host_step_ns', stepHostNs.map((n) => Math.round(n)).join(','))
  writer.property('device', result.device)
  if (cancelled) writer.warn('the recording was cancelled')
  else if (result.outOfMemory) writer.warn(`the workload ran out of memory and ended there: ${result.stoppedBy}`)
  else if (result.stoppedBy) writer.warn(`the workload stopped early: ${result.stoppedBy}`)
  if (result.corruptedBytes > 0)
    writer.warn(`${result.corruptedBytes} bytes did not hold their pattern when verified: blocks overlapped or were reused too early`)
  writer.summary(name, {
    allocations: result.allocations,
    frees: result.frees,
    steps: result.steps,
    verifiedBytes: result.verifiedBytes,
    corruptedBytes: result.corruptedBytes,
    outOfMemory: result.outOfMemory ? 1 : 0,
    gpuTimeNs: stepGpuNs.reduce((a, b) => a + b, 0),
  })
  await writer.close()
  const outcome = { ...result, events: writer.eventCount, layoutEvents }
  send(cancelled ? { kind: 'cancelled', outcome, output } : { kind: 'done', outcome })
}
