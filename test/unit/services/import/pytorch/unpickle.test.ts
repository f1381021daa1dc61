// The restricted unpickler: it decodes what Python's pickle writes (protocols 1 to 5, real PyTorch
// snapshots), in one piece or in chunks, and refuses hostile input with a SnapshotImportError that
// names the opcode and the byte offset, running nothing. Fixtures come from
// scripts/fixtures/make_hostile_pickles.py (and the real snapshots recorded on an H100).
import assert from 'node:assert/strict'
import { existsSync, readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

import { SnapshotImportError, type SnapshotErrorCode } from '../../../../../src-main/services/import/pytorch/snapshot-error.ts'
import {
  MemoReferenceScanner,
  PickleDict,
  Unpickler,
  unpickle,
  type PickleValue,
  type UnpickleOptions,
} from '../../../../../src-main/services/import/pytorch/pickle-reader.ts'

const fixtures = join(import.meta.dirname, '..', '..', '..', '..', 'fixtures')
const read = (...parts: string[]) => new Uint8Array(readFileSync(join(fixtures, ...parts)))
const REAL = ['convnet_varimg', 'inference_mixed', 'mlp_varbatch', 'transformer_varseq']

/** The tagged JSON form values.expected.json is written in (see make_hostile_pickles.py). */
function tagged(value: PickleValue): unknown {
  if (value instanceof PickleDict) return { $dict: [...value].map(([k, v]) => [tagged(k), tagged(v)]) }
  if (Array.isArray(value)) return value.map(tagged)
  if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString('hex') }
  if (typeof value === 'bigint') return { $bigint: String(value) }
  if (typeof value === 'number') {
    if (Number.isNaN(value)) return { $float: 'nan' }
    if (value === Infinity || value === -Infinity) return { $float: value > 0 ? 'inf' : '-inf' }
    if (Object.is(value, -0)) return { $float: '-0' }
  }
  return value
}

/** Python's view of tuples is lost in JS arrays; the expected file tags them, so untag for comparing. */
function untuple(expected: unknown): unknown {
  if (Array.isArray(expected)) return expected.map(untuple)
  if (expected !== null && typeof expected === 'object') {
    const o = expected as Record<string, unknown>
    if ('$tuple' in o) return untuple(o['$tuple'])
    if ('$dict' in o) return { $dict: (o['$dict'] as unknown[][]).map(([k, v]) => [untuple(k), untuple(v)]) }
    return o
  }
  return expected
}

/** Plain JSON-like data: what json.dump of the same pickle gives (tuples become lists). */
function plain(value: PickleValue): unknown {
  if (value instanceof PickleDict) return Object.fromEntries([...value].map(([k, v]) => [String(k), plain(v)]))
  if (Array.isArray(value)) return value.map(plain)
  return value
}

function feedInChunks(bytes: Uint8Array, sizes: () => number, options: UnpickleOptions = {}): PickleValue {
  const unpickler = new Unpickler({ totalBytes: bytes.length, ...options })
  for (let at = 0; at < bytes.length;) {
    const n = Math.max(1, sizes())
    unpickler.feed(bytes.subarray(at, at + n))
    at += n
  }
  return unpickler.finish()
}

function seeded(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    return s / 4294967296
  }
}

function rejects(bytes: Uint8Array, code: SnapshotErrorCode, offset: number, message: RegExp, options: UnpickleOptions = {}): void {
  assert.throws(
    () => unpickle(bytes, { fileName: 'hostile.pickle', ...options }),
    (error: unknown) => {
      assert.ok(error instanceof SnapshotImportError, `not a SnapshotImportError: ${String(error)}`)
      assert.equal(error.code, code, error.message)
      assert.equal(error.offset, offset, error.message)
      assert.equal(error.file, 'hostile.pickle')
      assert.match(error.message, new RegExp(`^hostile\\.pickle: byte ${offset}: `))
      assert.match(error.problem, message)
      return true
    },
  )
}

