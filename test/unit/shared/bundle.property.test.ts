// Property tests (fast-check) for the column bundle codec (src-shared/bundle.ts): any metadata and
// any named typed arrays survive encode → decode exactly, every array viewed in place 8-byte
// aligned; and a damaged bundle (bytes flipped, cut, or a header rewritten with hostile JSON) either
// decodes or throws BundleError, never another exception, and never an array outside the buffer.
import assert from 'node:assert/strict'
import { it } from 'node:test'

import fc from 'fast-check'

import { BundleError, decodeBundle, encodeBundle } from '../../../src-shared/bundle.ts'
import type { BundleArray } from '../../../src-shared/contract.ts'

const runs = Number(process.env['VRAMSCOPE_PROPERTY_RUNS'] ?? 300)
// A fixed seed by default, so that CI runs the same cases every time (a failure prints its seed and
// path); VRAMSCOPE_PROPERTY_SEED=random (or a number) explores new ones on demand.
const seedSetting = process.env['VRAMSCOPE_PROPERTY_SEED'] ?? '20261122'
if (seedSetting !== 'random') fc.configureGlobal({ seed: Number(seedSetting) })

const typedArray: fc.Arbitrary<BundleArray> = fc.oneof(
  fc.uint8Array({ maxLength: 64 }),
  fc.array(fc.integer({ min: 0, max: 0xffff }), { maxLength: 32 }).map((a) => Uint16Array.from(a)),
  fc.uint32Array({ maxLength: 32 }),
  fc.int32Array({ maxLength: 32 }),
  fc.float32Array({ maxLength: 16, noNaN: true }),
  fc.float64Array({ maxLength: 16, noNaN: true }),
  fc.bigUint64Array({ maxLength: 8 }),
  // A view into a larger buffer at an odd offset: the encoder must copy only the view's bytes.
  fc.tuple(fc.uint8Array({ minLength: 8, maxLength: 40 }), fc.nat(7)).map(([a, at]) => a.subarray(at)),
)

const bundle = fc.record({
  meta: fc.jsonValue(),
  // '__proto__' is refused by both sides (encodeBundle throws, decodeBundle names it): tested below.
  arrays: fc.dictionary(
    fc.string({ minLength: 1, maxLength: 12 }).filter((k) => k !== '__proto__'),
    typedArray,
    { maxKeys: 8 },
  ),
})

it(`bundle: encode then decode gives back the same metadata and arrays, aligned views of one buffer (${runs} random bundles)`, () => {
  fc.assert(
    fc.property(bundle, ({ meta, arrays }) => {
      const bytes = encodeBundle({ meta, arrays })
      assert.equal(bytes.byteLength % 8, 0)
      const decoded = decodeBundle(bytes.buffer as ArrayBuffer)
      // JSON is the wire format of the metadata: compare what JSON keeps (-0 becomes 0).
      assert.deepEqual(decoded.meta, JSON.parse(JSON.stringify(meta ?? null)))
      assert.deepEqual(Object.keys(decoded.arrays).sort(), Object.keys(arrays).sort())
      for (const [name, original] of Object.entries(arrays)) {
        const got = decoded.arrays[name]!
        assert.equal(got.constructor, original.constructor, `${name}: same type`)
        assert.deepEqual(Array.from(got as ArrayLike<number | bigint>), Array.from(original as ArrayLike<number | bigint>), `${name}: same values`)
        assert.equal(got.buffer, bytes.buffer, `${name}: a view, not a copy`)
        assert.equal(got.byteOffset % 8, 0, `${name}: 8-byte aligned`)
      }
    }),
    { numRuns: runs },
  )
})

type Damage = (bytes: Uint8Array, rand: number[]) => Uint8Array

const damages: Record<string, Damage> = {
  'flipped bits': (b, r) => {
    const out = b.slice()
    for (const x of r) if (out.length > 0) out[x % out.length]! ^= 1 << (x % 8)
    return out
  },
  truncated: (b, r) => b.slice(0, (r[0] ?? 0) % (b.length + 1)),
  'random bytes in the header': (b, r) => {
    const out = b.slice()
    for (const x of r) if (out.length > 0) out[x % Math.min(out.length, 64)] = x & 0xff
    return out
  },
}

it(`bundle: damaged bundles decode or throw BundleError, never another exception (${runs * 3} random damages)`, () => {
  fc.assert(
    fc.property(bundle, fc.constantFrom(...Object.keys(damages)), fc.array(fc.nat(), { minLength: 1, maxLength: 6 }), ({ meta, arrays }, how, rand) => {
      const bytes = damages[how]!(encodeBundle({ meta, arrays }), rand)
      decodesOrBundleError(bytes)
    }),
    { numRuns: runs * 3 },
  )
})

