// `vramscope info` and `vramscope import`, run as a user runs them (a child process with plain Node)
// on the real fixtures: what info reports agrees with the importers and the trace reader, files
// are recognised by their content whatever their name, and an imported snapshot or log is a trace
// file holding the same events, with PyTorch's own layout kept as "pytorch (recorded)".
import assert from 'node:assert/strict'
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { importPytorchSnapshot } from '../../src-main/services/import/pytorch/index.ts'
import { importRmmLog } from '../../src-main/services/import/rmm.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import type { TraceEvents } from '../../src-main/services/trace/model.ts'
import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

interface InfoJson {
  kind: string
  format: string
  source: string
  events: number
  allocs: number
  frees: number
  markers: number
  blocks: number
  streams: number
  frames: number
  durationNs: number
  peakRequested: number
  warnings: string[]
  strategies: { name: string; strategy: string; layoutEvents: number; summary?: Record<string, number> }[]
}

let scratch: string
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-cli-info-'))
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

function sameColumns(actual: TraceEvents, expected: TraceEvents): void {
  for (const column of ['kind', 'id', 'size', 'stream', 'time', 'stack', 'tag'] as const)
    assert.deepEqual(Array.from(actual[column]), Array.from(expected[column]), `events.${column}`)
}

describe('vramscope info', () => {
  it("describes a PyTorch snapshot as the importer reads it, with PyTorch's own peak from its recorded layout", async () => {
    const path = fixture('pytorch/mlp_varbatch.pickle')
    const info = await vramscopeJson<InfoJson>(['info', path])
    const imported = await importPytorchSnapshot(path)
    const stats = JSON.parse(await readFile(fixture('pytorch/mlp_varbatch.stats.json'), 'utf8')).memory_stats
    assert.equal(info.kind, 'pytorch-snapshot')
    assert.equal(info.source, 'pytorch-snapshot')
    assert.equal(info.events, imported.trace.events.kind.length)
    assert.equal(info.allocs + info.frees + info.markers, info.events, 'a snapshot without OOMs has only allocs, frees and markers')
    assert.equal(info.allocs, stats['active.all.allocated'], 'one alloc per block PyTorch handed out')
    assert.equal(info.streams, imported.trace.tables.streams.length)
    assert.equal(info.frames, imported.trace.tables.frames.length)
    assert.ok(info.durationNs > 0)
    assert.deepEqual(
      info.strategies.map((s) => s.name),
      ['pytorch (recorded)'],
    )
    // The recorded layout's segments are PyTorch's: their peak is what memory_stats measured.
    assert.equal(info.strategies[0]!.summary!['peakReserved'], stats['reserved_bytes.all.peak'])
    assert.equal(info.strategies[0]!.summary!['deviceCalls.regionAlloc'], stats['segment.all.allocated'])
  })

  it('prints the same facts for people', async () => {
    const run = await vramscope(['info', fixture('pytorch/mlp_varbatch.pickle')])
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stdout, /format\s+PyTorch memory snapshot \(pickle\)/)
    assert.match(run.stdout, /events\s+2,391 \(1,137 allocs, 1,134 frees, 120 markers, 0 recorded failures\)/)
    assert.match(run.stdout, /strategies\s+pytorch \(recorded\) \[pytorch\], peak reserved 268 MiB, 17 regions/)
    assert.equal(run.stderr, '', 'no progress bar when stderr is not a terminal')
  })

  it('summarises a recorded out-of-memory: the request, its frame, what was held and free, the implied limit', async () => {
    const path = fixture('pytorch/real/oom_fraction__default.pickle')
    const run = await vramscope(['info', path])
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stdout, /out of memory\s+event 26: 484 MiB on stream 0, from prog_oom_fraction record_whatif_suite\.py:338\n/)
    assert.match(
      run.stdout,
      /at the failure\s+1\.70 GiB reserved, 8\.84 MiB of it free, largest free block 1\.66 MiB: a true shortage — the request needed 484 MiB more/,
    )
    assert.match(run.stdout, /implied limit\s+at least 1\.70 GiB and below 2\.18 GiB \(a per-process limit/)
    const info = await vramscopeJson<{ oom: { event: number; size: number; verdict: string; limit: { lowBytes: number; highBytes: number } } }>(['info', path])
    assert.equal(info.oom.event, 26)
    assert.equal(info.oom.size, 507_092_992)
    assert.equal(info.oom.verdict, 'shortage')
    assert.ok(info.oom.limit.lowBytes <= 2 ** 31 && 2 ** 31 < info.oom.limit.highBytes)
    const plain = await vramscope(['info', fixture('pytorch/mlp_varbatch.pickle')])
    assert.doesNotMatch(plain.stdout, /out of memory/, 'nothing about it where there was none')
  })

  it('describes the JSON form of a snapshot like its pickle', async () => {
    const fromPickle = await vramscopeJson<InfoJson>(['info', fixture('pytorch/synthetic.pickle')])
    const fromJson = await vramscopeJson<InfoJson>(['info', fixture('pytorch/synthetic.json')])
    assert.match(fromJson.format, /\(json\)/)
    assert.match(fromPickle.format, /\(pickle\)/)
    for (const key of ['events', 'allocs', 'frees', 'blocks', 'streams', 'frames', 'peakRequested'] as const) assert.equal(fromJson[key], fromPickle[key], key)
  })

  it("says when a snapshot's ring buffer overflowed", async () => {
    const info = await vramscopeJson<InfoJson>(['info', fixture('pytorch/mlp_varbatch_overflowed.pickle')])
    assert.ok(
      info.warnings.some((w) => /overflow|lost|ring buffer/i.test(w)),
      JSON.stringify(info.warnings),
    )
  })

  it('describes an RMM log as the RMM importer reads it', async () => {
    const path = fixture('rmm/clock-time.csv')
    const info = await vramscopeJson<InfoJson & { rmm: { lines: number; liveAtEnd: number } }>(['info', path])
    const imported = await importRmmLog(path)
    assert.equal(info.kind, 'rmm-log')
    assert.equal(info.events, imported.trace.events.kind.length)
    assert.equal(info.streams, imported.trace.tables.streams.length)
    assert.equal(info.rmm.liveAtEnd, imported.liveAtEnd)
    assert.deepEqual(info.strategies, [])
  })

  it('describes a trace file as its expected.json says, stored strategies included', async () => {
    const path = fixture('trace/sample.vramscope')
    const expected = JSON.parse(await readFile(fixture('trace/sample.expected.json'), 'utf8'))
    const info = await vramscopeJson<InfoJson & { traceFile: { complete: boolean; version: string } }>(['info', path])
    assert.equal(info.kind, 'trace')
    assert.equal(info.events, expected.rows.events)
    assert.equal(info.allocs, expected.eventKinds.alloc)
    assert.equal(info.markers, expected.eventKinds.marker)
    assert.equal(info.streams, expected.rows.streams)
    assert.deepEqual(info.warnings, expected.meta.warnings)
    assert.equal(info.traceFile.version, expected.version)
    assert.deepEqual(
      info.strategies.map((s) => s.name),
      expected.strategies.map((s: { name: string }) => s.name),
    )
  })

  it('says an interrupted recording is incomplete', async () => {
    const run = await vramscope(['info', fixture('trace/sample-recording.vramscope')])
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stdout, /a recording, incomplete/)
  })

  it('recognises files by their content, not their name', async () => {
    const cases: [string, string][] = [
      ['pytorch/mlp_varbatch.pickle', 'pytorch-snapshot'],
      ['pytorch/synthetic.json', 'pytorch-snapshot'],
      ['trace/sample.vramscope', 'trace'],
      ['rmm/clock-time.csv', 'rmm-log'],
    ]
    for (const [name, kind] of cases) {
      const renamed = join(scratch, `${name.replace('/', '-')}.data`)
      await copyFile(fixture(name), renamed)
      const info = await vramscopeJson<InfoJson>(['info', renamed])
      assert.equal(info.kind, kind, name)
    }
  })
})