describe('decoding what Python writes', () => {
  for (const protocol of [1, 2, 3, 4, 5]) {
    it(`decodes every value type of protocol ${protocol} as Python wrote it`, () => {
      const expected = untuple(JSON.parse(readFileSync(join(fixtures, 'pickle', `values-protocol-${protocol}.expected.json`), 'utf8')))
      const value = unpickle(read('pickle', `values-protocol-${protocol}.pickle`))
      assert.deepEqual(tagged(value), expected)
    })
  }

  it('keeps integers beyond 2^53 exact as bigint and safe ones as number', () => {
    const ints = (unpickle(read('pickle', 'values-protocol-4.pickle')) as PickleDict).get('ints') as (number | bigint)[]
    for (const n of ints) {
      if (typeof n === 'number') assert.ok(Number.isSafeInteger(n), `${n} should have been a bigint`)
      else assert.ok(n > BigInt(Number.MAX_SAFE_INTEGER) || n < -BigInt(Number.MAX_SAFE_INTEGER), `${n} should have been a number`)
    }
    assert.ok(ints.includes(2 ** 53 - 1) && ints.includes(2n ** 53n) && ints.includes(-(2n ** 100n)))
  })

  it('gives an object the pickle shares (memo) as one JS object', () => {
    const shared = (unpickle(read('pickle', 'values-protocol-4.pickle')) as PickleDict).get('shared') as PickleValue[]
    assert.equal(shared[0], shared[1])
    assert.equal((shared[2] as PickleDict).get('again'), shared[0])
  })

  it('treats a "__proto__" key as a key: nothing is polluted', () => {
    const keys = (unpickle(read('pickle', 'values-protocol-4.pickle')) as PickleDict).get('keys') as PickleDict
    assert.equal(keys.get('__proto__'), 'polluted?')
    assert.equal(keys.get('constructor'), 1)
    assert.equal(keys.get(1), 'int key')
    assert.equal(keys.get(null), 'none key')
    assert.equal(keys.get('missing'), undefined)
    assert.equal(keys.get('hasOwnProperty'), undefined)
    assert.equal(Object.getPrototypeOf(keys), PickleDict.prototype)
    assert.equal(({} as Record<string, unknown>)['polluted?'], undefined)
    assert.equal(Object.keys(keys).includes('__proto__'), false, 'keys never become properties')
  })

  it('leaves Object.prototype alone when a pickle sets "__proto__" to a dict', () => {
    // {'__proto__': {'polluted': True}}: EMPTY_DICT, SHORT_BINUNICODE '__proto__', EMPTY_DICT,
    // SHORT_BINUNICODE 'polluted', NEWTRUE, SETITEM, SETITEM, STOP
    const key = [...Buffer.from('__proto__')]
    const inner = [...Buffer.from('polluted')]
    const dict = unpickle(new Uint8Array([0x80, 4, 0x7d, 0x8c, key.length, ...key, 0x7d, 0x8c, inner.length, ...inner, 0x88, 0x73, 0x73, 0x2e])) as PickleDict
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined)
    assert.equal(Object.getPrototypeOf(dict), PickleDict.prototype)
    assert.equal((dict.get('__proto__') as PickleDict).get('polluted'), true)
    assert.equal((dict as unknown as Record<string, unknown>)['polluted'], undefined)
  })

  it('equals json.dump of the same snapshot (convnet_varimg), value for value', () => {
    const ours = plain(unpickle(read('pytorch', 'convnet_varimg.pickle')))
    const python = JSON.parse(readFileSync(join(fixtures, 'pytorch', 'convnet_varimg.json'), 'utf8'))
    assert.deepEqual(ours, python)
  })

  for (const name of REAL) {
    it(`reads every device-trace event of ${name} as the csv of the same run lists it`, () => {
      const root = unpickle(read('pytorch', `${name}.pickle`)) as PickleDict
      const events = (root.get('device_traces') as PickleValue[][])[0]! as PickleDict[]
      const rows = readFileSync(join(fixtures, 'pytorch', `${name}.trace.csv`), 'utf8')
        .trim()
        .split('\n')
        .slice(1)
      assert.equal(events.length, rows.length)
      rows.forEach((row, i) => {
        const [action, address, size, stream, time] = row.split(',')
        const e = events[i]!
        assert.deepEqual(
          [e.get('action'), e.get('addr'), e.get('size'), e.get('stream'), e.get('time_us')],
          [action, Number(address), Number(size), Number(stream), Number(time)],
          `event ${i}`,
        )
      })
    })
  }
})

