// A recorder for the SIGKILL test (trace-writer-kill.test.ts): appends generated events to a
// TraceWriter about 100 000 a second until it is killed. Event i is a pure function of i
// (expectedEvent), so the test can check that what survives is an exact prefix.
//   node --import tsx trace-writer-child.ts FILE FLUSH_INTERVAL_MS
import { resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { TraceWriter } from '../../src-main/services/trace/file.ts'
import { EventKind } from '../../src-main/services/trace/model.ts'

export function expectedEvent(i: number): { kind: EventKind; id: number; size: number; stream: string; stackName: string } {
  const pair = Math.floor(i / 2)
  return {
    kind: i % 2 === 0 ? EventKind.alloc : EventKind.free,
    id: pair,
    size: i % 2 === 0 ? 256 * (1 + ((pair * 2654435761) % 4096)) : 0,
    stream: `0x${(pair % 4).toString(16)}`,
    // A new stack (and frame) every 500 events: table rows arrive in the same flush as their users.
    stackName: `step_${Math.floor(i / 500)}`,
  }
}

async function main(): Promise<void> {
  const [path, interval] = process.argv.slice(2)
  if (!path || !interval) throw new Error('usage: trace-writer-child.ts FILE FLUSH_INTERVAL_MS')
  const wallClock = () => performance.timeOrigin + performance.now()
  const start = wallClock()
  const writer = await TraceWriter.create(
    path,
    { source: 'recording', warnings: [], properties: { startWallMs: String(start) } },
    { flushIntervalMs: Number(interval) },
  )
  let i = 0
  let announced = false
  const tick = () => {
    for (let k = 0; k < 100; k++, i++) {
      const e = expectedEvent(i)
      const stack = writer.stack([{ name: e.stackName, filename: 'train.py', line: 1 }])
      writer.append(e.kind, e.id, e.size, writer.stream(e.stream), 0, (wallClock() - start) * 1e6, stack)
    }
    if (!announced && writer.flushedEventCount > 0) {
      announced = true
      process.stdout.write('recording\n')
    }
    setTimeout(tick, 1)
  }
  tick()
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) void main()
