// Chart scales: byte ticks at binary-round values, labels without float noise, failure marks binned.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { binaryTicks, formatBytesPerPixel, formatSignificant, formatTickBytes, pixelSpans } from '../../../../src-renderer/viz/ticks.ts'

const MiB = 2 ** 20
const GiB = 2 ** 30

describe('chart ticks and scale labels', () => {
  it('ticks bytes at powers of two, never decimal steps in binary units (954 MiB, 1.86 GiB)', () => {
    const { ticks, top } = binaryTicks(1.9 * GiB)
    assert.deepEqual(ticks.map(formatTickBytes), ['0 B', '512 MiB', '1 GiB', '1.5 GiB', '2 GiB'])
    assert.equal(top, 2 * GiB)
    for (const max of [3 * MiB, 700 * MiB, 3.91 * GiB, 79 * GiB, 12345]) {
      const t = binaryTicks(max)
      const step = t.ticks[1]!
      assert.equal(step & (step - 1), 0, `${max}: step ${step} is a power of two`)
      assert.ok(t.top >= max && t.ticks.length >= 3 && t.ticks.length <= 6, `${max}: ${t.ticks.length} ticks up to ${t.top}`)
    }
  })

  it('formats bytes per pixel with three significant digits', () => {
    assert.equal(formatBytesPerPixel(322.4426369087142), '322 B/px')
    assert.equal(formatBytesPerPixel(0.0000104329681794447053), '0.0000104 B/px')
    assert.equal(formatBytesPerPixel(1.5 * MiB), '1.5 MiB/px')
    assert.equal(formatSignificant(12.3456), '12.3')
  })

  it('bins marks to pixel spans', () => {
    assert.deepEqual(
      pixelSpans([0, 1, 2, 10, 11, 50], (e) => e),
      [
        [0, 3],
        [10, 12],
        [50, 51],
      ],
    )
  })
})
