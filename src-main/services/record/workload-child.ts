// The recorder process of `vramscope record --workload` (workload.ts starts it through
// workload-child.mjs): argv holds the spec as JSON and the output path; it writes JSON lines on
// stdout, {"progress": events} while it runs, then one WorkloadRun.
import { recordWorkloadHere, type WorkloadSpec } from './workload-recorder.ts'

export async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as WorkloadSpec
  await recordWorkloadHere(spec, process.argv[3]!, (message) => process.stdout.write(`${JSON.stringify(message)}\n`))
}
