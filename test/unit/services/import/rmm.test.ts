// RMM logging_resource_adaptor CSV import: the logs RMM writes (both time formats, fmt and printf
// pointer styles, failures) become the request trace they describe, event by event; lenient input
// (CRLF, BOM, quotes, spaces, blank lines, no header) still imports; bad input fails with the file,
// the line number and the problem.
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { RmmLogError, importRmmLog, parseRmmLog, type RmmImport, type RmmLogErrorCode } from '../../../../src-main/services/import/rmm.ts'
import { EventKind } from '../../../../src-main/services/trace/model.ts'

const fixture = (name: string) => fileURLToPath(new URL(`../../../fixtures/rmm/${name}`, import.meta.url))
const { alloc, free, oom } = EventKind

/** The events as [kind, id, size, stream name, time ns] rows, for readable comparisons. */
function rows(result: RmmImport): [number, number, number, string, number][] {
  const e = result.trace.events
  const streams = result.trace.tables.streams
  return Array.from(e.kind, (kind, i) => [kind, e.id[i]!, e.size[i]!, streams[e.stream[i]!]!, e.time[i]!])
}

async function refused(name: string, code: RmmLogErrorCode, line: number, problem: RegExp, options = {}): Promise<RmmLogError> {
  const path = fixture(name)
  let caught: unknown
  try {
    await importRmmLog(path, options)
  } catch (e) {
    caught = e
  }
  assert.ok(caught instanceof RmmLogError, `expected an RmmLogError, got ${caught instanceof Error ? caught.stack : String(caught)}`)
  assert.equal(caught.code, code, caught.message)
  assert.equal(caught.line, line, caught.message)
  assert.match(caught.problem, problem)
  assert.ok(caught.message.startsWith(`${path}: line ${line}: `), caught.message)
  return caught
}

describe('logs as RMM writes them', () => {
  it('HH:MM:SS.ffffff times, fmt-style 0x pointers, two threads and streams', async () => {
    const result = await importRmmLog(fixture('clock-time.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 1024, '0', 0],
      [alloc, 1, 2048, '0', 37_000],
      [alloc, 2, 1048576, '0x55d1c0a3e2f0', 146_000],
      [free, 0, 0, '0', 636_000],
      [alloc, 3, 512, '0x55d1c0a3e2f0', 648_000],
      [free, 2, 0, '0x55d1c0a3e2f0', 2_412_000],
      [free, 1, 0, '0', 2_635_000],
    ])
    const t = result.trace
    assert.equal(t.meta.source, 'rmm-log')
    assert.equal(t.meta.origin, fixture('clock-time.csv'))
    assert.deepEqual(t.tables.tags, ['thread 140130286597952', 'thread 140130278205248'])
    assert.deepEqual([...t.events.tag], [0, 0, 0, 0, 1, 1, 0])
    assert.equal(t.meta.properties['timeFormat'], 'HH:MM:SS.ffffff')
    assert.equal(t.meta.properties['firstTime'], '14:03:27.107365')
    assert.equal(result.liveAtEnd, 1)
    assert.equal(result.lines, 8)
    assert.deepEqual(t.meta.warnings, [])
  })

  it('times in seconds since the epoch keep their microseconds; deallocate is a free', async () => {
    const result = await importRmmLog(fixture('seconds-time.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 1024, '0x7f8a38001020', 0],
      [alloc, 1, 2048, '0x7f8a38001020', 111_111_000],
      [free, 0, 0, '0x7f8a38001020', 222_222_000],
      [free, 1, 0, '0x7f8a38001020', 876_545_000],
    ])
    assert.equal(result.trace.meta.properties['timeFormat'], 'seconds')
    assert.equal(result.liveAtEnd, 0)
  })

  it('printf-style pointers and streams without 0x; an allocate failure is an oom event', async () => {
    const result = await importRmmLog(fixture('printf-style.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 256, '0', 0],
      [alloc, 1, 4096, '0x7f3c7c0042a0', 9_000],
      [free, 0, 0, '0', 19_000],
      [oom, 0, 68719476736, '0x7f3c7c0042a0', 29_000],
      [free, 1, 0, '0x7f3c7c0042a0', 39_000],
    ])
  })

  it('allocate failures with 0x0 and (nil) pointers', async () => {
    const result = await importRmmLog(fixture('with-failures.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 1073741824, '0', 0],
      [oom, 0, 85899345920, '0', 500_000],
      [oom, 0, 42949672960, '0', 700_000],
      [free, 0, 0, '0', 1_000_000],
    ])
    assert.equal(result.trace.meta.properties['allocationFailures'], '2')
  })
})

