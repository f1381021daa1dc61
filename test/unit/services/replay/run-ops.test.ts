// runOps: a sequence of operations applied off the JavaScript thread. Its result must be exactly
// what the same calls made one by one produce, for every strategy, and the allocator refuses other
// calls while it works.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { RunOpKind, RunOpStatus, type Allocator, type NativeError, type OpColumns } from '../../../../src-main/services/replay/allocators.ts'
import { checkLayout, makeAllocator, strategyConfigs } from './strategy-configs.ts'

const SIZES = [256, 512, 1000, 4096, 5000, 16384, 65536, 200_000]

/** A deterministic mix of allocations and frees over two streams, some frees on the other stream. */
function randomOps(count: number, seed: number): OpColumns {
  let state = seed >>> 0
  const random = (n: number): number => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0
    return state % n
  }
  const ops: OpColumns = {
    kind: new Uint8Array(count),
    size: new Float64Array(count),
    stream: new Uint32Array(count),
    target: new Uint32Array(count),
  }
  const live: number[] = []
  for (let i = 0; i < count; i++) {
    if (i % 1000 === 999) {
      ops.kind[i] = RunOpKind.setTime
      ops.size[i] = i * 1000
    } else if (live.length > 0 && random(100) < 45) {
      const which = random(live.length)
      ops.kind[i] = RunOpKind.free
      ops.target[i] = live[which]!
      ops.stream[i] = random(10) === 0 ? 2 : 1
      live[which] = live[live.length - 1]!
      live.pop()
    } else {
      ops.kind[i] = RunOpKind.alloc
      ops.size[i] = SIZES[random(SIZES.length)]!
      ops.stream[i] = 1
      live.push(i)
    }
  }
  return ops
}

/** The same operations, one call at a time, on the JavaScript thread. */
function applyOneByOne(a: Allocator, ops: OpColumns): { address: bigint[]; status: number[] } {
  const address: bigint[] = []
  const status: number[] = []
  for (let i = 0; i < ops.kind.length; i++) {
    address.push(0n)
    status.push(RunOpStatus.ok)
    const kind = ops.kind[i]
    try {
      if (kind === RunOpKind.alloc) {
        address[i] = a.allocate(ops.size[i]!, ops.stream[i])
      } else if (kind === RunOpKind.free) {
        const t = ops.target[i]!
        if (status[t] !== RunOpStatus.ok) {
          status[i] = RunOpStatus.skipped
          continue
        }
        address[i] = address[t]!
        a.deallocate(address[i]!, ops.stream[i])
      } else {
        a.setTime(ops.size[i]!)
      }
    } catch (error) {
      const code = (error as NativeError).code
      status[i] = code === 'OUT_OF_MEMORY' ? RunOpStatus.outOfMemory : code === 'DOUBLE_FREE' ? RunOpStatus.doubleFree : RunOpStatus.invalidFree
    }
  }
  return { address, status }
}

for (const config of strategyConfigs()) {
  describe(`runOps on ${config.label}`, () => {
    it('gives the same addresses and statuses as the calls made one by one', async () => {
      const ops = randomOps(20_000, 7)
      const a = makeAllocator(config)
      const pending = a.runOps(ops)
      // The worker has the allocator until the promise settles.
      let busy: NativeError | undefined
      try {
        a.allocate(256)
      } catch (error) {
        busy = error as NativeError
      }
      assert.equal(busy?.code, 'BUSY')
      const result = await pending
      assert.equal(result.address.length, ops.kind.length)
      assert.equal(result.status.length, ops.kind.length)
      assert.ok(result.elapsedNs > 0)

      const expected = applyOneByOne(makeAllocator(config), ops)
      assert.deepEqual(Array.from(result.status), expected.status)
      assert.deepEqual(Array.from(result.address), expected.address)
      assert.equal(result.failures, expected.status.filter((s) => s !== RunOpStatus.ok && s !== RunOpStatus.skipped).length)

      // What runOps left live is what the allocator holds.
      const held = new Map<bigint, number>()
      for (let i = 0; i < ops.kind.length; i++) {
        if (result.status[i] !== RunOpStatus.ok) continue
        if (ops.kind[i] === RunOpKind.alloc) held.set(result.address[i]!, ops.size[i]!)
        else if (ops.kind[i] === RunOpKind.free) held.delete(result.address[i]!)
      }
      a.synchronizeDeferred()
      checkLayout(a, held)
    })

    it('reports double frees per op and goes on', async () => {
      const a = makeAllocator(config)
      const ops: OpColumns = {
        kind: Uint8Array.of(RunOpKind.alloc, RunOpKind.alloc, RunOpKind.free, RunOpKind.free, RunOpKind.free),
        size: Float64Array.of(4096, 4096, 0, 0, 0),
        stream: new Uint32Array(5),
        target: Uint32Array.of(0, 0, 0, 0, 1),
      }
      const result = await a.runOps(ops)
      assert.deepEqual(Array.from(result.status.subarray(0, 3)), [RunOpStatus.ok, RunOpStatus.ok, RunOpStatus.ok])
      assert.ok(
        result.status[3] === RunOpStatus.doubleFree || result.status[3] === RunOpStatus.invalidFree,
        `second free of one block: status ${result.status[3]}`,
      )
      assert.equal(result.status[4], RunOpStatus.ok)
      assert.equal(result.failures, 1)
      assert.equal(a.stats().liveBlocks, 0)
    })
  })
}

it('rejects malformed ops before they reach the worker, and stays usable', async () => {
  const a = makeAllocator(strategyConfigs()[0]!)
  assert.throws(
    () => a.runOps({ kind: Uint8Array.of(7), size: Float64Array.of(0), stream: new Uint32Array(1), target: new Uint32Array(1) }),
    (error: Error) => error instanceof RangeError && /^ops\.kind\[0\]/.test(error.message),
  )
  const result = await a.runOps({ kind: new Uint8Array(0), size: new Float64Array(0), stream: new Uint32Array(0), target: new Uint32Array(0) })
  assert.equal(result.address.length, 0)
  assert.equal(a.allocate(0), 0n, 'usable once the run settled')
})
