// The profiler's recorded reserved curve in the app's summary of a torch.profiler trace
// (TraceSummary.recordedReserved, src-main/services/app-session.ts): bucketed as the requested
// bytes are (the same bucket ends), each bucket the largest Total Reserved the curve holds in
// it, its peak the profiler's own; an input without such a curve has none. The bucketing itself
// is checked against a plain walk of every event.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { describe, it } from 'node:test'

import type { TraceSummary } from '../../src-shared/contract.ts'
import { bucketStepSeries } from '../../src-shared/requested.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { fixture } from '../helpers/cli.ts'

const FIELD = fixture('pytorch/field-profile.json.gz')

async function opened(s: AppSession, started: { jobId: string }): Promise<TraceSummary> {
  const status = await s.jobStatus(started.jobId, 30_000)
  assert.equal(status.state, 'done', `the open finished: ${JSON.stringify(status)}`)
  return status.summary!
}

/** Bucket maxima of the step curve by reading it at every event (NaN before its first point). */
function plainBuckets(index: ArrayLike<number>, bytes: ArrayLike<number>, end: ArrayLike<number>): number[] {
  const out: number[] = []
  let p = -1
  let start = 0
  for (let b = 0; b < end.length; b++) {
    let hi = Number.NaN
    for (let i = start; i < end[b]!; i++) {
      while (p + 1 < index.length && index[p + 1]! <= i) p++
      const v = p < 0 ? Number.NaN : bytes[p]!
      if (!(v <= hi)) hi = v
    }
    out.push(hi)
    start = end[b]!
  }
  return out
}

describe("the profiler's recorded reserved curve in the app's summary", () => {
  it('comes with a profiler trace, bucketed as the requested bytes, its peak the recorded one', async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: import.meta.dirname })
    const summary = await opened(s, s.openBytes('field-profile.json.gz', new Uint8Array(await readFile(FIELD)), 'page-1'))
    s.closePage('page-1')
    const input = await openInput(FIELD)
    const series = input.trace.recordedReserved!
    const recorded = summary.recordedReserved!
    assert.ok(recorded, 'the summary carries the curve')
    assert.deepEqual(recorded.end, summary.requested.end, 'the same buckets as the requested bytes')
    assert.equal(String(recorded.peak), input.trace.meta.properties['kineto.peak_reserved'])
    const plain = plainBuckets(series.index, series.bytes, recorded.end).map((v) => (Number.isNaN(v) ? null : v))
    assert.deepEqual(recorded.max, plain)
    assert.ok(recorded.max.every((v) => v !== null && v <= recorded.peak))
  })

  it('is absent for an input that recorded no reserved curve (an RMM log)', async () => {
    const s = new AppSession({ version: 'test', host: 'web', samplesDir: import.meta.dirname })
    const rmm = 'Thread,Time,Action,Pointer,Size,Stream\n1,0.000001,allocate,0x7f0000000000,1048576,0x0\n1,0.000002,free,0x7f0000000000,1048576,0x0\n'
    const summary = await opened(s, s.openBytes('two.csv', new TextEncoder().encode(rmm), 'page-1'))
    s.closePage('page-1')
    assert.equal(summary.recordedReserved, undefined)
  })

  it('buckets a step curve as a plain walk of every event does', () => {
    let seed = 5
    const rand = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32
    for (const [n, buckets] of [
      [1, 16],
      [10, 16],
      [1000, 16],
      [1000, 7],
      [5000, 2048],
    ] as const) {
      const index: number[] = []
      const bytes: number[] = []
      for (let i = Math.floor(rand() * 3); i < n; i += 1 + Math.floor(rand() * 40)) {
        index.push(i)
        bytes.push(Math.floor(rand() * 100) * 2097152)
      }
      const b = bucketStepSeries(index, bytes, n, buckets)
      assert.ok(b.end.length <= buckets && b.end.at(-1) === n, `${n} events in ${b.end.length} buckets`)
      assert.deepEqual([...b.max], plainBuckets(index, bytes, b.end), `${n} events, ${buckets} buckets`)
      assert.equal(b.peak, Math.max(0, ...bytes))
    }
  })
})
