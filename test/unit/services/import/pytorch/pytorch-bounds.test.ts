// Resource bounds of the PyTorch snapshot import on hostile inputs: small pickles that expand to
// far more than they hold through shared memo references (scripts/fixtures/make_hostile_pickles.py
// writes them), and snapshots of many devices. Each import runs in a child under a time and a
// resident-memory limit (helpers/bounded-child.ts); it must end with a result or a
// SnapshotImportError naming the file and the limit, never a crash, a hang or a blow-up.
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, it, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'

import { runBounded } from '../../../../helpers/bounded-child.ts'

const child = fileURLToPath(new URL('../../../../helpers/pytorch-import-child.ts', import.meta.url))
const hostile = fileURLToPath(new URL('../../../../fixtures/hostile/', import.meta.url))
/** The bounds every hostile input must be imported (or refused) within. */
const TIME_LIMIT_MS = 20_000
const MEMORY_LIMIT = 1.5 * 2 ** 30

interface ChildOutcome {
  ok: boolean
  error?: string
  code?: string
  message?: string
  devices?: number
  ms: number
  maxRss: number
}

async function importBounded(t: TestContext, file: string, args: string[] = [], env: Record<string, string> = {}): Promise<ChildOutcome> {
  const run = await runBounded(['--import', 'tsx', child, file, ...args], TIME_LIMIT_MS, MEMORY_LIMIT, env)
  assert.equal(run.killed, null, `the import ran past its ${run.killed === 'time' ? `${TIME_LIMIT_MS} ms` : `${MEMORY_LIMIT} bytes resident`}`)
  assert.equal(run.signal, null, `the import died of ${run.signal}: ${run.stderr.slice(-500)}`)
  assert.equal(run.code, 0, run.stderr.slice(-2000))
  const outcome = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as ChildOutcome
  assert.ok(outcome.maxRss < MEMORY_LIMIT, `peak resident memory ${outcome.maxRss} bytes`)
  t.diagnostic(
    `${file.split('/').at(-1)}${args.length > 0 ? ` (${args.join(' ')})` : ''}: ${run.ms.toFixed(0)} ms, peak ${(run.peakRss / 2 ** 20).toFixed(0)} MB resident`,
  )
  if (!outcome.ok) assert.equal(outcome.error, 'SnapshotImportError', outcome.message)
  return outcome
}

const scratch = mkdtempSync(join(tmpdir(), 'vramscope-bounds-'))
after(() => rmSync(scratch, { recursive: true, force: true }))

/** A protocol 4 pickle of {'segments': [], 'device_traces': [[alloc] for each device]}, each alloc its own dict. */
function manyDevicesPickle(devices: number): string {
  const enc = new TextEncoder()
  const parts: number[] = [0x80, 4]
  const str = (s: string) => parts.push(0x8c, s.length, ...enc.encode(s))
  parts.push(0x7d, 0x28) // EMPTY_DICT, MARK
  str('segments')
  parts.push(0x5d) // EMPTY_LIST
  str('device_traces')
  parts.push(0x5d)
  for (let d = 0; d < devices; d++) {
    parts.push(0x5d, 0x7d, 0x28) // EMPTY_LIST, EMPTY_DICT, MARK
    str('action')
    str('alloc')
    str('addr')
    parts.push(0x8a, 5, 0, 0, 0, 0, 2) // LONG1: 2^33
    str('size')
    parts.push(0x4d, 0, 2) // BININT2: 512
    str('stream')
    parts.push(0x4b, 0) // BININT1
    str('time_us')
    parts.push(0x4b, 1)
    parts.push(0x75, 0x61, 0x61) // SETITEMS, APPEND (the event), APPEND (the device's list)
  }
  parts.push(0x75, 0x2e) // SETITEMS, STOP
  const path = join(scratch, `devices-${devices}.pickle`)
  writeFileSync(path, Uint8Array.from(parts))
  return path
}

describe('pickle values shared through the memo are bounded in total, each reference counted', () => {
  it('refuses allocator_settings of ten levels of ten references to one list (300 bytes, 10^10 values) within seconds, naming the limit', async (t) => {
    const outcome = await importBounded(t, join(hostile, 'shared-memo-settings.pickle'))
    assert.equal(outcome.code, 'limit')
    assert.match(
      outcome.message!,
      /\/shared-memo-settings\.pickle: allocator_settings: the snapshot expands to more than \d+ values .*VRAMSCOPE_MAX_EXPANDED_VALUES/,
    )
  })

  it('refuses 2000 references to a segment of 2000 references to one block, naming the limit and the segments', async (t) => {
    const outcome = await importBounded(t, join(hostile, 'shared-memo-segments.pickle'))
    assert.equal(outcome.code, 'limit')
    assert.match(outcome.message!, /\/shared-memo-segments\.pickle: segments \(device 0\): the snapshot expands to more than \d+ values/)
  })

  it('refuses 1000 devices that list one shared list of 8000 events (8 M events from 18 KB), naming the limit', async (t) => {
    const outcome = await importBounded(t, join(hostile, 'shared-memo-device-traces.pickle'))
    assert.equal(outcome.code, 'limit')
    assert.match(outcome.message!, /\/shared-memo-device-traces\.pickle: device_traces\[\d+\]: the snapshot expands to more than \d+ values/)
  })

  it('refuses shared nested lists as frames, and skips them as annotations, without expanding them', async (t) => {
    const frames = await importBounded(t, join(hostile, 'shared-memo-frames.pickle'))
    assert.equal(frames.code, 'not-a-snapshot')
    assert.match(frames.message!, /a frame must be a dict/)
    const annotations = await importBounded(t, join(hostile, 'shared-memo-annotations.pickle'))
    assert.ok(annotations.ok, annotations.message)
  })
})

describe('memory grows with the input, not with the number of devices times the file', () => {
  it('refuses 10,000 one-event device lists (PyTorch numbers 128 at most) within seconds, naming the limit and how to raise it', async (t) => {
    const outcome = await importBounded(t, manyDevicesPickle(10_000))
    assert.equal(outcome.code, 'limit')
    assert.match(outcome.message!, /\/devices-10000\.pickle: (byte \d+, )?device_traces\[1024\].*: more than 1024 devices have events .*VRAMSCOPE_MAX_DEVICES/)
  })

  it('imports them in bounded memory once the limit is raised, and 1000 devices all at once', async (t) => {
    const raised = await importBounded(t, manyDevicesPickle(10_000), [], { VRAMSCOPE_MAX_DEVICES: '65536' })
    assert.ok(raised.ok, raised.message)
    assert.equal(raised.devices, 10_000)
    const all = await importBounded(t, manyDevicesPickle(1000), ['all'])
    assert.ok(all.ok, all.message)
    assert.equal(all.devices, 1000)
  })

  it('refuses 100,000 device lists within seconds, even with the limit raised as far as it goes', async (t) => {
    const outcome = await importBounded(t, manyDevicesPickle(100_000), [], { VRAMSCOPE_MAX_DEVICES: '1000000' })
    assert.equal(outcome.code, 'limit')
    assert.match(outcome.message!, /\/devices-100000\.pickle: (byte \d+, )?device_traces\[65536\].*: more than 65536 devices/)
  })

  it('refuses the many-devices fixture (1100 devices) and imports the many-stacks one', async (t) => {
    assert.equal((await importBounded(t, join(hostile, 'many-devices.pickle'))).code, 'limit')
    assert.ok((await importBounded(t, join(hostile, 'many-stacks.pickle'))).ok)
  })
})
