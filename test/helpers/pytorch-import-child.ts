// Imports one PyTorch snapshot in this process and prints one JSON line: the outcome (ok, or the
// error's class, code and message), the time and the peak resident memory (getrusage). Run by
// pytorch-bounds.test.ts under runBounded (bounded-child.ts), so that a blow-up kills only it.
//   node --import tsx pytorch-import-child.ts FILE [all]
import { importPytorchSnapshot } from '../../src-main/services/import/pytorch/index.ts'
import { SnapshotImportError } from '../../src-main/services/import/pytorch/snapshot-error.ts'

const [file, device] = process.argv.slice(2)
if (file === undefined) throw new Error('usage: pytorch-import-child.ts FILE [all]')
const started = performance.now()
let outcome: Record<string, unknown>
try {
  const result = await importPytorchSnapshot(file, device === 'all' ? { device: 'all' } : {})
  outcome = { ok: true, devices: result.devices.length, events: result.trace.events.kind.length, stacks: result.trace.tables.stacks.length }
} catch (e) {
  outcome = { ok: false, error: (e as Error).constructor.name, code: e instanceof SnapshotImportError ? e.code : undefined, message: (e as Error).message }
}
process.stdout.write(`${JSON.stringify({ ...outcome, ms: Math.round(performance.now() - started), maxRss: process.resourceUsage().maxRSS * 1024 })}\n`)
