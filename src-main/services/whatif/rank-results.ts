// One rank's `whatif FILE --json` output read back as the rank's result (job.ts, RankResult),
// checked: bounded in size, and what is wrong named with the file. `vramscope ranks` merges a
// cluster's per-rank outputs from these, and the app opens a folder of them as a job
// (ranks-job.ts).
import { open, stat } from 'node:fs/promises'

import { InputError, notARegularFile } from '../input-error.ts'
import type { LabRow, RankResult } from './job.ts'

/** A result larger than this is refused: one rank's what-if output is a few hundred KiB. */
export const MAX_RESULT_BYTES = 64 << 20

const RANK_FROM = new Set<RankResult['rankFrom']>(['stats', 'name', 'order'])
const KINDS = new Set<string>(['recorded', 'pytorch', 'strategy'])

/** The file's text, refused when it is not a regular file or larger than MAX_RESULT_BYTES. */
export async function readBounded(path: string): Promise<string> {
  const s = await stat(path)
  const notFile = notARegularFile(s)
  if (notFile) throw new InputError(path, '', notFile)
  if (s.size > MAX_RESULT_BYTES)
    throw new InputError(path, '', `is ${s.size} bytes, over the ${MAX_RESULT_BYTES} a what-if result may be (is it a snapshot, not a whatif --json output?)`)
  const handle = await open(path, 'r')
  try {
    // Read at most one byte past the bound, in case the file grew after stat.
    const buffer = Buffer.alloc(Math.min(s.size, MAX_RESULT_BYTES) + 1)
    let length = 0
    while (length < buffer.length) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length)
      if (bytesRead === 0) break
      length += bytesRead
    }
    if (length > MAX_RESULT_BYTES) throw new InputError(path, '', `is over the ${MAX_RESULT_BYTES} bytes a what-if result may be`)
    return buffer.toString('utf8', 0, length)
  } finally {
    await handle.close()
  }
}

// A whatif --json output as read, before it is checked.
interface Json {
  error?: unknown
  message?: unknown
  configs?: unknown
  rank?: unknown
  rankFrom?: unknown
  file?: unknown
  events?: unknown
  device?: unknown
  deviceBytes?: unknown
  limit?: unknown
  bytes?: unknown
  source?: unknown
  recordedConf?: unknown
  floor?: unknown
  conf?: unknown
  kind?: unknown
  label?: unknown
  line?: unknown
  peakReserved?: unknown
  peakAllocated?: unknown
  segments?: unknown
  failures?: unknown
  smallestFittingBytes?: unknown
  notRanked?: unknown
}
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
const isBytesOrNull = (v: unknown): v is number | null => v === null || isCount(v)

/** A rank's "floor" (absent from outputs written before it was reported): four byte counts, else named as wrong. */
function floorOf(value: unknown, bad: (problem: string) => InputError): RankResult['floor'] {
  if (value === undefined || value === null) return null
  const keys = ['peakLiveBytes', 'peakLiveRoundedBytes', 'plannedBytes', 'plannedMs'] as const
  const o = (isObject(value) ? value : {}) as Record<string, unknown>
  if (!isObject(value) || keys.some((k) => !isCount(o[k]))) throw bad(`its "floor" is not {${keys.join(', ')}}, whole numbers`)
  const [peakLiveBytes, peakLiveRoundedBytes, plannedBytes, plannedMs] = keys.map((k) => o[k] as number) as [number, number, number, number]
  return { peakLiveBytes, peakLiveRoundedBytes, plannedBytes, plannedMs }
}

/**
 * One rank's result from its `whatif FILE --json` output, checked: what is wrong is named with
 * the file (not JSON, not a whatif output, a rank missing, a configuration row without its figures).
 */
