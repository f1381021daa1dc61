// GPU machine (issue 7's fault tests): the GPU runs out of memory inside a workload, and nothing
// recorded before it is lost. gpu-record.sh runs it; three cases, each through the real CLI:
//   1. a built-in workload that grows a buffer past the device's memory (no cap: what the device
//      has free is the limit), on the caching strategy's real cudaMalloc backing;
//   2. a built-in workload under --cap, where the backing refuses;
//   3. a PyTorch program that holds 4 GiB tensors until torch.cuda.OutOfMemoryError, recorded by
//      the interposer; its own memory_stats() say how many segments and out-of-memories it saw.
// For each: the recorder ends cleanly and says "out of memory", the file opens, its request events
// hold the failure (a built-in workload's last request, the frees of what it held after it; a
// program's among its calls, with its recovery after it), every allocation before it is
// there, the kernels' data checks found no corruption, and the file replays.
//   node --import tsx scripts/gpu/oom-check.ts OUT_DIR  -> one line a check; exit 1 on a failure
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { EventKind } from '../../src-main/services/trace/model.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'

const ROOT = join(import.meta.dirname, '..', '..')
const out = process.argv[2] ?? '/tmp/oom-check'
mkdirSync(out, { recursive: true })
let failed = 0

function check(what: string, ok: boolean, detail = ''): void {
  if (!ok) failed++
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`)
}

function cli(args: string[], env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'vramscope.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    maxBuffer: 64 << 20,
  })
  return { status: r.status, stdout: r.stdout, stderr: r.stderr }
}

interface Info {
  events: number
  allocs: number
  frees: number
  markers: number
  recordedFailures: number
}

/** Opens the recording with `vramscope info` and with the reader; checks what every case shares. */
async function opened(name: string, file: string): Promise<{ info: Info; kinds: Uint8Array } | undefined> {
  const info = cli(['info', file, '--json'])
  check(`${name}: vramscope info opens the recording`, info.status === 0, info.status === 0 ? '' : info.stderr.trim())
  if (info.status !== 0) return undefined
  const i = JSON.parse(info.stdout) as Info
  const { trace } = await readTrace(file)
  const kinds = trace.events.kind
  check(`${name}: every request event is counted once`, i.events === i.allocs + i.frees + i.markers + i.recordedFailures, JSON.stringify(i))
  const replay = cli(['replay', file, '--strategies', 'caching:preset=pytorch', '--json'])
  check(`${name}: the recording replays`, replay.status === 0, replay.status === 0 ? '' : replay.stderr.trim())
  return { info: i, kinds }
}

async function builtIn(name: string, args: string[]): Promise<void> {
  const file = join(out, `${name}.vramscope`)
  const r = cli(['record', ...args, '-o', file, '--json'])
  check(
    `${name}: the recorder exits 0 (an out-of-memory ends a workload cleanly)`,
    r.status === 0,
    r.status === 0 ? '' : `exit ${r.status}: ${r.stderr.trim()}`,
  )
  if (r.status !== 0) return
  const o = JSON.parse(r.stdout) as {
    outOfMemory: boolean
    stoppedBy: string
    corruptedBytes: number
    verifiedBytes: number
    allocations: number
    frees: number
    events: number
  }
  check(`${name}: the workload says it ended by out of memory`, o.outOfMemory === true && /memory/i.test(o.stoppedBy), `stoppedBy "${o.stoppedBy}"`)
  check(
    `${name}: the kernels found every block's data intact`,
    o.corruptedBytes === 0 && o.verifiedBytes > 0,
    `${o.verifiedBytes} verified, ${o.corruptedBytes} corrupted`,
  )
  const f = await opened(name, file)
  if (!f) return
  check(
    `${name}: every allocation before the failure is in the file`,
    f.info.allocs === o.allocations && f.info.frees === o.frees && o.allocations > 0,
    `file ${f.info.allocs}/${f.info.frees}, recorder ${o.allocations}/${o.frees}`,
  )
  // The workload stops at the failure and gives back what it held: after it come frees only.
  const failure = f.kinds.indexOf(EventKind.oom)
  const after = Array.from(f.kinds.subarray(failure + 1))
  check(
    `${name}: the failure is the workload's last request, the frees of what it held follow`,
    f.info.recordedFailures === 1 && failure >= 0 && after.every((k) => k === EventKind.free || k === EventKind.marker),
    `${f.info.recordedFailures} failures, at event ${failure} of ${f.kinds.length}, then ${after.filter((k) => k === EventKind.free).length} frees`,
  )
}

async function program(): Promise<void> {
  const name = 'pytorch-oom'
  const file = join(out, `${name}.vramscope`)
  const statsFile = join(out, `${name}.memory_stats.json`)
  const r = cli(['record', '-o', file, '--json', '--', 'python3', join(ROOT, 'scripts', 'gpu', 'torch_oom.py'), statsFile])
  check(
    `${name}: the program caught the out-of-memory and exited 0 under the recorder`,
    r.status === 0,
    r.status === 0 ? '' : `exit ${r.status}: ${r.stderr.trim().slice(-2000)}`,
  )
  if (r.status !== 0) return
  const stats = JSON.parse(readFileSync(statsFile, 'utf8')) as Record<string, number>
  console.log(`     PyTorch: held ${stats['held_before_oom']} x 4 GiB, num_ooms ${stats['num_ooms']}, segment.all.allocated ${stats['segment.all.allocated']}`)
  const f = await opened(name, file)
  if (!f) return
  // PyTorch frees its cached blocks and asks cudaMalloc again before it raises: one out-of-memory
  // of the program's is one or more refused cudaMalloc calls.
  check(
    `${name}: the refused cudaMalloc calls are in the file`,
    f.info.recordedFailures >= (stats['num_ooms'] ?? 0) && (stats['num_ooms'] ?? 0) >= 1,
    `${f.info.recordedFailures} recorded, num_ooms ${stats['num_ooms']}`,
  )
  check(
    `${name}: every segment PyTorch obtained is an allocation in the file`,
    f.info.allocs === stats['segment.all.allocated'],
    `${f.info.allocs} recorded, ${stats['segment.all.allocated']} segments`,
  )
  const firstOom = f.kinds.indexOf(EventKind.oom)
  const after = Array.from(f.kinds.subarray(firstOom + 1)).filter((k) => k === EventKind.alloc).length
  check(
    `${name}: recording went on after the failure (the program's recovery is in the file)`,
    firstOom >= 0 && after >= 1,
    `${after} allocations after the first failure`,
  )
}

// 1 TiB: past any GPU's memory, so the driver refuses at the step where old and new buffers no
// longer fit together.
await builtIn('growable-past-device', ['--workload', 'growable_buffer', '--strategy', 'caching:preset=pytorch', '-p', 'to=1TiB'])
await builtIn('training-under-cap', ['--workload', 'training', '--strategy', 'caching:preset=pytorch', '--cap', '256MiB', '-p', 'steps=20'])
await program()
console.log(failed ? `oom-check: ${failed} FAILED` : 'oom-check: ALL PASSED')
process.exit(failed ? 1 : 0)