/** A valid frame around hostile header JSON: what a compromised or buggy host could send. */
function withHeader(json: string, dataBytes = 64): Uint8Array {
  const text = new TextEncoder().encode(json)
  const dataStart = (12 + text.length + 7) & ~7
  const out = new Uint8Array(dataStart + dataBytes)
  const view = new DataView(out.buffer)
  view.setUint32(0, 0x42435356, true)
  view.setUint32(4, 1, true)
  view.setUint32(8, dataStart - 12, true)
  out.fill(0x20, 12, dataStart)
  out.set(text, 12)
  return out
}

const hostileEntry = fc.record(
  {
    name: fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'toString'), fc.integer(), fc.constant(null)),
    type: fc.oneof(
      fc.constantFrom('u8', 'u16', 'u32', 'i32', 'f32', 'f64', 'u64', 'toString', 'constructor', '__proto__', 'hasOwnProperty'),
      fc.string(),
      fc.integer(),
    ),
    offset: fc.oneof(fc.integer({ min: -16, max: 256 }), fc.double(), fc.constantFrom(2 ** 53, Number.MAX_VALUE), fc.string()),
    length: fc.oneof(fc.integer({ min: -16, max: 64 }), fc.double(), fc.constantFrom(2 ** 32, 2 ** 53), fc.string()),
  },
  { requiredKeys: [] },
)

it(`bundle: hostile header JSON (wrong types, prototype names, negative or fractional lengths) gives BundleError (${runs * 3} headers)`, () => {
  const header = fc.oneof(
    fc.record({ meta: fc.jsonValue(), arrays: fc.array(hostileEntry, { maxLength: 4 }) }).map((h) => JSON.stringify(h)),
    fc.record({ meta: fc.jsonValue(), arrays: fc.oneof(fc.jsonValue(), fc.array(fc.jsonValue(), { maxLength: 3 })) }).map((h) => JSON.stringify(h)),
    fc.jsonValue().map((v) => JSON.stringify(v)),
  )
  fc.assert(
    fc.property(header, (json) => decodesOrBundleError(withHeader(json))),
    { numRuns: runs * 3 },
  )
})

it('bundle: the hostile headers found by the properties each give BundleError naming the problem', () => {
  const cases: [string, RegExp][] = [
    ['null', /header/],
    ['{"arrays":5}', /arrays/],
    ['{"arrays":[null]}', /array/],
    ['{"arrays":[{"name":"a","type":"toString","offset":16,"length":1}]}', /unknown type toString/],
    ['{"arrays":[{"name":"a","type":"u8","offset":16,"length":-1}]}', /length/],
    ['{"arrays":[{"name":"a","type":"u8","offset":16,"length":0.5}]}', /length/],
    ['{"arrays":[{"name":"__proto__","type":"u8","offset":16,"length":1}]}', /name/],
  ]
  for (const [json, message] of cases)
    assert.throws(
      () => decodeBundle(withHeader(json).buffer as ArrayBuffer),
      (e: unknown) => e instanceof BundleError && message.test(e.message),
      json,
    )
})

function decodesOrBundleError(bytes: Uint8Array): void {
  let decoded
  try {
    decoded = decodeBundle(bytes.buffer as ArrayBuffer)
  } catch (e) {
    if (e instanceof BundleError) return
    throw new Error(`not a BundleError: ${(e as Error)?.stack ?? String(e)}`)
  }
  assert.equal(Object.getPrototypeOf(decoded.arrays) === Object.prototype || Object.getPrototypeOf(decoded.arrays) === null, true, 'arrays is a plain record')
  for (const [name, a] of Object.entries(decoded.arrays)) {
    assert.ok(ArrayBuffer.isView(a), `${name} is a typed array`)
    assert.equal(a.buffer, bytes.buffer, `${name} is a view of the bundle`)
    assert.ok(a.byteOffset + a.byteLength <= bytes.byteLength, `${name} lies inside the bundle`)
  }
}

it('bundle: an array named __proto__ is refused when encoding, as when decoding', () => {
  const arrays = Object.defineProperty({}, '__proto__', { value: new Uint8Array(1), enumerable: true }) as Record<string, BundleArray>
  assert.throws(() => encodeBundle({ meta: null, arrays }), /__proto__/)
})
