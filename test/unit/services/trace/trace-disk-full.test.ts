// Fault: the disk fills while a trace is being written. A child records under a file size limit
// (bash `ulimit -f`, SIGXFSZ ignored: writes past it fail with EFBIG, the way a full disk fails
// with ENOSPC, through the same path). The writer must stop with a TraceWriteError naming the file,
// the cause and the events on disk, and the part written must open with exactly those events, an
// exact prefix of what was appended. (The recorder killed mid-write: trace-writer-kill.test.ts and
// record.test.ts; the worker crashing mid-replay: worker-process.test.ts.)
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { it } from 'node:test'
import { fileURLToPath } from 'node:url'

import { readTrace } from '../../../../src-main/services/trace/file.ts'
import { EventKind } from '../../../../src-main/services/trace/model.ts'
import { expectedEvent } from '../../../helpers/trace-writer-child.ts'

const child = fileURLToPath(new URL('../../../helpers/trace-disk-full-child.ts', import.meta.url))
const LIMIT_KIB = 512

it(
  `disk full (a ${LIMIT_KIB} KiB file size limit) while writing a trace: a clear TraceWriteError, and the part written opens with every flushed event`,
  { timeout: 120_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'vramscope-disk-full-'))
    t.after(() => rmSync(dir, { recursive: true, force: true }))
    const path = join(dir, 'recording.vramscope')
    const run = spawnSync('bash', ['-c', `trap '' XFSZ; ulimit -f ${LIMIT_KIB}; exec "$0" --import tsx "$1" "$2"`, process.execPath, child, path], {
      encoding: 'utf8',
      timeout: 100_000,
    })
    assert.equal(run.status, 0, `the child ended badly: ${run.stderr}`)
    const report = JSON.parse(run.stdout.trim().split('\n').at(-1)!) as {
      error: { name: string; code?: string; message: string }
      closeError: { name: string; message: string } | null
      appended: number
      onDisk: number
    }
    t.diagnostic(report.error.message)
    assert.equal(report.error.name, 'TraceWriteError')
    assert.equal(report.error.code, 'EFBIG')
    assert.ok(report.error.message.startsWith(`${path}: `), 'the message names the file')
    assert.match(report.error.message, /size limit/)
    assert.match(report.error.message, new RegExp(`with ${report.onDisk} events on disk`))
    assert.equal(report.closeError?.name ?? 'TraceWriteError', 'TraceWriteError', 'closing after the failure gives the same error, nothing else')
    assert.ok(report.onDisk > 0 && report.onDisk < report.appended, `some events on disk (${report.onDisk}), not all (${report.appended})`)
    assert.ok(statSync(path).size <= LIMIT_KIB * 1024)

    const contents = await readTrace(path)
    const events = contents.trace.events
    assert.equal(events.kind.length, report.onDisk, 'the file holds exactly the events the writer reported on disk')
    assert.ok(
      contents.trace.meta.warnings.some((w) => /did not finish/.test(w)),
      'the reader says the recording did not finish',
    )
    const { streams, stacks, frames } = contents.trace.tables
    for (let i = 0; i < events.kind.length; i++) {
      const want = expectedEvent(i)
      const got = {
        kind: events.kind[i] as EventKind,
        id: events.id[i]!,
        size: events.size[i]!,
        stream: streams[events.stream[i]!]!,
        stackName: frames[stacks[events.stack[i]!]![0]!]!.name,
      }
      if (JSON.stringify(got) !== JSON.stringify(want)) assert.deepEqual(got, want, `event ${i}`)
    }
  },
)