describe('PickleDict', () => {
  it('lets a repeated key keep its first position and its last value, as Python does', () => {
    // EMPTY_DICT, MARK, 1: 2, 3: 4, 1: 5, SETITEMS, STOP
    const dict = unpickle(new Uint8Array([0x80, 4, 0x7d, 0x28, 0x4b, 1, 0x4b, 2, 0x4b, 3, 0x4b, 4, 0x4b, 1, 0x4b, 5, 0x75, 0x2e])) as PickleDict
    assert.equal(dict.get(1), 5)
    assert.equal(dict.size, 2)
    assert.deepEqual([...dict.keys()], [1, 3])
    assert.deepEqual([...dict.values()], [5, 4])
  })

  it('finds keys in large dicts (indexed) as in small ones (scanned), NaN included', () => {
    const bytes = [0x80, 4, 0x7d, 0x28]
    for (let i = 0; i < 100; i++) bytes.push(0x4b, i, 0x4b, (i * 7) & 0xff)
    bytes.push(0x47, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0, 0x88) // NaN: True
    bytes.push(0x75, 0x2e)
    const dict = unpickle(new Uint8Array(bytes)) as PickleDict
    assert.equal(dict.size, 101)
    for (let i = 0; i < 100; i++) assert.equal(dict.get(i), (i * 7) & 0xff)
    assert.equal(dict.get(NaN), true)
    assert.equal(dict.has(100), false)
    assert.deepEqual(dict.toMap().get(42), (42 * 7) & 0xff)
  })
})

describe('chunked input', () => {
  for (const name of ['synthetic', ...REAL]) {
    it(`gives the same value for ${name} fed in random chunks as in one piece`, () => {
      const bytes = read('pytorch', `${name}.pickle`)
      const whole = JSON.stringify(plain(unpickle(bytes)))
      const random = seeded(name.length)
      const largest = name === 'synthetic' ? 16 : 65536
      assert.equal(JSON.stringify(plain(feedInChunks(bytes, () => Math.floor(random() * largest)))), whole)
    })
  }

  it('gives the same value fed one byte at a time', () => {
    const bytes = read('pytorch', 'synthetic.pickle')
    assert.deepEqual(plain(feedInChunks(bytes, () => 1)), plain(unpickle(bytes)))
  })

  it('holds a string longer than many chunks without quadratic copying', () => {
    // BINUNICODE of 4 MiB fed in 4 KiB chunks: linear growth of the carried buffer.
    const text = 'x'.repeat(4 << 20)
    const bytes = new Uint8Array(2 + 5 + text.length + 1)
    bytes.set([0x80, 4, 0x58, 0, 0, 0x40, 0])
    bytes.fill(0x78, 7, 7 + text.length)
    bytes[bytes.length - 1] = 0x2e
    const started = performance.now()
    assert.equal(
      feedInChunks(bytes, () => 4096),
      text,
    )
    assert.ok(performance.now() - started < 5000, 'took too long: quadratic?')
  })
})

