// The caching strategy on traces of very many streams (each stream has its own cached blocks in
// PyTorch's allocator, so each has its own index): the release paths and the out-of-memory check
// cost what is cached, not every stream ever seen, so a replay of 50,000 streams under a small
// limit ends in seconds with the failures a program would see.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { replayTrace, type ReplayTarget } from '../../../../src-main/services/replay/replay.ts'
import { EventKind, allocateEvents, type RequestTrace } from '../../../../src-main/services/trace/model.ts'

const MiB = 2 ** 20
const STREAMS = 50_000

/** One 512-byte block on each of `streams` streams, in turn; freed at once when `freed`. */
function oneBlockPerStream(streams: number, freed: boolean): RequestTrace {
  const n = freed ? 2 * streams : streams
  const events = allocateEvents(n)
  for (let s = 0, i = 0; s < streams; s++) {
    events.kind[i] = EventKind.alloc
    events.id[i] = s
    events.size[i] = 512
    events.stream[i] = s
    events.time[i] = i++
    if (!freed) continue
    events.kind[i] = EventKind.free
    events.id[i] = s
    events.stream[i] = s
    events.time[i] = i++
  }
  return {
    meta: { source: 'synthetic', warnings: [], properties: {} },
    events,
    tables: { streams: Array.from({ length: streams }, (_, s) => String(s)), frames: [], stacks: [], tags: [], markers: [] },
  }
}

const targets: ReplayTarget[] = [
  { strategy: 'caching', params: { preset: 'pytorch' } },
  { strategy: 'caching', params: { preset: 'pytorch', expandable_segments: 'true' } },
  { strategy: 'caching', params: { preset: 'pytorch', garbage_collection_threshold: '0.6', max_reserved: String(8 * MiB) } },
  { strategy: 'caching', params: { preset: 'pytorch', max_split_size: '64MiB' } },
]

describe(`the caching strategy on ${STREAMS.toLocaleString('en')} streams`, () => {
  it('each stream allocates and frees one block under an 8 MiB limit: every segment is released for the next stream, all served, in seconds', async () => {
    const started = performance.now()
    const results = await replayTrace(oneBlockPerStream(STREAMS, true), targets, { cap: 8 * MiB, fragmentation: false })
    const ms = performance.now() - started
    for (const r of results) {
      assert.equal(r.summary.failures, 0, r.label)
      assert.ok(r.summary.peakReserved <= 8 * MiB, `${r.label}: peak ${r.summary.peakReserved}`)
    }
    assert.ok(ms < 20_000, `${results.length} replays took ${ms.toFixed(0)} ms`)
  })

  it('each stream keeps its block under an 8 MiB limit: the first four streams get a 2 MiB segment each, every later one fails, in seconds', async () => {
    const started = performance.now()
    const results = await replayTrace(oneBlockPerStream(STREAMS, false), targets, { cap: 8 * MiB, fragmentation: false })
    const ms = performance.now() - started
    for (const r of results) {
      assert.equal(r.summary.failures, STREAMS - 4, r.label)
      assert.equal(r.summary.peakReserved, 8 * MiB, r.label)
    }
    assert.ok(ms < 20_000, `${results.length} replays took ${ms.toFixed(0)} ms`)
  })
})
