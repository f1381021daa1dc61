// Replays run on the engine's one pool of replay threads, a thread a core, not on libuv's pool
// (docs/architecture.md, "One pool of replay threads"): in a process whose libuv pool has a single
// thread, a file read during two long replays is not held behind them, and the two replays run at
// once where there are two cores or more (with libuv's thread running them, they took turns).
import assert from 'node:assert/strict'
import { availableParallelism } from 'node:os'
import { it } from 'node:test'

import { loadNative } from '../../../../src-main/native.ts'
import { runBounded } from '../../../helpers/bounded-child.ts'

const CHILD = `
import { readFile } from 'node:fs/promises'
import { replayTrace } from './src-main/services/replay/replay.ts'
import { sampleTrace } from './test/helpers/trace-samples.ts'
const trace = sampleTrace(600000, 3)
const first = [], ended = []
const runs = [0, 1].map((i) =>
  replayTrace(trace, [{ label: 'slab', strategy: 'slab', params: {} }], {
    onProgress: () => (first[i] ??= performance.now()),
  }).then(() => (ended[i] = performance.now())),
)
while (first[0] === undefined) await new Promise((r) => setTimeout(r, 2))
const readStarted = performance.now()
await readFile('package.json')
const read = [readStarted, performance.now()]
await Promise.all(runs)
console.log(JSON.stringify({ first, ended, read }))
`

it("runs replays off libuv's pool: a file read is not held behind them, and two run at once on two cores", async (t) => {
  const run = await runBounded(['--import', 'tsx', '--input-type=module', '-e', CHILD], 120_000, 4 * 2 ** 30, { UV_THREADPOOL_SIZE: '1' })
  assert.equal(run.code, 0, run.stderr)
  const { first, ended, read } = JSON.parse(run.stdout.trim().split('\n').pop()!) as { first: number[]; ended: number[]; read: number[] }
  // The read ends while both replays still run (each takes hundreds of milliseconds).
  assert.ok(read[1]! < Math.min(...ended), `the read ended at ${read[1]!.toFixed(0)} ms, the replays at ${ended.map((e) => e.toFixed(0)).join(', ')} ms`)
  if (availableParallelism() < 2) {
    t.skip('one core: the pool has one thread, so the replays take turns')
    return
  }
  // Each had reported before the other ended: they overlapped.
  assert.ok(
    Math.max(...first) < Math.min(...ended),
    `first reports at ${first.map((e) => e.toFixed(0)).join(', ')} ms, ends at ${ended.map((e) => e.toFixed(0)).join(', ')} ms`,
  )
})

const LONG = `
import { replayTrace } from './src-main/services/replay/replay.ts'
import { sampleTrace } from './test/helpers/trace-samples.ts'
const trace = sampleTrace(1500000, 5)
let reported = false
const runs = [0, 1, 2].map(() =>
  replayTrace(trace, [{ label: 'slab', strategy: 'slab', params: {} }, { label: 'buddy', strategy: 'buddy', params: {} }], {
    onProgress: () => (reported = true),
  }),
)
`

it('lets a process exit mid-replay at once, its replays still running on the pool', async () => {
  const child = `${LONG}
while (!reported) await new Promise((r) => setTimeout(r, 2))
console.log('exiting')
process.exit(3)
`
  const run = await runBounded(['--import', 'tsx', '--input-type=module', '-e', child], 60_000, 4 * 2 ** 30)
  assert.equal(run.signal, null, run.stderr)
  assert.equal(run.code, 3, run.stderr)
  assert.match(run.stdout, /exiting/)
})

it('lets a worker thread that replays be terminated mid-replay, and the process go on', async () => {
  // The worker's replays outlive its environment: they are told to stop and post nothing back.
  const child = `
import { Worker } from 'node:worker_threads'
const worker = new Worker(new URL('data:text/javascript,' + encodeURIComponent(${JSON.stringify(
    `import { parentPort } from 'node:worker_threads'
const { createRequire } = await import('node:module')
const require = createRequire(process.cwd() + '/')
const addon = require('./build/Release/vramscope.node')
const n = 1500000
const kind = new Uint8Array(n), id = new Uint32Array(n), size = new Float64Array(n), stream = new Uint32Array(n), time = new Float64Array(n)
for (let i = 0; i < n; i++) { kind[i] = i % 2 === 0 ? 0 : 1; id[i] = i >> 1; size[i] = 4096 * (1 + (i % 97)); time[i] = i }
const targets = [{ label: 'slab', strategy: 'slab', params: {} }, { label: 'buddy', strategy: 'buddy', params: {} }]
for (let r = 0; r < 3; r++) addon.replay({ kind, id, size, stream, time }, targets, { progressInterval: 1000 }, () => parentPort.postMessage('progress'))`,
  )})))
await new Promise((resolve) => worker.once('message', resolve))
await worker.terminate()
await new Promise((r) => setTimeout(r, 1500))
console.log('went on')
`
  const run = await runBounded(['--input-type=module', '-e', child], 60_000, 4 * 2 ** 30)
  assert.equal(run.signal, null, run.stderr)
  assert.equal(run.code, 0, run.stderr)
  assert.match(run.stdout, /went on/)
})

it('orders targets longest first or in order (options.longestFirst) with the same results, and names a bad value', async () => {
  const addon = loadNative()
  const n = 200_000
  const kind = new Uint8Array(n),
    id = new Uint32Array(n),
    size = new Float64Array(n),
    stream = new Uint32Array(n),
    time = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    kind[i] = i % 2 === 0 ? 0 : 1
    id[i] = i >> 1
    size[i] = 4096 * (1 + (i % 97))
    time[i] = i
  }
  const columns = { kind, id, size, stream, time }
  const targets = ['caching', 'slab', 'buddy', 'vmm_growable'].map((strategy) => ({ label: strategy, strategy, params: {} }))
  const [longest, inOrder] = await Promise.all([true, false].map((longestFirst) => addon.replay(columns, targets, { threads: 2, longestFirst })))
  assert.deepEqual(
    longest!.map((r) => [r.label, r.summary.peakReserved, r.summary.deviceCalls, r.layout.address.length]),
    inOrder!.map((r) => [r.label, r.summary.peakReserved, r.summary.deviceCalls, r.layout.address.length]),
  )
  assert.throws(() => addon.replay(columns, targets, { longestFirst: 1 as unknown as boolean }), /options\.longestFirst/)
})