describe('bounded memory: memo pre-pass and streamed lists', () => {
  for (const name of ['synthetic', ...REAL]) {
    it(`streams ${name}'s device_traces items in order and keeps only the memo entries read back`, () => {
      const bytes = read('pytorch', `${name}.pickle`)
      const full = unpickle(bytes) as PickleDict
      const scanner = new MemoReferenceScanner()
      scanner.feed(bytes)
      const streamed: PickleValue[][] = []
      const result = unpickle(bytes, {
        keepMemo: scanner.references,
        stream: {
          path: ['device_traces', null],
          onItem(keys, index, item) {
            assert.equal(keys[0], 'device_traces')
            const device = keys[1] as number
            streamed[device] ??= []
            assert.equal(index, streamed[device].length)
            streamed[device].push(item)
          },
        },
      }) as PickleDict
      const traces = full.get('device_traces') as PickleValue[][]
      assert.deepEqual(
        streamed.map((d) => d.map(plain)),
        traces.filter((t) => t.length > 0).map((t) => t.map(plain)),
      )
      for (const list of result.get('device_traces') as PickleValue[][]) assert.equal(list.length, 0, 'streamed items are not kept')
      assert.deepEqual(plain(result.get('segments')!), plain(full.get('segments')!))
      assert.ok(scanner.references.count > 0)
    })
  }
})

