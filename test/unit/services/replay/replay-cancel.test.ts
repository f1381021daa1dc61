// A cancel reaches the native loop within 100 ms (services/replay/replay.ts raises the addon's
// cancel flag, which the replay's threads read every 64 events): replays running on every thread
// and more waiting for one, and the what-if lab mid-grid, all reject with CANCELLED within 100 ms
// of the abort, however long their traces would take to replay.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import type { NativeError } from '../../../../src-main/services/replay/allocators.ts'
import { replayTrace } from '../../../../src-main/services/replay/replay.ts'
import { runWhatif } from '../../../../src-main/services/whatif/whatif.ts'
import { sampleTrace } from '../../../helpers/trace-samples.ts'

/** Events enough that one replay of them takes seconds here, so each is cut short mid-run. */
const EVENTS = 600_000
const WITHIN_MS = 100

describe('a cancel reaches the native loop', () => {
  const trace = sampleTrace(EVENTS, 7)

  /**
   * Runs `trial` (which returns how long after its abort the last rejection came) until one is
   * within WITHIN_MS, at most three times: a moment of load on a shared machine can stretch one
   * trial, while a cancel that waits for the replay to finish misses every one by seconds.
   */
  async function within(trial: () => Promise<number>): Promise<void> {
    const took: number[] = []
    while (took.length < 3) {
      took.push(await trial())
      if (took[took.length - 1]! < WITHIN_MS) return
    }
    assert.fail(`the last rejection came ${took.map((ms) => ms.toFixed(1)).join(', ')} ms after the abort, in ${took.length} trials`)
  }

  it(`stops replays on every thread, and those waiting for one, within ${WITHIN_MS} ms of the abort`, () =>
    within(async () => {
      // Six replays of two targets: more targets than the pool has threads, so some wait for one.
      const controller = new AbortController()
      let progressed = 0
      const ended: number[] = []
      const runs = Array.from({ length: 6 }, () =>
        replayTrace(
          trace,
          [
            { label: 'a', strategy: 'caching', params: {} },
            { label: 'b', strategy: 'slab', params: {} },
          ],
          { layout: true, signal: controller.signal, onProgress: () => progressed++ },
        ).then(
          () => 'done',
          (e: NativeError) => {
            ended.push(performance.now())
            return e.code
          },
        ),
      )
      // Mid-run: the first progress report has come (65,536 events into a replay).
      while (progressed === 0) await new Promise((r) => setTimeout(r, 5))
      const aborted = performance.now()
      controller.abort(new Error('the user cancelled'))
      assert.deepEqual(await Promise.all(runs), Array(6).fill('CANCELLED'))
      return Math.max(...ended) - aborted
    }))

  it(`stops the what-if lab mid-grid within ${WITHIN_MS} ms`, () =>
    within(async () => {
      const controller = new AbortController()
      let ended = 0
      const run = runWhatif(
        { trace, strategies: [] },
        {
          confs: ['expandable_segments:True', 'max_split_size_mb:128', 'roundup_power2_divisions:4', 'garbage_collection_threshold:0.8'],
          capBytes: 2 ** 36,
          signal: controller.signal,
        },
      ).then(
        () => 'done',
        (e: NativeError) => {
          ended = performance.now()
          return e.code
        },
      )
      // Let it get going: its replays run on the native threads now.
      await new Promise((r) => setTimeout(r, 300))
      const aborted = performance.now()
      controller.abort(new Error('the user cancelled'))
      assert.equal(await run, 'CANCELLED')
      return ended - aborted
    }))
})
