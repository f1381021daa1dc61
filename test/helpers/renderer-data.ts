// The renderer's data for a file, made as the app makes it: the host's AppSession opens and
// replays it, and the bundles it would send are decoded as the decode worker decodes them.
import { encodeBundle } from '../../src-shared/bundle.ts'
import type { Bundle } from '../../src-shared/contract.ts'
import { AppSession } from '../../src-main/services/app-session.ts'
import { decodeReplay, decodeTraceData, type StrategyView, type TraceData } from '../../src-renderer/viz/data.ts'

function wire(bundle: Bundle): ArrayBuffer {
  const bytes = encodeBundle(bundle)
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer
}

export async function rendererData(path: string, strategies: string): Promise<{ trace: TraceData; views: StrategyView[] }> {
  const session = new AppSession({ version: 'test', host: 'web', samplesDir: '/nonexistent' })
  const open = session.openPath(path)
  const opened = await session.jobs.settled(open.jobId)
  if (opened.state !== 'done') throw new Error(`opening ${path}: ${JSON.stringify(opened)}`)
  const summary = session.jobResult(open.jobId)
  const trace = decodeTraceData(wire(session.traceData(summary.traceId)))
  const replay = session.startReplay({ traceId: summary.traceId, strategies })
  const replayed = await session.jobs.settled(replay.jobId)
  if (replayed.state !== 'done') throw new Error(`replaying ${path}: ${JSON.stringify(replayed)}`)
  return { trace, views: decodeReplay(wire(await session.replayResult(replay.jobId))) }
}
