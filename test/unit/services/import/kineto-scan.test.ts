// The profiler trace scanner's shortcuts (services/import/kineto.ts): short strings walked byte by
// byte, an op's top-level "args" value parsed as null. Ops whose names, keys and args are written in
// every way JSON allows are read as JSON.parse of the whole text reads them, whole in memory and
// streamed in 1 MiB chunks (so events straddle chunks).
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it } from 'node:test'

import { importKinetoTrace, parseKinetoTrace, type KinetoImport } from '../../../../src-main/services/import/kineto.ts'

const dir = mkdtempSync(join(tmpdir(), 'vramscope-kineto-scan-'))
after(() => rmSync(dir, { recursive: true, force: true }))

/** Ops written in the ways a writer may: key order, spacing, escapes, "args" inside strings and values. */
function op(i: number, ts: number): string {
  const name = JSON.stringify([`aten::mm_${i}`, `say "args": {${i}}`, `"args"-like ${i} \\`, `ünïcode ${i} ✓`, `brace } ] ${i}`][i % 5]!)
  const stack = JSON.stringify(`a.py(1): f;b.py(${i}): g "quoted" {[ \\`)
  switch (i % 4) {
    case 0:
      return `{"ph": "X", "cat": "cpu_op", "name": ${name}, "pid": 1, "tid": 1, "ts": ${ts}, "dur": 10, "args": {"Call stack": ${stack}, "Input Dims": [[1, 2], []], "nested": {"args": {"x": "}"}}}}`
    case 1:
      return `{"args" : {"External id": ${i}, "s": "\\\\"}, "ph":"X","cat":"cpu_op","name":${name},"pid":1,"tid":1,"ts":${ts},"dur":10}`
    case 2:
      return `{ "ph" : "X" , "cat" : "cpu_op" , "name" : ${name} , "args"\t:\n[ "not", "an", "object", "{" ] , "pid" : 1 , "tid" : 1 , "ts" : ${ts} , "dur" : 10 }`
    default:
      return `{"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": ${ts}, "dur": 10, "\\u0061rgs": {"k": 1}, "name": ${name}}`
  }
}

function memory(ts: number, addr: number, bytes: number, allocated: number): string {
  return `{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ${ts}, "args": {"Total Reserved": 1073741824, "Total Allocated": ${allocated}, "Bytes": ${bytes}, "Device Id": 0, "Device Type": 1, "Addr": ${addr}}}`
}

function trace(ops: number): { text: string; names: string[] } {
  const events: string[] = []
  const names: string[] = []
  let allocated = 0
  for (let i = 0; i < ops; i++) {
    const ts = 1000 + i * 100
    events.push(op(i, ts))
    events.push(memory(ts + 5, 0x7f0000000000 + i * 4096, 4096, (allocated += 4096)))
    events.push(memory(ts + 6, 0x7f0000000000 + i * 4096, -4096, (allocated -= 4096)))
  }
  const text = `{"schemaVersion": 1, "traceEvents": [\n${events.join(',\n')}\n]}`
  // What each op is named, by JSON.parse of the whole text: the names the allocations must carry.
  const parsed = JSON.parse(text) as { traceEvents: { cat?: string; name?: string }[] }
  for (const e of parsed.traceEvents) if (e.cat === 'cpu_op') names.push(e.name!)
  return { text, names }
}

function tagsOf(r: KinetoImport): (string | null)[] {
  const { kind, tag } = r.trace.events
  const out: (string | null)[] = []
  for (let i = 0; i < kind.length; i++) if (kind[i] === 0) out.push(tag[i]! < 0 ? null : r.trace.tables.tags[tag[i]!]!)
  return out
}

describe("the profiler trace scanner's shortcuts", () => {
  it('names every allocation by its op, for ops written every way, whole and streamed in chunks', async () => {
    const { text, names } = trace(9000)
    assert.ok(text.length > 3 << 20, 'events straddle the 1 MiB chunks')
    const whole = parseKinetoTrace(new TextEncoder().encode(text), 'ops.json')
    assert.deepEqual(tagsOf(whole), names)
    assert.equal(whole.trace.meta.properties['kineto.cpu_ops'], String(names.length))
    const path = join(dir, 'ops.json')
    writeFileSync(path, text)
    const streamed = await importKinetoTrace(path)
    assert.deepEqual(tagsOf(streamed), names)
  })

  it('still refuses an op that is not JSON outside its args', () => {
    const bad = `{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1,, "dur": 2, "args": {"a": 1}}]}`
    assert.throws(() => parseKinetoTrace(new TextEncoder().encode(bad), 'bad.json'), /event 0 of traceEvents is not valid JSON/)
  })
})
