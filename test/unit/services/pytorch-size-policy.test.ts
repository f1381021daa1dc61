// The TypeScript size policy (src-main/services/pytorch-size-policy.ts) held equal to the native
// one: each configuration, parsed by src-shared/pytorch-conf.ts, drives both the TypeScript
// functions and the caching strategy's pytorch preset (the real addon, simulated backing), and
// every request size must come out the same. One request on an empty allocator shows the native
// rounding as the block it hands out and get_allocation_size as the memory it reserves (with
// expandable segments, the pages it maps); a request after a freed one shows whether the cached
// segment served it (max_split_size, max_non_split_rounding).
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import {
  DEFAULT_SIZE_POLICY,
  allocationSize,
  expandablePageSize,
  mayServe,
  poolOf,
  roundSize,
  roundupPower2NextDivision,
  segmentAllocationSize,
  shouldSplit,
  sizePolicyOf,
  type SizePolicy,
} from '../../../src-main/services/pytorch-size-policy.ts'
import { Allocator } from '../../../src-main/services/replay/allocators.ts'
import { confModel, parsePytorchConf } from '../../../src-shared/pytorch-conf.ts'

const MiB = 2 ** 20
/** Room for the largest request (2^40 B, up to 2^41 B after rounding) and a second segment. */
const CAPACITY = 2 ** 46

const DIVISIONS = [
  '',
  'roundup_power2_divisions:4',
  'roundup_power2_divisions:8',
  'roundup_power2_divisions:[256:1,512:2,1024:4,>:8]',
  'roundup_power2_divisions:[2:16,64:4,>:2]',
]
const CONFS = [
  ...DIVISIONS,
  ...DIVISIONS.map((d) => (d ? `expandable_segments:True,${d}` : 'expandable_segments:True')),
  'max_split_size_mb:64',
  'max_split_size_mb:128,roundup_power2_divisions:4',
  'max_split_size_mb:64,max_non_split_rounding_mb:256',
  'expandable_segments:True,max_split_size_mb:256',
]

/** A fixed-seed generator (mulberry32), so every run tries the same sizes. */
function random(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32
  }
}

/** Powers of two from 1 B to 2^40 B and their neighbours, PyTorch's thresholds, and random sizes of every magnitude. */
function sizes(): number[] {
  const out = new Set<number>()
  for (let e = 0; e <= 40; e++) for (const d of [-513, -512, -511, -1, 0, 1, 511, 512, 513]) out.add(2 ** e + d)
  for (const t of [1, 1.25, 1.5, 2, 2.5, 10, 19.5, 20, 20.5, 63, 64, 100, 128, 256, 300, 512, 1000, 1024, 3000])
    for (const d of [-1, 0, 1]) out.add(Math.round(t * MiB) + d)
  const next = random(30)
  for (let i = 0; i < 2000; i++) {
    const e = Math.floor(next() * 40)
    out.add(2 ** e + Math.floor(next() * 2 ** e) + Math.floor(next() * 2 ** Math.min(e, 16)))
  }
  return [...out].filter((s) => s >= 1 && s <= 2 ** 40 + 513).sort((a, b) => a - b)
}

function setup(conf: string): { policy: SizePolicy; allocator: Allocator } {
  const parsed = parsePytorchConf(conf)
  const model = confModel(parsed, 0, CAPACITY)
  assert.equal(model.strategy, 'caching')
  return { policy: sizePolicyOf(parsed), allocator: new Allocator(model.strategy, model.params, 'simulated', { capacity: CAPACITY }) }
}

/** What one request on an empty allocator should leave: the block handed out and the memory reserved. */
function expectedAlone(bytes: number, policy: SizePolicy): { block: number; reserved: number } {
  const size = roundSize(bytes, policy)
  const pool = poolOf(size)
  const reserved = policy.expandableSegments ? Math.ceil(size / expandablePageSize(pool)) * expandablePageSize(pool) : segmentAllocationSize(size)
  return { block: shouldSplit(reserved, size, pool, policy) ? size : reserved, reserved }
}

function drain(allocator: Allocator, addresses: bigint[]): void {
  for (const a of addresses) allocator.deallocate(a)
  allocator.trim()
  assert.equal(allocator.stats().reservedLive, 0, 'trim gives every segment back')
}

const SIZES = sizes()

it('the sizes tried span 1 B to 2^40 B', () => {
  assert.ok(SIZES.length > 2000, `${SIZES.length} sizes`)
  assert.equal(SIZES[0], 1)
  assert.ok(SIZES.at(-1)! > 2 ** 40)
})