describe('lenient reading', () => {
  it('CRLF, a byte order mark, quoted fields, spaces, blank lines, a trailing comma, 0X', async () => {
    const result = await importRmmLog(fixture('crlf.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 512, '0', 0],
      [alloc, 1, 1024, '0', 2_000],
      [free, 0, 0, '0', 3_000],
    ])
    assert.equal(result.lines, 6)
    assert.deepEqual(result.badLines, [])
  })

  it('frees of unknown or already freed pointers are skipped and counted; a reused live pointer implies a free', async () => {
    const result = await importRmmLog(fixture('unknown-frees.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 256, '0', 10_000],
      [free, 0, 0, '0', 20_000],
      [alloc, 1, 512, '0', 40_000],
      [free, 1, 0, '0', 50_000],
      [alloc, 2, 1024, '0', 50_000],
      [free, 2, 0, '0', 60_000],
    ])
    assert.equal(result.unknownFrees, 2)
    const warnings = result.trace.meta.warnings.join('\n')
    assert.match(warnings, /2 frees of pointers not allocated in this log \(or freed already\) were skipped \(lines 2, 5\)/)
    assert.match(warnings, /1 allocations returned a pointer that was still live; a free of the older block was assumed \(line 7\)/)
  })

  it('times across midnight keep counting, and a line logged out of order just after midnight stays before it', async () => {
    const result = await importRmmLog(fixture('midnight.csv'))
    assert.deepEqual(
      rows(result).map((r) => r[4]),
      [0, 2_000_000, 2_000_000, 3_000_000],
    )
    assert.match(result.trace.meta.warnings.join('\n'), /1 lines have a time before the line above.*\(line 4\)/)
  })

  it('a log without its header line: RMM column order is assumed, with a warning', async () => {
    const result = await importRmmLog(fixture('no-header.csv'))
    assert.deepEqual(rows(result), [
      [alloc, 0, 256, '0', 0],
      [free, 0, 0, '0', 100_000],
    ])
    assert.match(result.trace.meta.warnings[0]!, /line 1: no header line; the columns were taken to be Thread,Time,Action,Pointer,Size,Stream/)
  })

  it('a header and nothing else: an empty trace that says so', async () => {
    const result = await importRmmLog(fixture('header-only.csv'))
    assert.equal(result.trace.events.kind.length, 0)
    assert.deepEqual(result.trace.meta.warnings, ['the log holds no allocations or frees'])
  })

  it('columns in another order, found by the header', () => {
    const log = 'Size,Pointer,Action,Time\n64,0xa0,allocate,1.5\n64,0xa0,free,2.25\n'
    const result = parseRmmLog(new TextEncoder().encode(log), 'reordered.csv')
    assert.deepEqual(rows(result), [
      [alloc, 0, 64, '0', 0],
      [free, 0, 0, '0', 750_000_000],
    ])
  })

  it('broken lines up to the tolerance are skipped, each warning naming its line and problem', async () => {
    const result = await importRmmLog(fixture('broken-lines.csv'))
    assert.deepEqual(
      result.badLines.map((b) => [b.line, b.problem]),
      [
        [3, 'unknown action "alocate" (expected allocate, allocate failure, free or deallocate)'],
        [4, '4 fields, expected 6'],
        [6, 'size "lots" is not a byte count'],
        [7, 'pointer "0xZZ00" is not a hexadecimal address'],
        [8, 'time "ten o\'clock" is neither HH:MM:SS.ffffff nor seconds'],
      ],
    )
    assert.deepEqual(rows(result), [
      [alloc, 0, 256, '0', 0],
      [free, 0, 0, '0', 5_000],
    ])
    assert.equal(result.trace.meta.warnings[0], 'line 3: skipped, unknown action "alocate" (expected allocate, allocate failure, free or deallocate)')
  })
})

