// Sizes as people write them (src-main/services/units.ts): binary units (GiB, and the bare letter
// G) are powers of 1024, decimal ones (GB) powers of 1000 and never read as GiB; the native
// library's parse_size reads the same text to the same bytes.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { loadNative } from '../../../src-main/native.ts'
import { formatBytes, parseByteSize } from '../../../src-main/services/units.ts'

it('reads binary and decimal units apart', () => {
  assert.equal(parseByteSize('24GiB'), 24 * 2 ** 30)
  assert.equal(parseByteSize('24G'), 24 * 2 ** 30)
  assert.equal(parseByteSize('3GB'), 3e9)
  assert.equal(parseByteSize('80 GB'), 80e9)
  assert.equal(parseByteSize('4MB'), 4e6)
  assert.equal(parseByteSize('1.5MiB'), 1.5 * 2 ** 20)
  assert.equal(parseByteSize('2kB'), 2000)
  assert.equal(parseByteSize('512'), 512)
  assert.throws(() => parseByteSize('3 GiBs'), /unknown unit 'GiBs'.*kB, MB, GB, TB decimal/)
  assert.throws(() => parseByteSize('1.5kB5'), /not a size/)
  assert.throws(() => parseByteSize('1.0005kB'), /not a whole number of bytes/)
  assert.equal(formatBytes(3e9), '2.79 GiB')
})

it('means the same bytes to a strategy parameter as to the CLI', () => {
  const native = loadNative()
  // A block of 256 kB (256,000 B: a multiple of 256) serves a 1-byte request with all of it.
  const decimal = new native.Allocator('block_pool', { block_size: '256kB', pool_size: '64MiB' }, 'simulated')
  decimal.allocate(1)
  assert.equal(decimal.stats().roundedLive, parseByteSize('256kB'))
  assert.equal(decimal.stats().roundedLive, 256_000)
  decimal.dispose()
  const binary = new native.Allocator('block_pool', { block_size: '256KiB', pool_size: '64MiB' }, 'simulated')
  binary.allocate(1)
  assert.equal(binary.stats().roundedLive, 262_144)
  binary.dispose()
  // 1 MB is not a multiple of 256 B: refused, not read as 1 MiB.
  assert.throws(() => new native.Allocator('block_pool', { block_size: '1MB' }, 'simulated'), /block_size must be a multiple of 256 B/)
})