export function rankResultOf(path: string, text: string): RankResult {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (e) {
    throw new InputError(path, '', `is not JSON (${(e as Error).message}); ranks reads the output of \`vramscope whatif FILE --json\``)
  }
  const bad = (problem: string): InputError => new InputError(path, '', `${problem}: not the output of \`vramscope whatif FILE --json\``)
  if (!isObject(value)) throw bad('is not a JSON object')
  if (isObject(value.error)) throw new InputError(path, '', `is a failed whatif's output: ${String(value.error.message ?? 'an error')}`)
  if (!Array.isArray(value.configs)) throw bad('has no "configs" array')
  if (value.rank === undefined) throw new InputError(path, '', 'has no "rank" (written by a vramscope before ranks came; run whatif FILE --json again)')
  if (!isCount(value.rank)) throw new InputError(path, '', `its "rank" is ${JSON.stringify(value.rank)}, not an integer of 0 or more`)
  const rankFrom = value.rankFrom as RankResult['rankFrom']
  if (!RANK_FROM.has(rankFrom)) throw bad(`its "rankFrom" is ${JSON.stringify(value.rankFrom)}, not "stats", "name" or "order"`)
  if (typeof value.file !== 'string') throw bad('has no "file"')
  if (!isCount(value.events)) throw bad('has no "events" count')
  if (!isObject(value.device) || !isCount(value.device.bytes)) throw bad('has no "device" with its bytes')
  if (!isCount(value.deviceBytes)) throw bad('has no "deviceBytes"')
  const limit = value.limit
  if (!isObject(limit) || !isBytesOrNull(limit.bytes) || !['option', 'implied', 'none'].includes(limit.source as string))
    throw bad('has no "limit" {bytes, source}')
  if (value.recordedConf !== null && typeof value.recordedConf !== 'string') throw bad('its "recordedConf" is neither a string nor null')
  const rows: LabRow[] = value.configs.map((row: unknown, i: number) => {
    const where = `configs[${i}]`
    if (!isObject(row)) throw bad(`${where} is not an object`)
    for (const key of ['conf', 'label'] as const) if (typeof row[key] !== 'string') throw bad(`${where} has no "${key}" string`)
    if (!KINDS.has(row.kind as string)) throw bad(`${where}'s "kind" is ${JSON.stringify(row.kind)}, not "recorded", "pytorch" or "strategy"`)
    for (const key of ['rank', 'peakReserved', 'peakAllocated', 'segments', 'failures'] as const)
      if (!isCount(row[key])) throw bad(`${where}'s "${key}" is ${JSON.stringify(row[key])}, not a count`)
    if (!isBytesOrNull(row.smallestFittingBytes)) throw bad(`${where}'s "smallestFittingBytes" is neither a count nor null`)
    if (row.line !== undefined && row.line !== null && typeof row.line !== 'string') throw bad(`${where}'s "line" is neither a string nor null`)
    if (row.notRanked !== undefined && row.notRanked !== null && typeof row.notRanked !== 'string')
      throw bad(`${where}'s "notRanked" is neither a string nor null`)
    return {
      rank: row.rank,
      conf: row.conf,
      kind: row.kind,
      label: row.label,
      ...(typeof row.line === 'string' && { line: row.line }),
      peakReserved: row.peakReserved,
      peakAllocated: row.peakAllocated,
      segments: row.segments,
      failures: row.failures,
      smallestFittingBytes: row.smallestFittingBytes,
      ...(typeof row.notRanked === 'string' && { notRanked: row.notRanked }),
    } as LabRow
  })
  return {
    file: value.file,
    rank: value.rank,
    rankFrom,
    events: value.events,
    device: value.device as unknown as RankResult['device'],
    deviceBytes: value.deviceBytes,
    limit: limit as RankResult['limit'],
    recordedConf: (value.recordedConf as string | null) ?? null,
    floor: floorOf(value.floor, bad),
    rows,
  }
}

/**
 * Whether the lab that wrote a result searched for the smallest fitting limits (whatif without
 * --no-search): a limit found, or more replays on a row than its base runs. A search that found
 * none on any row of any rank reads as no search ("-", not "none up to the device").
 */
export function searched(text: string, result: RankResult): boolean {
  if (result.rows.some((r) => r.smallestFittingBytes !== null)) return true
  const base = 1 + (result.limit.bytes !== null ? 1 : 0)
  const configs = (JSON.parse(text) as { configs: { replays?: unknown }[] }).configs
  return configs.some((c) => typeof c.replays === 'number' && c.replays > base)
}

/**
 * The ranks' results from their output files, in rank order, and whether their labs searched for
 * the smallest fitting limits; two outputs of one rank are refused, naming both.
 */
export async function readRankResults(files: readonly string[]): Promise<{ results: RankResult[]; search: boolean; fileOf: Map<number, string> }> {
  const results: RankResult[] = []
  const fileOf = new Map<number, string>()
  let search = false
  for (const file of files) {
    const text = await readBounded(file)
    const result = rankResultOf(file, text)
    const other = fileOf.get(result.rank)
    if (other !== undefined) throw new InputError(file, '', `is rank ${result.rank}, as ${other} is: give each rank's result once`)
    fileOf.set(result.rank, file)
    search ||= searched(text, result)
    results.push(result)
  }
  results.sort((a, b) => a.rank - b.rank)
  return { results, search, fileOf }
}