describe('one request on an empty allocator: the block and the reserved memory are the same in TypeScript and natively', () => {
  for (const conf of CONFS) {
    it(conf || '(default)', () => {
      const { policy, allocator } = setup(conf)
      try {
        let mismatches = 0
        for (const bytes of SIZES) {
          const address = allocator.allocate(bytes)
          const stats = allocator.stats()
          const expected = expectedAlone(bytes, policy)
          const got = { block: stats.roundedLive, reserved: stats.reservedLive }
          if (got.block !== expected.block || got.reserved !== expected.reserved) {
            if (++mismatches <= 5) assert.deepEqual(got, expected, `${conf || '(default)'}: a request of ${bytes} B`)
          }
          // With expandable segments every block is split to its rounded size: round_size itself.
          if (policy.expandableSegments) assert.equal(stats.roundedLive, roundSize(bytes, policy), `round_size(${bytes})`)
          drain(allocator, [address])
        }
        assert.equal(mismatches, 0)
      } finally {
        allocator.dispose()
      }
    })
  }
})

describe('a request after a freed one: whether the cached segment serves it is the same in TypeScript and natively', () => {
  const sizesMiB = [0.25, 0.5, 1, 1.5, 5, 12, 19.75, 30, 63, 64, 65, 80, 100, 128, 150, 200, 300, 400]
  // 82 MiB and 146 MiB are exactly max_non_split_rounding (20 MiB, 256 MiB) below the 102 MiB and
  // 402 MiB segments of 100 MiB + 1 B and 400 MiB + 1 B: the edge of the oversize rule.
  const pairSizes = [...sizesMiB.map((m) => m * MiB + 1), 82 * MiB, 82 * MiB - 512, 146 * MiB, 146 * MiB - 512]
  for (const conf of ['', 'max_split_size_mb:64', 'max_split_size_mb:128,roundup_power2_divisions:4', 'max_split_size_mb:64,max_non_split_rounding_mb:256']) {
    it(conf || '(default)', () => {
      const { policy, allocator } = setup(conf)
      try {
        let served = 0
        let refused = 0
        for (const first of pairSizes)
          for (const second of pairSizes) {
            allocator.deallocate(allocator.allocate(first))
            assert.equal(allocator.stats().pendingBytes, 0)
            const cached = segmentAllocationSize(roundSize(first, policy))
            const size = roundSize(second, policy)
            const pool = poolOf(size)
            const serves = pool === poolOf(roundSize(first, policy)) && cached >= size && mayServe(cached, size, policy)
            if (serves) served++
            else if (pool === poolOf(roundSize(first, policy)) && cached >= size) refused++
            const segment = serves ? cached : segmentAllocationSize(size)
            const address = allocator.allocate(second)
            const stats = allocator.stats()
            assert.deepEqual(
              { block: stats.roundedLive, reserved: stats.reservedLive },
              { block: shouldSplit(segment, size, pool, policy) ? size : segment, reserved: serves ? cached : cached + segment },
              `${conf || '(default)'}: ${first} B freed, then ${second} B`,
            )
            drain(allocator, [address])
          }
        assert.ok(served > 0)
        // Only max_split_size refuses a cached block large enough.
        if (policy.maxSplitSize === Infinity) assert.equal(refused, 0)
        else assert.ok(refused > 0, 'some large enough cached segments are refused')
      } finally {
        allocator.dispose()
      }
    })
  }
})

it("PyTorch's examples and thresholds", () => {
  assert.equal(roundupPower2NextDivision(1200, 4), 1280)
  assert.equal(roundupPower2NextDivision(1024, 4), 1024)
  const four = sizePolicyOf(parsePytorchConf('roundup_power2_divisions:4'))
  // Divisions apply only above 512 B times their number; below, 512 B steps.
  assert.equal(roundSize(1200, four), 1536)
  assert.equal(roundSize(3 * MiB + 1, four), 3.5 * MiB)
  assert.equal(roundSize(1), 512)
  assert.equal(roundSize(513), 1024)
  assert.equal(poolOf(MiB), 'small')
  assert.equal(poolOf(MiB + 512), 'large')
  assert.equal(allocationSize(MiB), 2 * MiB)
  assert.equal(allocationSize(MiB + 1), 20 * MiB)
  assert.equal(allocationSize(10 * MiB - 512), 20 * MiB)
  assert.equal(allocationSize(10 * MiB), 10 * MiB)
  assert.equal(allocationSize(10 * MiB + 1), 12 * MiB)
  assert.equal(allocationSize(2 ** 52 + 1), 2 ** 52 + 2 * MiB, 'exact near 2^53')
  assert.equal(roundSize(2 ** 53 - 513), 2 ** 53 - 512)
  // The list form: intervals below the first entry take its value, '>' those after the last entry.
  const list = sizePolicyOf(parsePytorchConf('roundup_power2_divisions:[256:1,512:2,1024:4,>:8]'))
  assert.deepEqual(list.roundupDivisions, [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 8, 8, 8, 8, 8])
  assert.deepEqual(DEFAULT_SIZE_POLICY.roundupDivisions, new Array(16).fill(0))
})