describe('bad input', () => {
  it('more broken lines than tolerated: fails at the first, listing the first ones', async () => {
    const e = await refused(
      'broken-lines.csv',
      'bad-lines',
      3,
      /^3 lines could not be understood, more than the 2 tolerated: line 3: unknown action "alocate".*; line 4: 4 fields, expected 6; line 6: size "lots"/,
      {
        maxBadLines: 2,
      },
    )
    assert.deepEqual(
      e.badLines.map((b) => b.line),
      [3, 4, 6],
    )
  })

  it('no tolerance: the first broken line fails the import', async () => {
    await refused('broken-lines.csv', 'bad-lines', 3, /^1 lines could not be understood, more than the 0 tolerated: line 3: unknown action/, { maxBadLines: 0 })
  })

  it('an empty file', async () => {
    await refused('empty.csv', 'empty', 1, /the file is empty; an RMM log starts with the header Thread,Time,Action,Pointer,Size,Stream/)
  })

  it('a binary file', async () => {
    await refused('binary.bin', 'binary', 1, /binary data \(a NUL byte at byte 3\): this is not an RMM CSV log/)
  })

  it('a missing file', async () => {
    await assert.rejects(
      importRmmLog(fixture('missing.csv')),
      (e: RmmLogError) => e instanceof RmmLogError && e.code === 'unreadable' && e.message.includes('missing.csv'),
    )
  })

  const parseFails = (text: string, code: RmmLogErrorCode, line: number, problem: RegExp, maxBadLines = 0) => {
    assert.throws(
      () => parseRmmLog(new TextEncoder().encode(text), 'inline.csv', { maxBadLines }),
      (e: RmmLogError) => {
        assert.ok(e instanceof RmmLogError, String(e))
        assert.equal(e.code, code, e.message)
        assert.equal(e.line, line, e.message)
        assert.match(e.problem, problem)
        return true
      },
    )
  }

  it('only blank lines', () => parseFails('\n  \r\n\n', 'empty', 1, /only blank lines \(3\)/))
  it('some other CSV', () =>
    parseFails('\n\nname,age\nbob,3\n', 'no-header', 3, /expected the RMM log header Thread,Time,Action,Pointer,Size,Stream, found "name,age"/))
  it('a header without Size', () => parseFails('Thread,Time,Action,Pointer\n', 'no-header', 1, /the header lacks Size/))
  it('a NUL byte in the first line of text', () => parseFails('Thread,Time\u0000,Action\n', 'binary', 1, /NUL byte at byte 11/))
  it('control characters in the first line', () => parseFails('\u0007\u0002\u0003garbage\n', 'binary', 1, /control characters/))
  it('an unclosed quote', () => parseFails(`Thread,Time,Action,Pointer,Size,Stream\n1,"1.0,allocate,0x1,2,0\n`, 'bad-lines', 2, /unclosed quote/))
  it('time formats mixed in one log', () =>
    parseFails(
      `Action,Pointer,Size,Time\nallocate,0x1,2,1.0\nallocate,0x2,2,10:00:00.000000\n`,
      'bad-lines',
      3,
      /is in HH:MM:SS.ffffff, the lines before in seconds/,
    ))
  it('allocate with a null pointer', () => parseFails(`Action,Pointer,Size\nallocate,0x0,64\n`, 'bad-lines', 2, /allocate with a null pointer/))
  it('a line of 100 000 characters', () =>
    parseFails(`Action,Pointer,Size\nallocate,0x1,${'9'.repeat(100_000)}\nfree,0x1,64\n`, 'bad-lines', 2, /longer than 65536 characters/))
  it('a size beyond 2^53', () =>
    parseFails(`Action,Pointer,Size\nallocate,0x1,18446744073709551615\n`, 'bad-lines', 2, /size "18446744073709551615" is not a byte count/))
  it('extra fields with values', () => parseFails(`Action,Pointer,Size\nallocate,0x1,64,surprise\n`, 'bad-lines', 2, /4 fields, the header has 3/))
})

describe('large logs', () => {
  let dir = ''
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-rmm-'))
  })
  after(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it('streams a 200 000-line log in pieces with progress, ids and live set intact', async (t) => {
    const lines = ['Thread,Time,Action,Pointer,Size,Stream']
    const n = 100_000
    for (let i = 0; i < n; i++) {
      const seconds = (i / 1e5).toFixed(6)
      lines.push(`1,${1700000000 + Math.floor(i / 1e5)}.${seconds.split('.')[1]},allocate,0x${(0x10000 + i * 256).toString(16)},${256 + (i % 4096)},0x0`)
    }
    // Free in reverse order: every free finds its block across read pieces.
    for (let i = n - 1; i >= 0; i--)
      lines.push(`1,1700000001.${String(n - 1 - i).padStart(6, '0')},free,0x${(0x10000 + i * 256).toString(16)},${256 + (i % 4096)},0x0`)
    const path = join(dir, 'large.csv')
    await writeFile(path, lines.join('\n'))
    const progress: number[] = []
    const started = performance.now()
    const result = await importRmmLog(path, { onProgress: (p) => progress.push(p.bytesDone) })
    t.diagnostic(`imported ${2 * n} lines in ${(performance.now() - started).toFixed(0)} ms`)
    const e = result.trace.events
    assert.equal(e.kind.length, 2 * n)
    assert.equal(result.liveAtEnd, 0)
    assert.equal(result.unknownFrees, 0)
    assert.ok(progress.length > 1, 'several pieces')
    for (let i = 0; i < n; i++) {
      if (e.kind[n + i] !== free || e.id[n + i] !== n - 1 - i) assert.fail(`free ${i} is not of block ${n - 1 - i}`)
    }
    assert.equal(e.time[n]!, 1e9)
  })
})
