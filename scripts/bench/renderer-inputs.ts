// Synthetic request traces for the renderer benchmark (scripts/bench/renderer.ts), written with the
// trace writer as any recording would be:
//   - a 1 M-event training loop: a working set of about 5000 blocks on 4 streams, a marker every
//     10 000 events (a step);
//   - a trace that keeps about 100 000 blocks live: 100 000 allocs, then frees and allocs in turns,
//     so that every frame of playback changes blocks while 100k stay on the map.
// Deterministic (a fixed LCG), so runs compare.
import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'

import { writeTrace } from '../../src-main/services/trace/file.ts'
import { EventKind, allocateEvents, type RequestTrace } from '../../src-main/services/trace/model.ts'

function lcg(seed: number): () => number {
  let state = seed >>> 0
  return () => (state = (state * 1103515245 + 12345) >>> 0) / 4294967296
}

const FRAMES = Array.from({ length: 128 }, (_, i) => ({ name: `layer_${i}.forward`, filename: 'model.py', line: 10 + i }))
const STACKS = Array.from({ length: 64 }, (_, i) => Uint32Array.from([i, i + 1, i + 2]))

/** Allocs and frees around a working set of `workingSet` blocks; a marker every `stepEvents`. */
export function trainingLoopTrace(events: number, workingSet: number, stepEvents: number): RequestTrace {
  const e = allocateEvents(events)
  const rand = lcg(12345)
  const live: number[] = []
  let next = 0
  let markers = 0
  for (let i = 0; i < events; i++) {
    e.time[i] = i * 850 + Math.floor(rand() * 800)
    e.stream[i] = i % 4
    if (stepEvents > 0 && i % stepEvents === stepEvents - 1) {
      e.kind[i] = EventKind.marker
      e.id[i] = markers++
    } else if (live.length > workingSet || (live.length > 0 && rand() < 0.48)) {
      const k = Math.floor(rand() * live.length)
      e.kind[i] = EventKind.free
      e.id[i] = live[k]!
      live[k] = live[live.length - 1]!
      live.pop()
    } else {
      e.kind[i] = EventKind.alloc
      e.id[i] = next
      live.push(next++)
      // Mostly small tensors, some large ones: sizes from 512 B to about 100 MB.
      e.size[i] = rand() < 0.9 ? 512 * (1 + Math.floor(rand() * 2000)) : 512 * (1 + Math.floor(rand() * 200_000))
      e.stack[i] = Math.floor(rand() * STACKS.length)
    }
  }
  return {
    meta: { source: 'synthetic', warnings: [], properties: { generator: 'scripts/bench/renderer-inputs.ts', shape: `training loop, ${workingSet} live` } },
    events: e,
    tables: { streams: ['0', '0x1', '0x2', '0x3'], frames: FRAMES, stacks: STACKS, tags: [], markers: Array.from({ length: markers }, (_, i) => `step ${i}`) },
  }
}

/** `live` allocs, then `churn` events that free a random block and allocate one, in turns. */
export function manyLiveTrace(live: number, churn: number): RequestTrace {
  const n = live + churn
  const e = allocateEvents(n)
  const rand = lcg(777)
  const held: number[] = []
  let next = 0
  for (let i = 0; i < n; i++) {
    e.time[i] = i * 1000
    e.stream[i] = i % 2
    const allocate = i < live || (i - live) % 2 === 1
    if (allocate) {
      e.kind[i] = EventKind.alloc
      e.id[i] = next
      held.push(next++)
      // 512 B to 64 KiB: 100k blocks hold a few GiB, as a model's activations do.
      e.size[i] = 512 * (1 + Math.floor(rand() * 128))
      e.stack[i] = Math.floor(rand() * STACKS.length)
    } else {
      const k = Math.floor(rand() * held.length)
      e.kind[i] = EventKind.free
      e.id[i] = held[k]!
      held[k] = held[held.length - 1]!
      held.pop()
    }
  }
  return {
    meta: { source: 'synthetic', warnings: [], properties: { generator: 'scripts/bench/renderer-inputs.ts', shape: `${live} live, ${churn} churn` } },
    events: e,
    tables: { streams: ['0', '0x1'], frames: FRAMES, stacks: STACKS, tags: [], markers: [] },
  }
}

export interface RendererInputs {
  /** 1 M events, about 5000 blocks live. */
  millionEvents: string
  /** About 100 000 blocks live throughout its second part. */
  hundredThousandLive: string
  /** First event at which 100 000 blocks are live. */
  manyLiveFrom: number
}

/** Writes the inputs into `dir` unless they are there already (same names = same content). */
export async function writeRendererInputs(dir: string): Promise<RendererInputs> {
  await mkdir(dir, { recursive: true })
  const millionEvents = join(dir, 'training-1m-v1.vramscope')
  const hundredThousandLive = join(dir, 'live-100k-v1.vramscope')
  if (!existsSync(millionEvents)) await writeTrace(millionEvents, trainingLoopTrace(1_000_000, 5000, 10_000))
  if (!existsSync(hundredThousandLive)) await writeTrace(hundredThousandLive, manyLiveTrace(100_000, 100_000))
  return { millionEvents, hundredThousandLive, manyLiveFrom: 100_000 }
}
