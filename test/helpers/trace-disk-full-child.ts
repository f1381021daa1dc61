// A recorder for the disk-full test (trace-disk-full.test.ts), run under a file size limit
// (`ulimit -f`, SIGXFSZ ignored so that a write past it fails with EFBIG as on a full disk): appends
// the events of trace-writer-child.ts, flushing every 2000, until the writer refuses. Prints one
// JSON line: the error's name, code and message, and the events the writer reports on disk.
//   node --import tsx trace-disk-full-child.ts FILE
import { TraceWriter } from '../../src-main/services/trace/file.ts'
import { expectedEvent } from './trace-writer-child.ts'

const [path] = process.argv.slice(2)
if (!path) throw new Error('usage: trace-disk-full-child.ts FILE')
const writer = await TraceWriter.create(path, { source: 'recording', warnings: [], properties: {} }, { flushIntervalMs: 60_000 })
let error: unknown
let appended = 0
try {
  for (let i = 0; i < 10_000_000; i++) {
    const e = expectedEvent(i)
    const stack = writer.stack([{ name: e.stackName, filename: 'train.py', line: 1 }])
    writer.append(e.kind, e.id, e.size, writer.stream(e.stream), 0, i * 1000, stack)
    appended++
    if (i % 2000 === 1999) await writer.flush()
  }
} catch (e) {
  error = e
}
// Closing after the failure must not throw something else or hang either.
let closeError: unknown
await writer.close().catch((e: unknown) => (closeError = e))
const describe = (e: unknown) =>
  e instanceof Error ? { name: e.constructor.name, code: (e as { code?: string }).code, message: e.message } : { message: String(e) }
process.stdout.write(
  `${JSON.stringify({ error: describe(error), closeError: closeError === undefined ? null : describe(closeError), appended, onDisk: writer.flushedEventCount })}\n`,
)
