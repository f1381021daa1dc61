// Nsight Systems SQLite exports and Umpire replay logs, as vramscope opens them
// (src-main/services/import/nsys.ts, umpire.ts): each written by scripts/fixtures/import-formats.ts
// from a recorded PyTorch snapshot, carrying that run's allocations as the format would (Nsight
// Systems: the segments PyTorch took from CUDA; Umpire: the program's own requests), so the figures
// read back are known: the snapshot itself, opened, is the oracle, and its figures are also written
// out. Each opens by its content; info, top, replay and whatif run on it; damaged files are refused
// with the file named and exit 2, in seconds.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { InputError } from '../../src-main/services/input-error.ts'
import { detectInputKind, openInput, type OpenedInput } from '../../src-main/services/import/open-input.ts'
import { loadSqlite } from '../../src-main/services/import/nsys.ts'
import { parseUmpireLog } from '../../src-main/services/import/umpire.ts'
import { EventKind } from '../../src-main/services/trace/model.ts'
import { segmentRows, writeImportFormats, writeNsysExport } from '../../scripts/fixtures/import-formats.ts'
import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

const SNAPSHOT = fixture('pytorch/mlp_varbatch.pickle')
/** The snapshot's figures (checked against the snapshot itself below). */
const ALLOCS = 1137
const FREES = 1134
const PEAK_REQUESTED = 240_341_004
const SEGMENTS = 17
const RECORDED_PEAK_RESERVED = 281_018_368

let scratch: string
let paths: { nsys: string; umpire: string; umpireClassic: string }
let snapshot: OpenedInput
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-formats-'))
  paths = await writeImportFormats(SNAPSHOT, scratch)
  snapshot = await openInput(SNAPSHOT)
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

interface Info {
  kind: string
  format: string
  events: number
  allocs: number
  frees: number
  peakRequested: number
  warnings: string[]
  strategies: { name: string; summary: { peakReserved: number; peakRequested: number } }[]
}

function counts(input: OpenedInput): { allocs: number; frees: number } {
  let allocs = 0
  let frees = 0
  for (const k of input.trace.events.kind)
    if (k === EventKind.alloc) allocs++
    else if (k === EventKind.free) frees++
  return { allocs, frees }
}

it('the snapshot the files are written from has the figures the tests expect', () => {
  assert.deepEqual(counts(snapshot), { allocs: ALLOCS, frees: FREES })
  assert.equal(segmentRows(snapshot).length, SEGMENTS)
  const recorded = snapshot.strategies.find((s) => s.name === 'pytorch (recorded)')!
  assert.equal(recorded.summary?.['peakReserved'], RECORDED_PEAK_RESERVED)
})

