// GPU machine: the app's record:workload path end to end, in both recorder modes (a child process,
// as the web host runs it; in the session's own process, as the desktop app's utility process runs
// it): records a short inference workload on buddy and a training one on caching (pytorch), opens
// each recording as the app would, and prints what it holds. Then the cancel, in both modes: a
// long training recording cancelled about 1 s into its run, straight through the recorder (with a
// signal) and as a job of the session, must end within 3 s of the cancel (the job reading
// cancelled), and leave a file that opens with events and the warning "the recording was cancelled".
//   node --import tsx scripts/gpu/app-record-check.ts OUT_DIR
import { readdir } from 'node:fs/promises'
import { join } from 'node:path'

import { AppSession } from '../../src-main/services/app-session.ts'
import { recordWorkloadInChild, recordWorkloadInProcess, type WorkloadSpec } from '../../src-main/services/record/workload.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import type { RecordRequest } from '../../src-shared/contract.ts'

/** Steps enough that the training workload runs for minutes: only a cancel ends it within the check. */
const LONG: WorkloadSpec = { workload: 'training', strategy: 'caching', workloadParams: { steps: '1000000' } }
const CANCEL_AFTER_MS = 1000
const ENDS_WITHIN_MS = 3000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** What a cancelled recording's file must be: it opens, complete, with events and the warning. */
async function checkCancelledFile(what: string, path: string): Promise<boolean> {
  try {
    const { trace, file } = await readTrace(path)
    const events = trace.events.kind.length
    const warned = trace.meta.warnings.includes('the recording was cancelled')
    const ok = file.complete && events > 0 && warned
    console.log(`${ok ? 'ok' : 'FAIL'} ${what}: ${path} opens, complete ${file.complete}, ${events} events, warnings ${JSON.stringify(trace.meta.warnings)}`)
    return ok
  } catch (e) {
    console.log(`FAIL ${what}: ${path} does not open: ${(e as Error).message}`)
    return false
  }
}

const out = process.argv[2] ?? '/tmp/app-record'
let failed = false
for (const recordInProcess of [false, true]) {
  const session = new AppSession({
    version: 'check',
    host: 'web',
    samplesDir: join(import.meta.dirname, '..', '..', 'resources', 'samples'),
    recordInProcess,
    recordingsDir: join(out, recordInProcess ? 'in-process' : 'child'),
  })
  const info = await session.info()
  console.log(`recording available: ${JSON.stringify(info.recording)}; workloads: ${info.workloads.map((w) => w.name).join(', ')}`)
  const requests: RecordRequest[] = [
    { workload: 'inference', strategy: 'buddy', params: { requests: '40' } },
    { workload: 'training', strategy: 'caching:preset=pytorch', params: { steps: '6' } },
  ]
  for (const request of requests) {
    const { jobId } = session.recordWorkload(request)
    const status = await session.jobs.settled(jobId)
    if (status.state !== 'done') {
      failed = true
      console.log(`FAIL ${recordInProcess ? 'in-process' : 'child'} ${request.workload}: ${status.state} ${status.error?.message}`)
      continue
    }
    const summary = session.jobResult(jobId)
    console.log(
      `ok ${recordInProcess ? 'in-process' : 'child'} ${request.workload} on ${request.strategy}: ${summary.name}: ${summary.events} events, ${summary.allocs} allocs, stored ${summary.stored.join(', ')}, gpu ${summary.gpu ?? '?'}`,
    )
  }
}

for (const recordInProcess of [false, true]) {
  const mode = recordInProcess ? 'in-process' : 'child'
  // Straight through the recorder, with a signal: cancelled about 1 s after its first events.
  {
    const output = join(out, mode, 'cancelled-direct.vramscope')
    const controller = new AbortController()
    let firstEvents: number | undefined
    const record = recordInProcess ? recordWorkloadInProcess : recordWorkloadInChild
    const running = record(LONG, output, () => (firstEvents ??= performance.now()), controller.signal)
    let ended = false
    void running.then(() => (ended = true))
    while (firstEvents === undefined && !ended) await sleep(20)
    if (!ended) await sleep(CANCEL_AFTER_MS)
    const cancelledAt = performance.now()
    controller.abort(new Error('the check cancelled it'))
    const run = await running
    const took = performance.now() - cancelledAt
    const ok = run.kind === 'cancelled' && took <= ENDS_WITHIN_MS
    if (!ok) failed = true
    console.log(
      `${ok ? 'ok' : 'FAIL'} ${mode} recorder cancelled: ${run.kind} ${took.toFixed(0)} ms after the cancel${'outcome' in run ? `, stopped by ${JSON.stringify(run.outcome.stoppedBy)}, ${run.outcome.events} events` : 'message' in run ? `: ${run.message}` : ''}`,
    )
    if (!(await checkCancelledFile(`${mode} recorder's file`, output))) failed = true
  }
  // As a job of the session: the job reads cancelled at once; its work (the recorder) must end soon after.
  {
    const recordingsDir = join(out, mode, 'cancelled-job')
    const session = new AppSession({
      version: 'check',
      host: 'web',
      samplesDir: join(import.meta.dirname, '..', '..', 'resources', 'samples'),
      recordInProcess,
      recordingsDir,
    })
    const { jobId } = session.recordWorkload({ workload: LONG.workload, strategy: LONG.strategy, params: LONG.workloadParams })
    while (!/\d+ events/.test(session.jobs.status(jobId).phase) && session.jobs.status(jobId).state === 'running') await sleep(20)
    await sleep(CANCEL_AFTER_MS)
    const cancelledAt = performance.now()
    session.jobs.cancel(jobId)
    while (session.jobs.counts().running > 0 && performance.now() - cancelledAt < 2 * ENDS_WITHIN_MS) await sleep(10)
    const took = performance.now() - cancelledAt
    const status = session.jobs.status(jobId)
    const ok = status.state === 'cancelled' && session.jobs.counts().running === 0 && took <= ENDS_WITHIN_MS
    if (!ok) failed = true
    console.log(
      `${ok ? 'ok' : 'FAIL'} ${mode} job cancelled: ${status.state} (${status.error?.message}), its recorder ended ${took.toFixed(0)} ms after the cancel`,
    )
    const files = (await readdir(recordingsDir).catch(() => [] as string[])).filter((f) => f.endsWith('.vramscope'))
    if (files.length !== 1) {
      failed = true
      console.log(`FAIL ${mode} job's recording: ${files.length} files in ${recordingsDir}`)
    } else if (!(await checkCancelledFile(`${mode} job's file`, join(recordingsDir, files[0]!)))) failed = true
  }
}
process.exit(failed ? 1 : 0)
