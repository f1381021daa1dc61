// Figures as the UI prints them: times precise enough to tell events apart, diff changes of ratios
// in percentage points, a strategy only one side holds named plainly.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { diffHeading, formatDiffRelative, formatDiffValue } from '../../../../src-renderer/viz/diff.ts'
import { formatBytes, formatCount, formatTime, formatTimePrecise } from '../../../../src-renderer/viz/format.ts'

describe('UI formats', () => {
  it('writes counts with thousands separators, as en-US does', () => {
    for (const n of [0, 7, 999, 1000, 12_345, 999_999, 1_000_000, 4_294_967_295, -1, -1234, -1_000_000, 2 ** 53 + 2, 1.5, -0.25])
      assert.equal(formatCount(n), n.toLocaleString('en-US'), String(n))
    assert.equal(formatCount(Number.NaN), '—')
  })

  it('tells apart two times that formatTime rounds to the same "6.47 s"', () => {
    const a = 6_470_123_456
    const b = 6_470_398_000
    assert.equal(formatTime(a), formatTime(b))
    assert.equal(formatTimePrecise(a), '6.470123 s')
    assert.equal(formatTimePrecise(b), '6.470398 s')
    assert.equal(formatTimePrecise(12_345_678), '12.346 ms')
    assert.equal(formatTimePrecise(2_500), '2.500 µs')
    assert.equal(formatTimePrecise(250_000), '250 µs')
  })

  it('diff: ratio changes in percentage points, relative changes in %', () => {
    assert.equal(formatDiffValue('ratio', 0.045, true), '+4.5 pt')
    assert.equal(formatDiffValue('ratio', -0.1, true), '-10.0 pt')
    assert.equal(formatDiffValue('ratio', 0.5), '50.0 %')
    assert.equal(formatDiffValue('count', 3, true), '+3')
    assert.equal(formatDiffRelative(0.25), '+25.0 %')
    assert.equal(formatDiffRelative(undefined), '—')
  })

  it('bytes: fractions with three significant digits, never a raw float', () => {
    assert.equal(formatBytes(322.4426369087142), '322 B')
    assert.equal(formatBytes(0.0000104329681794447053), '0.0000104 B')
    assert.equal(formatBytes(512), '512 B')
    assert.equal(formatBytes(1536), '1.50 KiB')
  })

  it('diff: a strategy only one side holds', () => {
    assert.equal(diffHeading({ name: 'pytorch (recorded)', onlyIn: 'b' }), 'pytorch (recorded) — only in B')
    assert.equal(diffHeading({ name: 'slab' }), 'slab')
  })
})
