// GPU machine: the app's record:workload path end to end, in both recorder modes (a child process,
// as the web host runs it; in the session's own process, as the desktop app's utility process runs
// it): records a short inference workload on buddy and a training one on caching (pytorch), opens
// each recording as the app would, and prints what it holds.
//   node --import tsx scripts/gpu/app-record-check.ts OUT_DIR
import { join } from 'node:path'

import { AppSession } from '../../src-main/services/app-session.ts'

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
  for (const request of [
    { workload: 'inference', strategy: 'buddy', params: { requests: '40' } },
    { workload: 'training', strategy: 'caching:preset=pytorch', params: { steps: '6' } },
  ]) {
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
process.exit(failed ? 1 : 0)
