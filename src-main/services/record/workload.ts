// `vramscope record --workload NAME`: runs a built-in GPU workload (native/cuda/workloads/) through
// a strategy on its real backing, in a child process (workload-child.ts runs workload-recorder.ts):
// a CUDA fault or crash there never takes the caller down, and the trace file it streams
// (TraceWriter) opens whatever happens. The child reports progress and its result as JSON lines on stdout.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

import type { WorkloadRun, WorkloadSpec } from './workload-recorder.ts'

export type { WorkloadOutcome, WorkloadRun, WorkloadSpec } from './workload-recorder.ts'

const CHILD = fileURLToPath(new URL('./workload-child.mjs', import.meta.url))

/** The same recording in this process (the desktop app's worker, which is isolated already). */
export async function recordWorkloadInProcess(spec: WorkloadSpec, output: string, onProgress?: (events: number) => void): Promise<WorkloadRun> {
  const { recordWorkloadHere } = await import('./workload-recorder.ts')
  let last: WorkloadRun | undefined
  try {
    await recordWorkloadHere(spec, output, (message) => {
      if ('progress' in message) onProgress?.(message.progress)
      else last = message
    })
  } catch (e) {
    return { kind: 'crashed', message: (e as Error).message }
  }
  return last ?? { kind: 'crashed', message: 'the recorder ended without an outcome' }
}

export function recordWorkloadInChild(spec: WorkloadSpec, output: string, onProgress?: (events: number) => void): Promise<WorkloadRun> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [CHILD, JSON.stringify(spec), output], { stdio: ['ignore', 'pipe', 'pipe'] })
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
    child.once('error', fail)
    child.once('close', (code, signal) => {
      if (last && (last.kind !== 'done' || code === 0)) return done(last)
      const how = signal ? `was killed by ${signal}` : `exited with code ${code}`
      done({ kind: 'crashed', message: `the recorder process ${how}${stderr.trim() ? `: ${stderr.trim().split('\n').slice(-5).join(' | ')}` : ''}` })
    })
  })
}
