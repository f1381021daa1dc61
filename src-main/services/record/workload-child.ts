// The recorder process of `vramscope record --workload` (workload.ts starts it through
// workload-child.mjs): argv holds the spec as JSON and the output path; it writes JSON lines on
// stdout, {"progress": events} while it runs, then one WorkloadRun. Its stdin is a pipe from the
// parent: a `cancel` line stops the run (a valid partial recording), and so does the pipe's end,
// which comes when the parent has gone, so no recorder outlives the process that started it.
import type { Readable } from 'node:stream'

import { recordWorkloadHere, type WorkloadSpec } from './workload-recorder.ts'

/**
 * Aborts `controller` when `input` carries a line `cancel`, or ends, closes or fails (whoever
 * writes to it has gone). Returns the function that stops listening.
 */
export function cancelOnInput(input: Readable, controller: AbortController): () => void {
  let pending = ''
  const onData = (data: Buffer | string) => {
    pending += data.toString()
    const lines = pending.split('\n')
    pending = lines.pop()!
    if (pending.length > 1024) pending = pending.slice(-1024)
    if (lines.some((line) => line.trim() === 'cancel')) controller.abort(new Error('the recording was cancelled'))
  }
  const onEnd = () => controller.abort(new Error("the recorder's parent process went"))
  input.on('data', onData)
  input.on('end', onEnd)
  input.on('close', onEnd)
  input.on('error', onEnd)
  return () => {
    input.off('data', onData)
    input.off('end', onEnd)
    input.off('close', onEnd)
    input.off('error', onEnd)
  }
}

export async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as WorkloadSpec
  const controller = new AbortController()
  const stop = cancelOnInput(process.stdin, controller)
  try {
    await recordWorkloadHere(spec, process.argv[3]!, (message) => process.stdout.write(`${JSON.stringify(message)}\n`), controller.signal)
  } finally {
    // Done: the open pipe must not keep this process alive.
    stop()
    process.stdin.destroy()
  }
}