describe('an Nsight Systems export', () => {
  it('opens by its content: the device memory rows are the requests and the "cuda (recorded)" layout, pinned rows left out', async () => {
    assert.equal(await detectInputKind(paths.nsys), 'nsys-sqlite')
    const input = await openInput(paths.nsys)
    assert.equal(input.kind, 'nsys-sqlite')
    assert.deepEqual(counts(input), { allocs: SEGMENTS, frees: 0 })
    const sizes = segmentRows(snapshot).map((r) => r[2])
    assert.deepEqual([...input.trace.events.size], sizes)
    assert.equal(input.strategies.length, 1)
    assert.equal(input.strategies[0]!.name, 'cuda (recorded)')
    assert.equal(input.strategies[0]!.summary?.['peakReserved'], RECORDED_PEAK_RESERVED, "the recorded run's reserved peak, exactly")
    const p = input.trace.meta.properties
    assert.equal(p['nsys.left_out'], '2')
    assert.equal(p['nsys.peak_reserved'], String(RECORDED_PEAK_RESERVED))
    assert.ok(
      input.trace.meta.warnings.some((w) => /^2 memory events of other memory kinds \(Pinned 2\)/.test(w)),
      input.trace.meta.warnings.join('\n'),
    )
  })

  it('info, top, replay and whatif run on it with the recorded figures', async () => {
    const info = await vramscopeJson<Info>(['info', paths.nsys])
    assert.equal(info.kind, 'nsys-sqlite')
    assert.equal(info.format, 'Nsight Systems export (SQLite, device 0)')
    assert.equal(info.events, SEGMENTS)
    assert.equal(info.peakRequested, RECORDED_PEAK_RESERVED)
    assert.equal(info.strategies[0]!.summary.peakReserved, RECORDED_PEAK_RESERVED)
    const text = await vramscope(['info', paths.nsys])
    assert.equal(text.code, 0, shown(text))
    assert.equal(text.stderr, '', 'no ExperimentalWarning from node:sqlite')
    const top = await vramscopeJson<{ at: { reason: string; bytes: number; reserved: number }; groups: { bytes: number }[] }>(['top', paths.nsys])
    assert.equal(top.at.reserved, RECORDED_PEAK_RESERVED)
    assert.equal(
      top.groups.reduce((a, g) => a + g.bytes, 0),
      RECORDED_PEAK_RESERVED,
    )
    const replay = await vramscopeJson<{ strategies: { name: string; summary: { peakRequested: number; failures: number } }[] }>([
      'replay',
      paths.nsys,
      '-s',
      'caching:preset=pytorch',
    ])
    const caching = replay.strategies.find((s) => s.name === 'caching (pytorch)')!
    assert.equal(caching.summary.peakRequested, RECORDED_PEAK_RESERVED)
    assert.equal(caching.summary.failures, 0)
    const whatif = await vramscopeJson<{ events: number; configs: { conf: string; peakRequested: number; failures: number }[] }>([
      'whatif',
      paths.nsys,
      '--conf',
      'expandable_segments:True',
    ])
    assert.equal(whatif.events, SEGMENTS)
    const conf = whatif.configs.find((c) => c.conf === 'expandable_segments:True')!
    assert.equal(conf.peakRequested, RECORDED_PEAK_RESERVED)
    assert.equal(conf.failures, 0)
  })

  it("an enum table computed as it is read is left unread: Nsight Systems' own numbering stands in", async () => {
    const path = join(scratch, 'generated-enum.sqlite')
    await copyFile(paths.nsys, path)
    const { DatabaseSync } = await loadSqlite()
    const db = new DatabaseSync(path)
    db.exec('DROP TABLE ENUM_CUDA_MEM_KIND')
    db.exec('CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER, name TEXT GENERATED ALWAYS AS (hex(zeroblob(400000000))) VIRTUAL, label TEXT)')
    db.exec("INSERT INTO ENUM_CUDA_MEM_KIND (id, label) VALUES (1, 'Pinned'), (2, 'Device')")
    db.close()
    const started = Date.now()
    const input = await openInput(path)
    assert.deepEqual(counts(input), { allocs: SEGMENTS, frees: 0 })
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`)
  })

  it('with device memory on two devices, the one with the most events, saying so; --device picks another', async () => {
    const path = join(scratch, 'two-devices.sqlite')
    await writeNsysExport(snapshot, path, { otherDevice: true })
    const input = await openInput(path)
    assert.equal(input.nsys?.device, 0)
    assert.deepEqual(input.nsys?.devices, [0, 1])
    assert.ok(input.trace.meta.warnings.some((w) => w.includes(`device 0 (${SEGMENTS} events) was imported, not 1 (1)`)))
    const one = await openInput(path, { device: 1 })
    assert.deepEqual(counts(one), { allocs: 1, frees: 0 })
    assert.equal(one.strategies[0]!.summary?.['peakReserved'], 1 << 21)
  })
})

describe('an Umpire replay log', () => {
  for (const form of ['events', 'classic'] as const)
    it(`(${form} form) opens by its content: the DEVICE pool's requests are the trace, HOST's left out`, async () => {
      const path = form === 'events' ? paths.umpire : paths.umpireClassic
      assert.equal(await detectInputKind(path), 'umpire-log')
      const input = await openInput(path)
      assert.equal(input.kind, 'umpire-log')
      assert.deepEqual(counts(input), { allocs: ALLOCS, frees: FREES })
      // The same requests as the snapshot's, in the same order.
      const want = snapshot.trace.events
      const got = input.trace.events
      const wanted = [...want.kind.keys()].filter((i) => want.kind[i] === EventKind.alloc).map((i) => want.size[i])
      const gotSizes = [...got.kind.keys()].filter((i) => got.kind[i] === EventKind.alloc).map((i) => got.size[i])
      assert.deepEqual(gotSizes, wanted)
      assert.deepEqual(input.trace.tables.tags, ['pool'])
      const p = input.trace.meta.properties
      assert.equal(p['umpire.format'], form)
      assert.equal(p['umpire.left_out'], form === 'events' ? '2' : '1')
      assert.equal(p['umpire.allocator.pool'], `${ALLOCS} allocations on DEVICE`)
      if (form === 'classic') assert.equal(p['umpire.other_lines'], '2', "the program's own two lines")
    })

  it('info, top, replay and whatif run on it; the PyTorch-policy replay lands on the recorded reserved peak', async () => {
    const info = await vramscopeJson<Info>(['info', paths.umpire])
    assert.equal(info.format, 'Umpire replay log (JSON lines)')
    assert.equal(info.events, ALLOCS + FREES)
    assert.equal(info.peakRequested, PEAK_REQUESTED)
    const top = await vramscopeJson<{ at: { bytes: number }; groups: { key: string; bytes: number }[] }>(['top', paths.umpire, '--by', 'tag'])
    assert.equal(top.at.bytes, PEAK_REQUESTED)
    assert.deepEqual(
      top.groups.map((g) => [g.key, g.bytes]),
      [['pool', PEAK_REQUESTED]],
    )
    const replay = await vramscopeJson<{ strategies: { name: string; summary: { peakRequested: number; peakReserved: number } }[] }>([
      'replay',
      paths.umpireClassic,
      '-s',
      'caching:preset=pytorch',
    ])
    const caching = replay.strategies.find((s) => s.name === 'caching (pytorch)')!
    assert.equal(caching.summary.peakRequested, PEAK_REQUESTED)
    assert.equal(caching.summary.peakReserved, RECORDED_PEAK_RESERVED)
    const whatif = await vramscopeJson<{ events: number; configs: { conf: string; peakRequested: number; failures: number }[] }>([
      'whatif',
      paths.umpire,
      '--conf',
      'expandable_segments:True',
    ])
    assert.equal(whatif.events, ALLOCS + FREES)
    const conf = whatif.configs.find((c) => c.conf === 'expandable_segments:True')!
    assert.equal(conf.peakRequested, PEAK_REQUESTED)
    assert.equal(conf.failures, 0)
  })

  it('counts frees of unknown pointers, allocations on unknown allocators and unanswered intents', () => {
    const log = [
      '{"category":"operation","name":"make_memory_resource","numeric_args":{},"string_args":{"allocator_ref":"0x10"},"tags":{"allocator_name":"DEVICE::1","replay":"true"},"timestamp":5}',
      '{"category":"operation","name":"allocate","numeric_args":{"size":512},"string_args":{"allocator_ref":"0x10","pointer":"0xa00"},"tags":{"replay":"true"},"timestamp":10}',
      '{"category":"operation","name":"deallocate","string_args":{"allocator_ref":"0x10","pointer":"0xb00"},"tags":{"replay":"true"},"timestamp":11}',
      '{"category":"operation","name":"allocate","numeric_args":{"size":64},"string_args":{"allocator_ref":"0x99","pointer":"0xc00"},"tags":{"replay":"true"},"timestamp":12}',
      '{"category":"operation","name":"copy","string_args":{},"tags":{"replay":"true"},"timestamp":13}',
    ].join('\n')
    const r = parseUmpireLog(new TextEncoder().encode(log), 'mini.stats')
    assert.equal(r.unknownFrees, 1)
    assert.equal(r.unknownAllocator, 1)
    assert.deepEqual([...r.trace.events.device], [1])
    assert.deepEqual([...r.trace.events.time], [0])
    assert.ok(r.trace.meta.warnings.some((w) => w.includes('copy 1')))
    // Classic: a log begun between an allocation's two lines has its result without the intent.
    const head = '{ "kind":"replay", "uid":1, "timestamp":'
    const classic = [
      `${head}1, "event": "makeMemoryResource", "payload": { "name": "DEVICE" }, "result": "0x10" }`,
      `${head}2, "event": "allocate", "payload": { "allocator_ref": "0x10", "size": 256 }, "result": { "memory_ptr": "0xa00" } }`,
      `${head}3, "event": "allocate", "payload": { "allocator_ref": "0x10", "size": 512 } }`,
    ].join('\n')
    const c = parseUmpireLog(new TextEncoder().encode(classic), 'mid.log')
    assert.equal(c.unanswered, 1, 'the intent at the end, not the result at the start')
    assert.deepEqual([...c.trace.events.size], [256])
  })
})

describe('a real Umpire log: recorded on an H200 with Umpire 2024.07 built for CUDA 13 (scripts/gpu/record-umpire.sh)', () => {
  const LOG = fixture('umpire/h200-pools.stats')
  const ran = JSON.parse(readFileSync(fixture('umpire/h200-pools.workload.json'), 'utf8')) as Record<string, number>

  it("opens by its content with the program's own figures: every DEVICE request, the peak it held, HOST's left out", async () => {
    assert.equal(await detectInputKind(LOG), 'umpire-log')
    const input = await openInput(LOG)
    assert.deepEqual(counts(input), { allocs: ran['device_allocs'], frees: ran['device_allocs'] })
    const p = input.trace.meta.properties
    assert.equal(p['umpire.format'], 'events')
    assert.equal(p['umpire.left_out'], String(2 * ran['host_allocs']!), "the HOST staging buffers' allocations and deallocations")
    assert.equal(p['umpire.unknown_frees'], '0')
    assert.equal(p['umpire.allocator.DEVICE'], '8 allocations on DEVICE', 'the weights, straight from the resource')
    assert.equal(p['umpire.allocator.activations_pool'], `${12 * ran['steps']!} allocations on DEVICE`, 'the QuickPool, traced to DEVICE through its parent')
    assert.equal(p['umpire.allocator.workspace_pool'], `${ran['steps']} allocations on DEVICE`)
    assert.deepEqual([...input.trace.tables.tags].sort(), ['DEVICE', 'activations_pool', 'workspace_pool'])
    const info = await vramscopeJson<Info>(['info', LOG])
    assert.equal(info.peakRequested, ran['peak_live_bytes'], 'the peak of live bytes the program counted')
  })

  it('top names the pools at the peak; replay and whatif run on it', async () => {
    const top = await vramscopeJson<{ at: { bytes: number }; groups: { key: string; bytes: number }[] }>(['top', LOG, '--by', 'tag'])
    assert.equal(top.at.bytes, ran['peak_live_bytes'])
    assert.equal(top.groups[0]!.key, 'DEVICE', 'the weights hold the most')
    assert.equal(
      top.groups.reduce((n, g) => n + g.bytes, 0),
      ran['peak_live_bytes'],
    )
    const replay = await vramscopeJson<{ strategies: { name: string; summary: { peakRequested: number; peakReserved: number; failures: number } }[] }>([
      'replay',
      LOG,
      '-s',
      'caching:preset=pytorch,cuda_malloc',
    ])
    for (const s of replay.strategies) {
      assert.equal(s.summary.peakRequested, ran['peak_live_bytes'], s.name)
      assert.equal(s.summary.failures, 0, s.name)
      assert.ok(s.summary.peakReserved >= ran['peak_live_bytes']!, s.name)
    }
    const whatif = await vramscopeJson<{ events: number }>(['whatif', LOG, '--conf', 'expandable_segments:True'])
    assert.equal(whatif.events, 2 * ran['device_allocs']!)
  })
})

describe('hostile files', () => {
  const cases: [string, () => Promise<string>, RegExp][] = [
    [
      'a SQLite database without the memory table',
      async () => {
        const { DatabaseSync } = await loadSqlite()
        const path = join(scratch, 'other.sqlite')
        const db = new DatabaseSync(path)
        db.exec('CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)')
        db.close()
        return path
      },
      /a SQLite database without the table CUDA_GPU_MEMORY_USAGE_EVENTS \(an Nsight Systems export recorded without CUDA memory usage\): record with nsys profile --cuda-memory-usage=true/,
    ],
    [
      'an export cut short',
      async () => {
        const bytes = await readFile(paths.nsys)
        const path = join(scratch, 'cut.sqlite')
        await writeFile(path, bytes.subarray(0, 4096 + 100))
        return path
      },
      /SQLite cannot read it: .*(malformed|not a database)|without the table/,
    ],
    [
      'a row whose bytes are text',
      async () => {
        const path = join(scratch, 'text-bytes.sqlite')
        await copyFile(paths.nsys, path)
        const { DatabaseSync } = await loadSqlite()
        const db = new DatabaseSync(path)
        db.exec("UPDATE CUDA_GPU_MEMORY_USAGE_EVENTS SET bytes = 'many' WHERE rowid = 3")
        db.close()
        return path
      },
      /CUDA_GPU_MEMORY_USAGE_EVENTS row 3: "bytes" is "many", not an integer/,
    ],
    [
      'a memory table whose bytes are computed as it is read (a generated column)',
      async () => {
        const { DatabaseSync } = await loadSqlite()
        const path = join(scratch, 'generated.sqlite')
        const db = new DatabaseSync(path)
        db.exec(
          'CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, deviceId INTEGER, address INTEGER, memKind INTEGER, memoryOperationType INTEGER, ' +
            'bytes INTEGER GENERATED ALWAYS AS (length(zeroblob(900000000))) VIRTUAL)',
        )
        db.exec('INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, deviceId, address, memKind, memoryOperationType) VALUES (1, 0, 4096, 2, 0)')
        db.close()
        return path
      },
      /CUDA_GPU_MEMORY_USAGE_EVENTS is a table with generated or hidden columns \(bytes\), which Nsight Systems never writes/,
    ],
    [
      'an Umpire line that is not JSON',
      async () => {
        const path = join(scratch, 'bad.stats')
        await writeFile(path, `${(await readFile(paths.umpire, 'utf8')).split('\n').slice(0, 6).join('\n')}\n{"category":"operation","name":"allocate",\n`)
        return path
      },
      /line 7: not valid JSON/,
    ],
    [
      'an Umpire line past the length bound',
      async () => {
        const path = join(scratch, 'long.stats')
        await writeFile(
          path,
          `${(await readFile(paths.umpire, 'utf8')).split('\n').slice(0, 3).join('\n')}\n{"category":"operation","name":"${'x'.repeat(1 << 20)}"}\n`,
        )
        return path
      },
      /line 4: the line is longer than 65536 bytes/,
    ],
    [
      'an Umpire allocation with a bad pointer',
      async () => {
        const path = join(scratch, 'pointer.stats')
        await writeFile(
          path,
          '{"category":"operation","name":"allocate","numeric_args":{"size":8},"string_args":{"allocator_ref":"0x1","pointer":"nowhere"},"tags":{"replay":"true"},"timestamp":1}\n',
        )
        return path
      },
      /line 1: "allocate": "nowhere" is not a pointer/,
    ],
  ]
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  for (const [name, make, message] of cases)
    it(`${name}: an InputError naming the file; the CLI exits 2, in seconds`, async () => {
      const path = await make()
      const started = Date.now()
      await assert.rejects(openInput(path), (e: unknown) => {
        assert.ok(e instanceof InputError, String(e))
        assert.equal(e.file, path)
        assert.match(e.message, message)
        return true
      })
      const run = await vramscope(['info', path])
      assert.equal(run.code, 2, shown(run))
      assert.match(run.stderr, new RegExp(`^vramscope: ${escape(path)}: .*`, 'm'))
      assert.match(run.stderr, message)
      assert.doesNotMatch(run.stderr, /internal error|\n\s+at |ExperimentalWarning/, 'no crash, no stack, no warning')
      assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms`)
    })
})
