// Every strategy the library lists, driven through the real addon on the simulated backing:
// allocation and freeing with stats and layout in agreement, out-of-memory and bad frees with
// typed errors and the state intact, stream-ordered frees, trim and reset, tracing.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { listStrategies, traceOpNames, type Allocator, type NativeError } from '../../../../src-main/services/replay/allocators.ts'
import { CAPACITY, MiB, checkLayout, makeAllocator, strategyConfigs, unchangedPart } from './strategy-configs.ts'

const SIZES = [1, 256, 1000, 4096, 5000, 65536]

function nativeError(fn: () => unknown): NativeError {
  try {
    fn()
  } catch (error) {
    return error as NativeError
  }
  assert.fail('expected an error')
}

function freeAll(allocator: Allocator, held: Map<bigint, number>): void {
  for (const address of held.keys()) allocator.deallocate(address)
  held.clear()
}

it("caching's default preset is pow2, and the library still takes its former name seed as the same preset", () => {
  const preset = listStrategies()
    .find((s) => s.name === 'caching')!
    .params.find((p) => p.name === 'preset')!
  assert.equal(preset.default, 'pow2')
  const trace = (params: Record<string, string>): number[] => {
    const allocator = makeAllocator({ label: 'caching', strategy: 'caching', params })
    try {
      const sizes = [1, 513, 3000, 5 * MiB, 100, 64 * MiB]
      const addresses = sizes.map((size) => allocator.allocate(size))
      const stats = allocator.stats()
      for (const address of addresses) allocator.deallocate(address)
      return [...addresses.map(Number), stats.roundedLive, stats.reservedLive]
    } finally {
      allocator.dispose()
    }
  }
  assert.deepEqual(trace({ preset: 'seed' }), trace({ preset: 'pow2' }))
  assert.deepEqual(trace({}), trace({ preset: 'pow2' }))
})

it('the library lists strategies, each with a description and typed parameters', () => {
  const all = listStrategies()
  assert.ok(all.length > 0)
  assert.equal(new Set(all.map((s) => s.name)).size, all.length, 'names are unique')
  for (const s of all) {
    assert.match(s.name, /^[a-z_]+$/)
    assert.ok(s.description.length > 10, `${s.name} has a description`)
    assert.ok(['cuda_malloc', 'cuda_vmm', 'cuda_async'].includes(s.cudaBacking), `${s.name}.cudaBacking`)
    for (const p of s.params) {
      assert.ok(['size', 'uint', 'double', 'bool', 'string', 'size_list'].includes(p.kind), `${s.name}.${p.name}.kind`)
      assert.ok(p.default.length > 0 && p.description.length > 0, `${s.name}.${p.name} documented`)
    }
  }
})

