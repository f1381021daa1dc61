// Bad arguments are refused in TypeScript, before any C++ runs: a TypeError for a wrong type, a
// RangeError for a wrong value, each with code INVALID_ARGUMENT and a message that begins with the
// argument's name.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import { Allocator, listStrategies, type NativeError, type OpColumns } from '../../../../src-main/services/replay/allocators.ts'

// Any strategy with a size parameter serves; the first one listed is taken, whichever it is.
const withSize = listStrategies().find((s) => s.params.some((p) => p.kind === 'size'))!
const sizeParam = withSize.params.find((p) => p.kind === 'size')!.name

function refused(kind: typeof TypeError | typeof RangeError, name: RegExp, fn: () => unknown): void {
  assert.throws(fn, (error: NativeError) => {
    assert.ok(error instanceof kind, `${error.constructor.name}: ${error.message}`)
    assert.equal(error.code, 'INVALID_ARGUMENT')
    assert.match(error.message, name)
    return true
  })
}

const bad = (value: unknown) => value as never

it('refuses unknown strategies, listing the known ones', () => {
  const known = listStrategies().map((s) => s.name)
  refused(RangeError, new RegExp(`^strategy: unknown strategy "nope" \\(known: ${known.join(', ')}\\)$`), () => new Allocator('nope'))
  refused(TypeError, /^strategy must be a string/, () => new Allocator(bad(42)))
})

it("refuses unknown parameters, listing the strategy's own", () => {
  const takes = withSize.params.map((p) => p.name).join(', ')
  refused(
    RangeError,
    new RegExp(`^params\\.no_such_param: strategy '${withSize.name}' has no parameter 'no_such_param' \\(it takes: ${takes}\\)$`),
    () => new Allocator(withSize.name, { no_such_param: 1 }),
  )
  refused(TypeError, /^params must be a plain object/, () => new Allocator(withSize.name, bad('block_size=1')))
  refused(TypeError, /^params must be a plain object/, () => new Allocator(withSize.name, bad([1])))
})

it('refuses parameter values of the wrong type or range', () => {
  const param = `^params\\.${sizeParam}`
  refused(RangeError, new RegExp(`${param} must not be negative`), () => new Allocator(withSize.name, { [sizeParam]: -1 }))
  refused(RangeError, new RegExp(`${param} must be an integer`), () => new Allocator(withSize.name, { [sizeParam]: 1.5 }))
  refused(TypeError, new RegExp(param), () => new Allocator(withSize.name, { [sizeParam]: true }))
  refused(TypeError, new RegExp(param), () => new Allocator(withSize.name, { [sizeParam]: bad({}) }))
})

it('passes parameter text to the library, whose own error names the parameter', () => {
  assert.throws(
    () => new Allocator(withSize.name, { [sizeParam]: 'lots' }),
    (error: NativeError) => error.code === 'INVALID_ARGUMENT' && error.message.includes(sizeParam),
  )
})

it('refuses unknown backings and backing options', () => {
  refused(RangeError, /^backing: unknown backing "gpu" \(simulated, cuda_malloc, cuda_vmm, cuda_async\)$/, () => new Allocator(withSize.name, {}, bad('gpu')))
  refused(RangeError, /^options\.bogus: no such backing option/, () => new Allocator(withSize.name, {}, 'simulated', bad({ bogus: 1 })))
  refused(RangeError, /^options\.capacity must not be negative/, () => new Allocator(withSize.name, {}, 'simulated', { capacity: -1 }))
  refused(RangeError, /^options\.capacity must be more than 0/, () => new Allocator(withSize.name, {}, 'simulated', { capacity: 0 }))
  refused(RangeError, /^options\.granularity must be a power of two/, () => new Allocator(withSize.name, {}, 'simulated', { granularity: 3000 }))
  refused(TypeError, /^options\.completionDelayNs must be a number/, () => new Allocator(withSize.name, {}, 'simulated', { completionDelayNs: bad('1') }))
})

it('refuses bad sizes, streams and addresses, and the allocator never sees them', () => {
  const a = new Allocator(withSize.name)
  refused(RangeError, /^size must not be negative, got -1$/, () => a.allocate(-1))
  refused(RangeError, /^size must be an integer, got 1\.5$/, () => a.allocate(1.5))
  refused(RangeError, /^size must be an integer, got NaN$/, () => a.allocate(NaN))
  refused(RangeError, /^size must be at most 2\^53 - 1/, () => a.allocate(2 ** 53))
  refused(RangeError, /^size must be from 0 to 2\^64 - 1, got -1n$/, () => a.allocate(-1n))
  refused(TypeError, /^size must be a number or bigint, got "1"$/, () => a.allocate(bad('1')))
  refused(RangeError, /^stream must not be negative/, () => a.allocate(10, -1))
  refused(RangeError, /^stream must be an integer/, () => a.allocate(10, 0.5))
  refused(TypeError, /^stream must be a number/, () => a.allocate(10, bad('0')))
  refused(TypeError, /^address must be a bigint \(as allocate\(\) returns it\), got 4096$/, () => a.deallocate(bad(4096)))
  refused(RangeError, /^address must be from 0n/, () => a.deallocate(-1n))
  refused(RangeError, /^address must be from 0n/, () => a.deallocate(1n << 64n))
  refused(TypeError, /^stream is required/, () => a.recordStream(0n, bad(undefined)))
  refused(RangeError, /^ns must not be negative/, () => a.setTime(-5))
  refused(TypeError, /^on must be a boolean/, () => a.setTracing(bad('yes')))
  const s = a.stats()
  assert.equal(s.allocations + s.deallocations + s.failures, 0, 'no call reached the allocator')
})

it('refuses malformed runOps columns, naming the column and the op', () => {
  const a = new Allocator(withSize.name)
  const ops = (n: number): OpColumns => ({
    kind: new Uint8Array(n),
    size: new Float64Array(n).fill(256),
    stream: new Uint32Array(n),
    target: new Uint32Array(n),
  })
  refused(TypeError, /^ops must be an object/, () => a.runOps(bad(null)))
  refused(TypeError, /^ops\.kind must be a Uint8Array, got an array$/, () => a.runOps({ ...ops(1), kind: bad([0]) }))
  refused(TypeError, /^ops\.stream must be a Uint32Array/, () => a.runOps({ ...ops(1), stream: bad(new Float64Array(1)) }))
  refused(RangeError, /^ops\.size has 2 entries, ops\.kind has 1/, () => a.runOps({ ...ops(1), size: new Float64Array(2) }))
  refused(RangeError, /^ops\.size\[0\] must be a non-negative integer, got -256$/, () => a.runOps({ ...ops(1), size: Float64Array.of(-256) }))
  const forward = ops(2)
  forward.kind[0] = 1
  forward.target[0] = 1
  refused(RangeError, /^ops\.target\[0\] must be the index of an earlier alloc op, got 1$/, () => a.runOps(forward))
  const freeOfFree = ops(3)
  freeOfFree.kind.set([0, 1, 1])
  freeOfFree.target.set([0, 0, 1])
  refused(RangeError, /^ops\.target\[2\]/, () => a.runOps(freeOfFree))
  assert.equal(a.stats().allocations, 0)
})