describe('vramscope import', () => {
  it("saves a PyTorch snapshot as a trace file with the same events and PyTorch's recorded layout", async () => {
    const path = fixture('pytorch/transformer_varseq.pickle')
    const out = join(scratch, 'transformer.vramscope')
    const run = await vramscope(['import', path, '-o', out])
    assert.equal(run.code, 0, shown(run))
    assert.match(run.stdout, /-> .*transformer\.vramscope/)
    const written = await readTrace(out)
    const imported = await importPytorchSnapshot(path)
    sameColumns(written.trace.events, imported.trace.events)
    assert.deepEqual(written.trace.tables.streams, imported.trace.tables.streams)
    assert.deepEqual(written.trace.tables.frames, imported.trace.tables.frames)
    assert.equal(written.file.complete, true)
    const recorded = written.strategies.find((s) => s.name === 'pytorch (recorded)')
    assert.ok(recorded?.layout, 'the recorded layout is kept')
    assert.deepEqual(Array.from(recorded.layout.address), Array.from(imported.recorded[0]!.layout!.address))
    const stats = JSON.parse(await readFile(fixture('pytorch/transformer_varseq.stats.json'), 'utf8')).memory_stats
    assert.equal(recorded.summary?.['peakReserved'], stats['reserved_bytes.all.peak'], 'stored with its figures')
  })

  it('saves an RMM log as a trace file with the same events', async () => {
    const path = fixture('rmm/with-failures.csv')
    const out = join(scratch, 'rmm.vramscope')
    const result = await vramscopeJson<{ output: string; events: number; kind: string }>(['import', path, '-o', out])
    assert.equal(result.kind, 'rmm-log')
    assert.equal(result.output, out)
    const written = await readTrace(out)
    const imported = await importRmmLog(path)
    assert.equal(result.events, imported.trace.events.kind.length)
    sameColumns(written.trace.events, imported.trace.events)
    assert.equal(written.trace.meta.source, 'rmm-log')
  })

  it('needs -o', async () => {
    const run = await vramscope(['import', fixture('rmm/clock-time.csv')])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /--output/)
  })

  it('imports the device --device names from a snapshot of two, or all of them, and refuses one it does not have', async () => {
    const path = fixture('pytorch/real/forms/oom_fraction__default-two-devices.pickle')
    const devicesOf = async (args: string[]) => {
      const out = join(scratch, `two-devices-${args.join('-') || 'default'}.vramscope`)
      const run = await vramscope(['import', path, '-o', out, ...args])
      assert.equal(run.code, 0, shown(run))
      const read = await readTrace(out)
      return {
        devices: [...new Set(read.trace.events.device)],
        layouts: read.strategies.map((s) => s.name),
        property: read.trace.meta.properties['pytorch.device'],
      }
    }
    assert.deepEqual(await devicesOf([]), { devices: [0], layouts: ['pytorch (recorded)'], property: '0' })
    assert.deepEqual(await devicesOf(['--device', '1']), { devices: [1], layouts: ['pytorch (recorded)'], property: '1' })
    assert.deepEqual(await devicesOf(['--device', 'all']), {
      devices: [0, 1],
      layouts: ['pytorch (recorded), cuda:0', 'pytorch (recorded), cuda:1'],
      property: '0,1',
    })
    const info = await vramscopeJson<InfoJson>(['info', path, '--device', 'all'])
    assert.equal(info.strategies.length, 2)
    const missing = await vramscope(['import', path, '-o', join(scratch, 'none.vramscope'), '--device', '2'])
    assert.equal(missing.code, 2, shown(missing))
    assert.match(missing.stderr, /device 2 has no events or segments in this snapshot \(it has devices 0, 1\)/)
    const bad = await vramscope(['import', path, '-o', join(scratch, 'none.vramscope'), '--device', 'gpu1'])
    assert.equal(bad.code, 2, shown(bad))
    assert.match(bad.stderr, /--device: 'gpu1' is neither 'all' nor a device ordinal/)
  })
})
