// The floor as the what-if report says it first (src-shared/whatif-report.ts, whatifWords' floor),
// the same words for the CLI and the app's panel: against the recorded settings' peak reserved; where
// they fail under the limit, against the least memory they run the trace in; then the best setting's
// distance and the static plan's. Figures chosen so that every percentage is worked out by hand.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { whatifWords, type WordsOf } from '../../../src-shared/whatif-report.ts'

const MiB = 2 ** 20
const mib = (n: number): string => `${n / MiB} MiB`
type Row = WordsOf['rows'][number]
const row = (r: Partial<Row> & Pick<Row, 'kind' | 'conf' | 'label'>): Row => ({ rank: 0, failures: 0, smallestFittingBytes: null, peakReserved: 0, ...r })

function words(rows: Row[], floor?: WordsOf['floor'], endsAtOom = false) {
  return whatifWords(
    {
      rows,
      limit: { bytes: null, source: 'none' },
      deviceBytes: 80 * 1024 * MiB,
      device: { bytes: 80 * 1024 * MiB, source: 'assumed' },
      endsAtOom,
      ...(floor && { floor }),
    },
    mib,
  )
}

const FLOOR = { peakLiveBytes: 890 * MiB, peakLiveRoundedBytes: 900 * MiB, plannedBytes: 909 * MiB, plannedMs: 3 }

it("leads with the recorded settings' reserved bytes against the floor, the best setting's distance and the plan's", () => {
  const w = words(
    [
      row({ kind: 'recorded', conf: 'max_split_size_mb:128', label: 'recorded', rank: 2, peakReserved: 1000 * MiB, smallestFittingBytes: 1000 * MiB }),
      row({
        kind: 'pytorch',
        conf: 'expandable_segments:True',
        label: 'expandable',
        line: 'PYTORCH_ALLOC_CONF=expandable_segments:True',
        rank: 1,
        peakReserved: 945 * MiB,
        smallestFittingBytes: 945 * MiB,
      }),
    ],
    FLOOR,
  )
  assert.equal(
    w.floor,
    '1000 MiB reserved (the recorded settings); 900 MiB live at the peak: 100 MiB, 10 %, lost to fragmentation and caching; ' +
      'the best configuration (PYTORCH_ALLOC_CONF=expandable_segments:True) reserves 945 MiB, 5 % above the floor; ' +
      "a static plan of every block's lifetime reserves 909 MiB, 1 % above it",
  )
})

it('a best setting that fits in less than it reserves on the whole device is said by the least memory it runs the trace in (what ranks it)', () => {
  const w = words(
    [
      row({ kind: 'recorded', conf: '', label: 'recorded', rank: 2, peakReserved: 1000 * MiB, smallestFittingBytes: 1000 * MiB }),
      row({
        kind: 'pytorch',
        conf: 'max_split_size_mb:64',
        label: 'msplit64',
        line: 'PYTORCH_ALLOC_CONF=max_split_size_mb:64',
        rank: 1,
        peakReserved: 1350 * MiB,
        smallestFittingBytes: 927 * MiB,
      }),
    ],
    FLOOR,
  )
  assert.equal(
    w.floor,
    '1000 MiB reserved (the recorded settings); 900 MiB live at the peak: 100 MiB, 10 %, lost to fragmentation and caching; ' +
      `the best configuration (PYTORCH_ALLOC_CONF=max_split_size_mb:64) runs it in 927 MiB, 3 % above the floor (on the whole device it reserves 1350 MiB); ` +
      "a static plan of every block's lifetime reserves 909 MiB, 1 % above it",
  )
})

it('where the recorded settings fail under the limit, the least memory they run the trace in stands for their reserved bytes', () => {
  const w = words(
    [row({ kind: 'recorded', conf: '', label: 'recorded', rank: 1, failures: 1, peakReserved: 800 * MiB, smallestFittingBytes: 1200 * MiB })],
    FLOOR,
    true,
  )
  assert.equal(
    w.floor,
    '900 MiB live at the peak; the recorded settings run it in at least 1200 MiB: 300 MiB, 25 %, lost to fragmentation and caching; ' +
      "a static plan of every block's lifetime reserves 909 MiB, 1 % above it",
  )
})

it("PyTorch's defaults stand in where nothing was recorded; a plan past 2^52 B (0) and a report without a floor say nothing of it", () => {
  const defaults = row({ kind: 'pytorch', conf: '', label: 'defaults', rank: 1, peakReserved: 1800 * MiB, smallestFittingBytes: 1800 * MiB })
  assert.equal(
    words([defaults], { ...FLOOR, plannedBytes: 0 }).floor,
    "1800 MiB reserved (PyTorch's defaults); 900 MiB live at the peak: 900 MiB, 50 %, lost to fragmentation and caching",
  )
  assert.equal(words([defaults]).floor, undefined)
})
