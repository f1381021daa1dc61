// `vramscope export` and `vramscope diff`, run as a user runs them: the Chrome trace is valid JSON in
// the Trace Event format with counter tracks for every strategy, the CSV has one row per strategy
// holding its summary, and diff puts two files' figures side by side with b - a.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'

import { describeTrace } from '../../src-main/services/analysis/inspect.ts'
import { openInput } from '../../src-main/services/import/open-input.ts'
import { readTrace } from '../../src-main/services/trace/file.ts'
import { fixture, shown, vramscope, vramscopeJson } from '../helpers/cli.ts'

interface TraceEvent {
  ph: string
  pid: number
  tid: number
  ts?: number
  name: string
  args?: Record<string, unknown>
}

let scratch: string
let replayed: string
before(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'vramscope-cli-export-'))
  replayed = join(scratch, 'mlp.vramscope')
  const run = await vramscope(['replay', fixture('pytorch/mlp_varbatch.pickle'), '-s', 'caching:preset=pytorch,slab,buddy', '-o', replayed])
  assert.equal(run.code, 0, shown(run))
})
after(async () => {
  await rm(scratch, { recursive: true, force: true })
})

/** RFC 4180 fields: quoted fields may hold commas, doubled quotes and line breaks. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let field = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"'
        i++
      } else if (c === '"') quoted = false
      else field += c
    } else if (c === '"') quoted = true
    else if (c === ',') {
      row.push(field)
      field = ''
    } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++
      row.push(field)
      rows.push(row)
      row = []
      field = ''
    } else field += c
  }
  if (field !== '' || row.length > 0) rows.push([...row, field])
  return rows
}

describe('vramscope export --format chrome', () => {
  it('writes Trace Event JSON with requested, reserved and fragmentation counter tracks for every strategy', async () => {
    const out = join(scratch, 'mlp.chrome.json')
    const run = await vramscope(['export', replayed, '--format', 'chrome', '-o', out])
    assert.equal(run.code, 0, shown(run))
    const json = JSON.parse(await readFile(out, 'utf8')) as { traceEvents: TraceEvent[]; displayTimeUnit: string }
    assert.ok(Array.isArray(json.traceEvents))
    const saved = await readTrace(replayed)
    const processNames = new Map(json.traceEvents.filter((e) => e.ph === 'M' && e.name === 'process_name').map((e) => [e.pid, e.args!['name'] as string]))
    for (const strategy of saved.strategies) {
      const pid = [...processNames].find(([, name]) => name === strategy.name)?.[0]
      assert.ok(pid !== undefined, `a process for ${strategy.name}`)
      const counters = json.traceEvents.filter((e) => e.ph === 'C' && e.pid === pid)
      const tracks = new Set(counters.map((e) => e.name))
      for (const track of ['requested', 'reserved']) assert.ok(tracks.has(track), `${strategy.name} has a ${track} track`)
      if (strategy.strategy !== 'pytorch') assert.ok(tracks.has('external fragmentation'), `${strategy.name} has a fragmentation track`)
      const reserved = counters.filter((e) => e.name === 'reserved')
      for (let i = 1; i < reserved.length; i++) assert.ok(reserved[i]!.ts! >= reserved[i - 1]!.ts!, 'timestamps never go back')
      const highest = Math.max(...reserved.map((e) => e.args!['bytes'] as number))
      assert.equal(highest, strategy.summary!['peakReserved'], `${strategy.name}: the reserved track reaches the peak`)
      for (const e of counters) assert.ok(Number.isFinite(e.ts) && Object.values(e.args!).every((v) => Number.isFinite(v as number)))
    }
    const markers = json.traceEvents.filter((e) => e.ph === 'i')
    assert.equal(markers.length, describeTrace(saved.trace).markers, "the trace's markers are instant events")
  })

  it('replays first with --strategies and writes to stdout without -o', async () => {
    const run = await vramscope(['export', fixture('rmm/clock-time.csv'), '--format', 'chrome', '--strategies', 'slab,arena'])
    assert.equal(run.code, 0, shown(run))
    const json = JSON.parse(run.stdout) as { traceEvents: TraceEvent[] }
    const names = json.traceEvents.filter((e) => e.name === 'process_name').map((e) => e.args!['name'])
    assert.deepEqual(names, ['trace', 'slab', 'arena'])
  })
})

describe('vramscope export --format csv', () => {
  it('writes one row per strategy with its summary', async () => {
    const out = join(scratch, 'mlp.csv')
    const result = await vramscopeJson<{ output: string; strategies: string[] }>(['export', replayed, '--format', 'csv', '-o', out])
    const saved = await readTrace(replayed)
    assert.deepEqual(
      result.strategies,
      saved.strategies.map((s) => s.name),
    )
    const rows = parseCsv(await readFile(out, 'utf8'))
    const [header, ...body] = rows
    assert.deepEqual(header!.slice(0, 3), ['name', 'strategy', 'params'])
    for (const metric of ['peakReserved', 'internalWasteAtPeak', 'externalFragmentationAtPeak', 'failures', 'deviceCalls'])
      assert.ok(header!.includes(metric), `a ${metric} column`)
    assert.equal(body.length, saved.strategies.length, 'one row per strategy')
    for (const [i, strategy] of saved.strategies.entries()) {
      const row = body[i]!
      assert.equal(row.length, header!.length)
      assert.equal(row[0], strategy.name)
      assert.deepEqual(JSON.parse(row[2]!), strategy.params, 'params survive quoting')
      assert.equal(Number(row[header!.indexOf('peakReserved')]), strategy.summary!['peakReserved'])
    }
  })

  it('refuses a file with no results to export, saying to give --strategies', async () => {
    const run = await vramscope(['export', fixture('rmm/clock-time.csv'), '--format', 'csv'])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /clock-time\.csv: holds no replay results.*--strategies/)
  })

  it('refuses an unknown format', async () => {
    const run = await vramscope(['export', replayed, '--format', 'svg'])
    assert.equal(run.code, 2, shown(run))
    assert.match(run.stderr, /svg/)
  })
})

describe('vramscope diff', () => {
  interface DiffJson {
    trace: { key: string; a: number; b: number; delta: number }[]
    strategies: { name: string; onlyIn?: string; rows: { key: string; a?: number; b?: number; delta?: number }[] }[]
  }

  it('puts two traces side by side with b - a', async () => {
    const a = fixture('pytorch/mlp_varbatch.pickle')
    const b = fixture('pytorch/inference_mixed.pickle')
    const diff = await vramscopeJson<DiffJson>(['diff', a, b])
    const [da, db] = [describeTrace((await openInput(a)).trace), describeTrace((await openInput(b)).trace)]
    for (const key of ['events', 'allocs', 'peakRequested'] as const) {
      const row = diff.trace.find((r) => r.key === key)!
      assert.equal(row.a, da[key])
      assert.equal(row.b, db[key])
      assert.equal(row.delta, db[key] - da[key])
    }
    // Both snapshots hold PyTorch's recorded layout, so their peaks are compared too.
    const recorded = diff.strategies.find((s) => s.name === 'pytorch (recorded)')!
    const peak = recorded.rows.find((r) => r.key === 'peakReserved')!
    assert.equal(peak.delta, peak.b! - peak.a!)
  })

  it('compares two result files strategy by strategy, and says which strategies one side lacks', async () => {
    const other = join(scratch, 'mlp-capped.vramscope')
    const run = await vramscope(['replay', fixture('pytorch/mlp_varbatch.pickle'), '-s', 'caching:preset=pytorch,arena', '--cap', '128MiB', '-o', other])
    assert.equal(run.code, 0, shown(run))
    const diff = await vramscopeJson<DiffJson>(['diff', replayed, other])
    const byName = new Map(diff.strategies.map((s) => [s.name, s]))
    assert.equal(byName.get('slab')?.onlyIn, 'a')
    assert.equal(byName.get('arena')?.onlyIn, 'b')
    const failures = byName.get('caching (pytorch)')!.rows.find((r) => r.key === 'failures')!
    assert.equal(failures.a, 0)
    assert.ok(failures.b! > 0, 'the capped run fails requests')
    const text = await vramscope(['diff', replayed, other])
    assert.equal(text.code, 0, shown(text))
    assert.match(text.stdout, /slab — only in a/)
    assert.match(text.stdout, /^failures\s+0\s+\d+\s+\+\d+/m)
    assert.match(text.stdout, /^not ranked in b: [\d,]+ failures?$/m, 'the capped run is not ranked, and the diff says why')
  })
})
