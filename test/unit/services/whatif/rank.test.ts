// The what-if lab's ranking (src-main/services/whatif/whatif.ts, rank): rows that run without a
// failure first, then the smallest fitting limit, where limits within the search's own precision
// (1 %) of each other are a tie ranked by peak reserved; the device's memory, never guessed
// silently (deviceOf); and the report's words
// (src-shared/whatif-report.ts, whatifWords) that say so.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { DEFAULT_DEVICE_BYTES, deviceOf } from '../../../../src-main/services/replay/device.ts'
import { rank, type WhatifRow } from '../../../../src-main/services/whatif/whatif.ts'
import type { StrategyResult } from '../../../../src-shared/results.ts'
import { whatifWords, type WordsOf } from '../../../../src-shared/whatif-report.ts'
import { formatBytes } from '../../../../src-main/services/units.ts'

const GiB = 2 ** 30

function row(conf: string, smallest: number | null, peakReserved: number, failures = 0): WhatifRow {
  return {
    rank: 0,
    conf,
    kind: 'pytorch',
    label: conf || 'defaults',
    line: `PYTORCH_ALLOC_CONF=${conf}`,
    strategy: 'caching',
    params: { preset: 'pytorch' },
    peakReserved,
    peakAllocated: peakReserved / 2,
    peakRequested: peakReserved / 2,
    segments: 1,
    maps: 0,
    deviceCalls: 1,
    fragmentationAtPeak: 0,
    failures,
    firstFailureEvent: failures > 0 ? 3 : -1,
    oomReproduced: 0,
    smallestFittingBytes: smallest,
    growing: false,
    replays: 1,
  }
}

const report = (rows: WhatifRow[]): WordsOf => ({
  rows,
  limit: { bytes: null, source: 'none' },
  deviceBytes: 80 * GiB,
  device: { bytes: 80 * GiB, source: 'assumed' },
  endsAtOom: false,
})

describe('rank', () => {
  it('ranks a row fitting 0.5 % lower but reserving 40 % more below the runner-up: a tie inside the search precision goes to peak reserved', () => {
    const greedy = row('max_split_size_mb:64', 10 * GiB, 14 * GiB)
    const lean = row('expandable_segments:True', 10.05 * GiB, 10 * GiB)
    const far = row('roundup_power2_divisions:2', 11 * GiB, 9 * GiB)
    const rows = [greedy, far, lean]
    rank(rows)
    assert.deepEqual(
      rows.map((r) => [r.conf, r.rank]),
      [
        ['expandable_segments:True', 1],
        ['max_split_size_mb:64', 2],
        ['roundup_power2_divisions:2', 3],
      ],
    )
    assert.ok(whatifWords(report(rows), formatBytes).notes.some((n) => /2 configurations fit within 1 % of each other.*peak reserved/.test(n)))
  })

  it('keeps rows whose smallest fitting limits differ by more than 1 % in that order, and failing rows last', () => {
    const rows = [row('a', null, 1 * GiB, 3), row('b', 10.2 * GiB, 1 * GiB), row('c', 10 * GiB, 5 * GiB)]
    rank(rows)
    assert.deepEqual(
      rows.map((r) => r.conf),
      ['c', 'b', 'a'],
    )
  })

  it('ranks failing rows that fit nowhere on the device by fewer failures before lower peak reserved', () => {
    // As on a snapshot of 2^45-2^52 B blocks: no row fits the device, and a row that fails two
    // requests reserves less than one that fails only the recorded out-of-memory.
    const rows = [row('roundup_power2_divisions:2', null, 1184 * GiB, 2), row('', null, 3232 * GiB, 1), row('max_split_size_mb:64', null, 3248 * GiB, 1)]
    rank(rows)
    assert.deepEqual(
      rows.map((r) => [r.conf, r.rank]),
      [
        ['', 1],
        ['max_split_size_mb:64', 2],
        ['roundup_power2_divisions:2', 3],
      ],
    )
  })
})

describe('whatifWords', () => {
  it('names no best row when every ranked row fails, and says only more memory helps', () => {
    const rows = [row('', 3 * GiB, 2 * GiB, 1), row('expandable_segments:True', 2.5 * GiB, 2 * GiB, 1)]
    rank(rows)
    const words = whatifWords({ ...report(rows), limit: { bytes: 2 * GiB, source: 'implied' } }, formatBytes)
    assert.equal(
      words.best,
      'best: none: every configuration fails under the 2.00 GiB limit, so no setting helps, only more memory: the least that runs it is 2.50 GiB (PYTORCH_ALLOC_CONF=expandable_segments:True)',
    )
  })
  it('says "at least" of every smallest fitting limit where the recording ended at its out-of-memory', () => {
    const words = whatifWords({ ...report([row('', 3 * GiB, 2 * GiB)]), endsAtOom: true }, formatBytes)
    assert.equal(words.smallest({ smallestFittingBytes: 3 * GiB }), 'at least 3.00 GiB')
    assert.equal(words.smallest({ smallestFittingBytes: null }), 'none')
  })
})

describe('deviceOf', () => {
  const recorded = (peakReserved: number) =>
    ({ name: 'pytorch (recorded)', strategy: 'pytorch', params: {}, summary: { peakReserved } }) as unknown as StrategyResult
  it('takes an H200-sized recording for at least its recorded peak, never for an H100', () => {
    assert.deepEqual(deviceOf(undefined, undefined, recorded(120 * GiB)), { bytes: 120 * GiB, source: 'recorded-peak' })
  })
  it("takes an out-of-memory's free memory plus reserved, else says the H100 is assumed, and --gpu over both", () => {
    const implied = {
      lowBytes: 70 * GiB,
      reservedBytes: 70 * GiB,
      highBytes: 71 * GiB,
      size: GiB,
      stream: '0',
      event: 3,
      deviceFree: 9 * GiB,
      source: 'fraction' as const,
    }
    assert.deepEqual(deviceOf(undefined, implied, recorded(70 * GiB)), { bytes: 79 * GiB, source: 'oom' })
    assert.deepEqual(deviceOf(undefined, undefined, recorded(3 * GiB)), { bytes: DEFAULT_DEVICE_BYTES, source: 'assumed' })
    assert.deepEqual(deviceOf(141e9, implied, recorded(120 * GiB)), { bytes: 141e9, source: 'option' })
  })
})