for (const config of strategyConfigs()) {
  describe(`strategy ${config.label}`, () => {
    it('allocates and frees with stats, walk and held blocks in agreement', () => {
      const a = makeAllocator(config)
      const held = new Map<bigint, number>()
      assert.equal(a.allocate(0), 0n, '0 bytes gives the null address')
      for (const size of SIZES) for (const stream of [0, 0]) held.set(a.allocate(size, stream), size)
      assert.equal(held.size, SIZES.length * 2, 'every address is distinct')
      checkLayout(a, held)
      const peak = a.stats()
      let i = 0
      for (const [address] of held)
        if (i++ % 2 === 0) {
          a.deallocate(address)
          held.delete(address)
        }
      checkLayout(a, held)
      freeAll(a, held)
      checkLayout(a, held)
      const s = a.stats()
      assert.equal(s.allocations, SIZES.length * 2)
      assert.equal(s.deallocations, SIZES.length * 2)
      assert.equal(s.requestedLive, 0)
      assert.equal(s.requestedPeak, peak.requestedLive)
      assert.ok(s.reservedPeak >= peak.reservedLive)
      a.dispose()
      assert.equal(a.disposed, true)
      assert.equal(nativeError(() => a.stats()).code, 'DISPOSED')
    })

    it('refuses a request larger than the device with OUT_OF_MEMORY and changes nothing', () => {
      const a = makeAllocator(config)
      const held = new Map([[a.allocate(4096), 4096]])
      const before = a.stats()
      const size = CAPACITY + 1
      const error = nativeError(() => a.allocate(size))
      assert.equal(error.code, 'OUT_OF_MEMORY', error.message)
      assert.ok(error.requested! >= size, `requested ${error.requested} >= ${size}`)
      assert.ok(error.available! >= 0 && error.available! < error.requested!, `available ${error.available}`)
      assert.deepEqual(unchangedPart(a.stats()), unchangedPart(before))
      assert.equal(a.stats().failures, before.failures + 1)
      checkLayout(a, held)
    })

    it('runs out of memory under exhaustion with the state intact, and recovers after frees', () => {
      const a = makeAllocator(config)
      const held = new Map<bigint, number>()
      let error: NativeError | undefined
      for (let i = 0; i < (2 * CAPACITY) / MiB + 16 && !error; i++) {
        const before = a.stats()
        try {
          held.set(a.allocate(MiB), MiB)
        } catch (e) {
          error = e as NativeError
          assert.deepEqual(unchangedPart(a.stats()), unchangedPart(before))
        }
      }
      assert.ok(error, `a ${CAPACITY / MiB} MiB device runs out`)
      assert.equal(error.code, 'OUT_OF_MEMORY', error.message)
      assert.ok(error.requested! >= MiB)
      checkLayout(a, held)
      freeAll(a, held)
      if (a.supportsReset) a.reset()
      held.set(a.allocate(4096), 4096)
      checkLayout(a, held)
    })

    it('types invalid and double frees and changes nothing', () => {
      const a = makeAllocator(config)
      const first = a.allocate(5000)
      const second = a.allocate(5000)
      const held = new Map([
        [first, 5000],
        [second, 5000],
      ])
      const before = a.stats()
      for (const wrong of [0x1234500n, first + 256n]) {
        const error = nativeError(() => a.deallocate(wrong))
        assert.equal(error.code, 'INVALID_FREE', error.message)
        assert.equal(error.address, wrong)
      }
      assert.deepEqual(unchangedPart(a.stats()), unchangedPart(before))
      checkLayout(a, held)

      a.deallocate(first)
      held.delete(first)
      const afterFree = a.stats()
      const error = nativeError(() => a.deallocate(first))
      // A strategy that gave the block's memory straight back to the device need not remember it.
      const gaveBack = afterFree.reservedLive < before.reservedLive
      assert.ok(error.code === 'DOUBLE_FREE' || (gaveBack && error.code === 'INVALID_FREE'), `double free: ${error.code}: ${error.message}`)
      assert.equal(error.address, first)
      assert.deepEqual(unchangedPart(a.stats()), unchangedPart(afterFree))
      checkLayout(a, held)
    })

    it("holds a block freed on another stream until that stream's event completes", () => {
      const a = makeAllocator(config)
      const held = new Map<bigint, number>()
      const block = a.allocate(4096, 1)
      a.deallocate(block, 2)
      let s = a.stats()
      assert.equal(s.pendingBlocks, 1)
      assert.equal(s.requestedLive, 0)
      checkLayout(a, held)
      assert.equal(nativeError(() => a.deallocate(block, 2)).code, 'DOUBLE_FREE')
      a.setTime(1_000_000_000)
      assert.equal(a.processDeferred(), 1)
      assert.equal(a.stats().pendingBlocks, 0)
      checkLayout(a, held)

      // recordStream: used on stream 3, freed on its own stream 1, it still waits for stream 3.
      const used = a.allocate(4096, 1)
      a.recordStream(used, 3)
      a.deallocate(used, 1)
      assert.equal(a.stats().pendingBlocks, 1)
      a.synchronizeDeferred()
      s = a.stats()
      assert.equal(s.pendingBlocks, 0)
      assert.equal(s.pendingBytes, 0)
      checkLayout(a, held)
    })

    it('trims cached memory, and resets where the strategy can (UNSUPPORTED elsewhere)', () => {
      const a = makeAllocator(config)
      const held = new Map<bigint, number>()
      for (const size of SIZES) held.set(a.allocate(size), size)
      const info = listStrategies().find((s) => s.name === config.strategy)!
      assert.equal(a.supportsReset, info.supportsReset)
      if (a.supportsReset) {
        a.reset()
        held.clear()
        assert.equal(a.stats().liveBlocks, 0)
        checkLayout(a, held)
        held.set(a.allocate(1000), 1000)
      } else {
        const before = a.stats()
        assert.equal(nativeError(() => a.reset()).code, 'UNSUPPORTED')
        assert.deepEqual(a.stats(), before)
      }
      freeAll(a, held)
      const cached = a.stats().reservedLive
      a.trim()
      assert.ok(a.stats().reservedLive <= cached, 'trim never adds memory')
      checkLayout(a, held)
    })

    it('traces allocations, frees and failures as typed-array columns', () => {
      const a = makeAllocator(config)
      const names = traceOpNames()
      a.setTracing(true)
      const block = a.allocate(1000, 0)
      a.deallocate(block, 0)
      assert.throws(() => a.allocate(CAPACITY + 1))
      const trace = a.takeTrace()
      const n = trace.op.length
      assert.ok(n >= 3)
      for (const column of [trace.address, trace.size, trace.requested, trace.stream, trace.aux]) assert.equal(column.length, n)
      const ops = Array.from(trace.op, (op) => names[op])
      const alloc = ops.indexOf('alloc')
      assert.ok(alloc >= 0, `an alloc event among ${ops.join(',')}`)
      assert.equal(trace.address[alloc], block)
      assert.equal(trace.requested[alloc], 1000)
      assert.ok(trace.size[alloc]! >= 1000)
      const free = ops.indexOf('free')
      assert.ok(free > alloc, 'the free comes after the alloc')
      assert.equal(trace.address[free], block)
      const failure = ops.lastIndexOf('failure')
      assert.ok(failure > free, 'the failed request is traced')
      assert.equal(trace.size[failure], CAPACITY + 1)
      assert.equal(a.takeTrace().op.length, 0, 'takeTrace empties the trace')
      a.setTracing(false)
      a.deallocate(a.allocate(1000))
      assert.equal(a.takeTrace().op.length, 0, 'nothing is recorded with tracing off')
    })
  })
}
