// `vramscope record --workload NAME`: runs a built-in GPU workload (native/cuda/workloads/) through
// a strategy on its real backing, in a child process (workload-child.ts runs workload-recorder.ts):
// a CUDA fault or crash there never takes the caller down, and the trace file it streams
// (TraceWriter) opens whatever happens. The child reports progress and its result as JSON lines on stdout.
// Its stdin is a pipe from this process: an abort of the caller's signal writes `cancel` on it, and
// the child stops its run (a valid partial recording, kind 'cancelled'); it stops the same way when
// the pipe ends, so a recorder never outlives its parent. One that has not exited CANCEL_KILL_MS
// after the cancel is killed.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

import type { WorkloadRun, WorkloadSpec } from './workload-recorder.ts'

export type { WorkloadOutcome, WorkloadRun, WorkloadSpec } from './workload-recorder.ts'

const CHILD = fileURLToPath(new URL('./workload-child.mjs', import.meta.url))

/** How long a cancelled recorder process has to exit before it is killed (SIGKILL). */
export const CANCEL_KILL_MS = 10_000

/** The same recording in this process (the desktop app's worker, which is isolated already). */
export async function recordWorkloadInProcess(
  spec: WorkloadSpec,
  output: string,
  onProgress?: (events: number) => void,
  signal?: AbortSignal,
): Promise<WorkloadRun> {
  const { recordWorkloadHere } = await import('./workload-recorder.ts')
  let last: WorkloadRun | undefined
  try {
    await recordWorkloadHere(
      spec,
      output,
      (message) => {
        if ('progress' in message) onProgress?.(message.progress)
        else last = message
      },
      signal,
    )
  } catch (e) {
    return { kind: 'crashed', message: (e as Error).message }
  }
  return last ?? { kind: 'crashed', message: 'the recorder ended without an outcome' }
}

export function recordWorkloadInChild(spec: WorkloadSpec, output: string, onProgress?: (events: number) => void, signal?: AbortSignal): Promise<WorkloadRun> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CHILD, JSON.stringify(spec), output], { stdio: ['pipe', 'pipe', 'pipe'] })
    // A child that has exited before the cancel reaches it closes the pipe: that write's error is no failure.
    child.stdin!.on('error', () => {})
    let killer: NodeJS.Timeout | undefined
    let killed = false
    const cancel = () => {
      child.stdin!.write('cancel\n')
      killer = setTimeout(() => {
        killed = true
        child.kill('SIGKILL')
      }, CANCEL_KILL_MS)
    }
    if (signal?.aborted) cancel()
    else signal?.addEventListener('abort', cancel, { once: true })
    let last: WorkloadRun | undefined
    let stderr = ''
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString()
      if (stderr.length > 16384) stderr = stderr.slice(-16384)
    })
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let message: { progress?: number } & Partial<WorkloadRun>
      try {
        message = JSON.parse(line) as typeof message
      } catch {
        return
      }
      if (typeof message.progress === 'number') onProgress?.(message.progress)
      else if (message.kind) last = message as WorkloadRun
    })
    child.once('error', (e) => {
      signal?.removeEventListener('abort', cancel)
      clearTimeout(killer)
      fail(e)
    })
    child.once('close', (code, killedBy) => {
      signal?.removeEventListener('abort', cancel)
      clearTimeout(killer)
      child.stdin!.destroy()
      // Every outcome but 'done' holds whatever the exit (a cancelled run's file was closed before it was sent).
      if (last && (last.kind !== 'done' || code === 0)) return done(last)
      if (killed)
        return done({
          kind: 'crashed',
          message: `the recorder process did not stop within ${CANCEL_KILL_MS / 1000} s of the cancel and was killed; what it recorded until then is in ${output}`,
        })
      const how = killedBy ? `was killed by ${killedBy}` : `exited with code ${code}`
      done({ kind: 'crashed', message: `the recorder process ${how}${stderr.trim() ? `: ${stderr.trim().split('\n').slice(-5).join(' | ')}` : ''}` })
    })
  })
}