describe('hostile input: a typed error naming the opcode and the offset, nothing run', () => {
  const PWNED = '/tmp/vramscope-hostile-pickle-ran'
  const hostile = (name: string) => read('hostile', name)

  for (const [file, offset] of [
    ['os-system-global-reduce.pickle', 2],
    ['os-system-protocol-0.pickle', 0],
  ] as const) {
    it(`refuses ${file} (a pickle that would call os.system) at its GLOBAL`, () => {
      rmSync(PWNED, { force: true })
      rejects(hostile(file), 'forbidden', offset, /^GLOBAL \(0x63\): forbidden "posix\.system": .*nothing was run/)
      assert.equal(existsSync(PWNED), false)
    })
  }

  it('refuses the protocol 4 os.system pickle at its STACK_GLOBAL', () => {
    rmSync(PWNED, { force: true })
    rejects(hostile('os-system-stack-global.pickle'), 'forbidden', 28, /^STACK_GLOBAL \(0x93\): forbidden/)
    assert.equal(existsSync(PWNED), false)
  })

  for (const name of ['REDUCE', 'BUILD', 'NEWOBJ', 'NEWOBJ_EX', 'OBJ', 'STACK_GLOBAL', 'BINPERSID', 'EXT1', 'EXT2', 'EXT4', 'PERSID', 'INST', 'GLOBAL']) {
    it(`refuses ${name}`, () => rejects(hostile(`forbidden-${name}.pickle`), 'forbidden', 4, new RegExp(`^${name} \\(0x[0-9a-f]{2}\\): forbidden`)))
  }

  const cases: [string, SnapshotErrorCode, number, RegExp, UnpickleOptions?][] = [
    ['deep-marks.pickle', 'limit', 202, /^MARK \(0x28\): more than 200 nested MARKs \(limit maxDepth\)/],
    ['deep-lists.pickle', 'limit', 6013 + 199, /^APPEND \(0x61\): containers nested more than 200 deep/],
    ['deep-memo-chain.pickle', 'limit', 5 + 9 * 199 + 6, /^APPEND \(0x61\): containers nested more than 200 deep/],
    ['deep-lists.pickle', 'limit', 6013 + 9, /nested more than 10 deep/, { maxDepth: 10 }],
    ['many-values.pickle', 'limit', 2 + 1024, /stack holds more than 1024 values \(limit maxStack\)/, { maxStack: 1024 }],
    ['huge-binunicode.pickle', 'truncated', 2, /^BINUNICODE \(0x58\): truncated: declares 4294967280 bytes but only 4 remain/],
    ['huge-binbytes8.pickle', 'truncated', 2, /^BINBYTES8 \(0x8e\): truncated: declares 4611686018427387904 bytes but only 4 remain/],
    ['huge-long4.pickle', 'limit', 2, /^LONG4 \(0x8b\): an integer of 2147483647 bytes/],
    ['huge-frame.pickle', 'truncated', 2, /^FRAME \(0x95\): truncated: declares 1152921504606846976 bytes/],
    ['negative-binstring.pickle', 'corrupt', 2, /^BINSTRING \(0x54\): negative length -5/],
    ['memo-get-unset.pickle', 'corrupt', 2, /^BINGET \(0x68\): memo index 7 was never stored/],
    ['memo-get-huge.pickle', 'corrupt', 4, /^LONG_BINGET \(0x6a\): memo index 4294967295 was never stored/],
    ['memo-put-huge.pickle', 'corrupt', 3, /^LONG_BINPUT \(0x72\): memo index 4294967295 is larger than a pickle of this size can use/],
    ['recursive-list.pickle', 'corrupt', 15, /^APPEND \(0x61\): .* already finished/],
    ['append-to-tuple.pickle', 'corrupt', 4, /^APPEND \(0x61\): the value below the items must be a list being built, it is a tuple/],
    ['list-as-key.pickle', 'corrupt', 6, /^SETITEMS \(0x75\): a list cannot be a dict key/],
    ['odd-setitems.pickle', 'corrupt', 7, /^SETITEMS \(0x75\): an odd number of values \(3\)/],
    ['stop-with-two-values.pickle', 'corrupt', 4, /^STOP \(0x2e\): 2 values on the stack/],
    ['trailing-bytes.pickle', 'corrupt', 4, /^7 bytes after STOP/],
    ['unknown-opcode.pickle', 'corrupt', 2, /^unknown opcode 0xff: not a pickle opcode/],
    ['set.pickle', 'unsupported', 11, /^EMPTY_SET \(0x8f\): not supported: sets/],
    ['protocol-6.pickle', 'corrupt', 0, /^PROTO \(0x80\): protocol 6 is newer than 5/],
    ['snapshot-protocol-0.pickle', 'unsupported', 5, /^UNICODE \(0x56\): not supported: protocol 0/],
    ['random-bytes.bin', 'corrupt', 0, /^unknown opcode 0x10/],
    ['empty.pickle', 'truncated', 0, /no STOP opcode/],
  ]
  for (const [file, code, offset, message, options] of cases) {
    it(`refuses ${file}${options ? ` with ${JSON.stringify(options)}` : ''}: ${code} at byte ${offset}`, () =>
      rejects(hostile(file), code, offset, message, options))
  }

  it('refuses truncated-snapshot.pickle (cut at 60 %) at its FRAME, which declares more than remains', () => {
    rejects(hostile('truncated-snapshot.pickle'), 'truncated', 2, /^FRAME \(0x95\): truncated: declares \d+ bytes but only 1463 remain/)
  })

  it('refuses the same cut file fed in chunks without its size at the opcode the input ends in', () => {
    const bytes = hostile('truncated-snapshot.pickle')
    const unpickler = new Unpickler({ fileName: 'cut.pickle' })
    unpickler.feed(bytes)
    assert.throws(
      () => unpickler.finish(),
      (e: unknown) =>
        e instanceof SnapshotImportError &&
        e.code === 'truncated' &&
        e.offset! >= bytes.length - 64 &&
        e.offset! <= bytes.length &&
        /^cut\.pickle: byte \d+: /.test(e.message),
    )
  })

  it('accepts deep-lists with a maxDepth above its depth', () => {
    let depth = 0
    for (let v = unpickle(hostile('deep-lists.pickle'), { maxDepth: 5000 }) as PickleValue[]; v.length > 0; v = v[0] as PickleValue[]) depth++
    assert.equal(depth, 3000)
  })

  it('reports a truncation at every cut of a snapshot as truncated, fed whole or in chunks', () => {
    const bytes = read('pytorch', 'synthetic.pickle')
    for (let cut = 0; cut < bytes.length; cut++) {
      const prefix = bytes.subarray(0, cut)
      for (const run of [() => unpickle(prefix), () => feedInChunks(prefix, () => 7)]) {
        assert.throws(run, (e: unknown) => e instanceof SnapshotImportError && e.code === 'truncated' && e.offset! <= cut, `cut at ${cut}`)
      }
    }
  })
})
