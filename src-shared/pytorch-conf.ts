// PyTorch's allocator configuration (PYTORCH_ALLOC_CONF, formerly PYTORCH_CUDA_ALLOC_CONF) as the
// user writes it: parsed with PyTorch 2.11's rules (the same keys, value checks and bracket form),
// printed back in the same syntax, and turned into the parameters of vramscope's model of PyTorch's
// caching allocator (docs/strategies.md, caching preset pytorch). Shared by the CLI, the services
// and the renderer, so a configuration reads the same everywhere.

const MiB = 1024 * 1024
/** kLargeBuffer / 1 MiB: the smallest max_split_size_mb and max_non_split_rounding_mb PyTorch accepts. */
const MIN_SPLIT_MB = 20
/** roundup_power2_divisions holds one value per power-of-two interval of sizes from 1 MiB. */
export const ROUNDUP_INTERVALS = 16

/** roundup_power2_divisions: one value for all sizes, or per interval ([256:1,512:2,>:8], boundaries in MiB). */
export type RoundupDivisions = number | { boundary: number | '>'; divisions: number }[]

export interface PytorchConf {
  maxSplitSizeMb?: number
  maxNonSplitRoundingMb?: number
  roundupPower2Divisions?: RoundupDivisions
  garbageCollectionThreshold?: number
  expandableSegments?: boolean
  /** set_per_process_memory_fraction as a setting: the limit is this fraction of the device's memory. */
  perProcessMemoryFraction?: number
  backend?: 'native' | 'cudaMallocAsync'
  /** Settings with no effect on device memory (pinned host memory, locking), kept as written. */
  other: [string, string][]
}

export class ConfError extends Error {
  override name = 'ConfError'
  /** The setting is one this PyTorch does not know (a newer PyTorch's, or a typo), not a bad value. */
  readonly unknownKey: boolean
  constructor(message: string, unknownKey = false) {
    super(message)
    this.unknownKey = unknownKey
  }
}

/** How much of a value an error message repeats: a pasted 10 kB value is shown by its start and its length. */
const SHOWN_CHARACTERS = 48

/** A value as an error message quotes it: whole when short, else its first characters and its length. */
export function shownValue(text: string): string {
  return text.length <= SHOWN_CHARACTERS ? text : `${text.slice(0, SHOWN_CHARACTERS)}… (${text.length} characters)`
}

/** The largest whole MiB count whose bytes vramscope holds exactly (2^53 - 1 bytes, about 8 PiB). */
export const MAX_MB = Math.floor(Number.MAX_SAFE_INTEGER / MiB)

/** Keys PyTorch 2.11 reads, and whether the model needs them. */
const HOST_ONLY_KEYS = new Set([
  'pinned_use_background_threads',
  'pinned_use_cuda_host_register',
  'pinned_use_hip_host_register',
  'pinned_num_register_threads',
  'pinned_reserve_segment_size_mb',
  'release_lock_on_cudamalloc',
  'release_lock_on_hipmalloc',
  'graph_capture_record_stream_reuse',
])
const DEVICE_KEYS = [
  'max_split_size_mb',
  'max_non_split_rounding_mb',
  'roundup_power2_divisions',
  'garbage_collection_threshold',
  'expandable_segments',
  'per_process_memory_fraction',
  'backend',
]

/** PyTorch's ConfigTokenizer: keys and values, with ':' ',' '[' ']' as tokens of their own; whitespace ignored. */
function tokenize(text: string): string[] {
  const tokens: string[] = []
  let word = ''
  for (const c of text) {
    if (c === ':' || c === ',' || c === '[' || c === ']') {
      if (word) tokens.push(word)
      tokens.push(c)
      word = ''
    } else if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      if (word) tokens.push(word)
      word = ''
    } else word += c
  }
  if (word) tokens.push(word)
  return tokens
}

const isPowerOfTwo = (n: number): boolean => Number.isSafeInteger(n) && n > 0 && (n & (n - 1)) === 0 && n <= 2 ** 30

/**
 * A PYTORCH_ALLOC_CONF string as PyTorch 2.11 reads it, or a ConfError naming the item that is
 * wrong. A leading `PYTORCH_ALLOC_CONF=` (or the CUDA spelling), and quotes around the value, as
 * pasted from a shell, are accepted. Unknown keys are refused (a typo would otherwise be a
 * silently ignored setting).
 */
export function parsePytorchConf(input: string): PytorchConf {
  let text = input.trim()
  const prefixed = /^(?:export\s+)?PYTORCH_(?:CUDA_|HIP_)?ALLOC_CONF\s*=\s*/.exec(text)
  if (prefixed) text = text.slice(prefixed[0].length).trim()
  if (/^(['"]).*\1$/s.test(text)) text = text.slice(1, -1)
  const conf: PytorchConf = { other: [] }
  const t = tokenize(text)
  const at = (i: number): string => t[i] ?? ''
  const expect = (i: number, token: string, key: string): void => {
    if (t[i] !== token)
      throw new ConfError(`${key}: expected '${token}'${t[i] === undefined ? ' but the configuration ended' : `, got '${shownValue(t[i]!)}'`}`)
  }
  // A number past 2^53 would be read as a neighbour of itself (1e+30, Infinity): refused here,
  // by name, rather than echoed back changed or failing later.
  const whole = (token: string, key: string, most = Number.MAX_SAFE_INTEGER): number => {
    if (!/^\d+$/.test(token)) throw new ConfError(`${key}: '${shownValue(token)}' is not a whole number`)
    const n = Number(token)
    if (!(n <= most)) throw new ConfError(`${key}: '${shownValue(token)}' is more than ${most}${most === MAX_MB ? ' (8 PiB, the most vramscope holds)' : ''}`)
    return n
  }
  const fraction = (value: string, key: string, range: string, inRange: (v: number) => boolean): number => {
    const v = /^(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?$/i.test(value) ? Number(value) : Number.NaN
    if (!inRange(v)) throw new ConfError(`${key} must be in ${range}, got '${shownValue(value)}'`)
    return v
  }
  const seen = new Set<string>()
  for (let i = 0; i < t.length; i++) {
    const key = at(i)
    if (key === ',') continue
    if (key === ':' || key === '[' || key === ']') throw new ConfError(`unexpected '${key}' where a setting's name should be`)
    if (seen.has(key)) throw new ConfError(`${shownValue(key)} is given twice`)
    seen.add(key)
    if (!HOST_ONLY_KEYS.has(key) && !DEVICE_KEYS.includes(key))
      throw new ConfError(`unknown setting '${shownValue(key)}' (PyTorch 2.11 knows ${[...DEVICE_KEYS, ...HOST_ONLY_KEYS].join(', ')})`, true)
    expect(++i, ':', key)
    const value = at(++i)
    if (value === '' || value === ',') throw new ConfError(`${key}: no value`)
    switch (key) {
      case 'max_split_size_mb':
      case 'max_non_split_rounding_mb': {
        const mb = whole(value, key, MAX_MB)
        if (mb < MIN_SPLIT_MB) throw new ConfError(`${key} too small, must be >= ${MIN_SPLIT_MB} (got ${mb})`)
        if (key === 'max_split_size_mb') conf.maxSplitSizeMb = mb
        else conf.maxNonSplitRoundingMb = mb
        break
      }
      case 'garbage_collection_threshold': {
        conf.garbageCollectionThreshold = fraction(value, key, '(0.0, 1.0)', (v) => v > 0 && v < 1)
        break
      }
      case 'per_process_memory_fraction': {
        conf.perProcessMemoryFraction = fraction(value, key, '(0.0, 1.0]', (v) => v > 0 && v <= 1)
        break
      }
      case 'expandable_segments': {
        if (!/^(true|false)$/i.test(value)) throw new ConfError(`expandable_segments: expected True or False, got '${shownValue(value)}'`)
        conf.expandableSegments = value.toLowerCase() === 'true'
        break
      }
      case 'backend': {
        if (value !== 'native' && value !== 'cudaMallocAsync') throw new ConfError(`backend: expected native or cudaMallocAsync, got '${shownValue(value)}'`)
        conf.backend = value
        break
      }
      case 'roundup_power2_divisions': {
        if (value !== '[') {
          const n = whole(value, key)
          if (!isPowerOfTwo(n)) throw new ConfError(`roundup_power2_divisions: the divisions must be a power of 2, got ${n}`)
          conf.roundupPower2Divisions = n
          break
        }
        const list: { boundary: number | '>'; divisions: number }[] = []
        while (at(++i) !== ']') {
          const boundary = at(i)
          if (boundary === '') throw new ConfError(`roundup_power2_divisions: expected ']' but the configuration ended`)
          const shownBoundary = shownValue(boundary)
          expect(++i, ':', `roundup_power2_divisions [${shownBoundary}`)
          const divisions = whole(at(++i), `roundup_power2_divisions [${shownBoundary}]`)
          if (divisions !== 0 && !isPowerOfTwo(divisions))
            throw new ConfError(`roundup_power2_divisions: the divisions must be a power of 2 or 0, got ${divisions} for ${shownBoundary}`)
          if (boundary === '>') list.push({ boundary, divisions })
          else {
            const mb = whole(boundary, 'roundup_power2_divisions interval')
            if (!isPowerOfTwo(mb)) throw new ConfError(`roundup_power2_divisions: the intervals must be powers of 2 (MiB), got ${mb}`)
            list.push({ boundary: mb, divisions })
          }
          if (at(i + 1) !== ']') expect(++i, ',', 'roundup_power2_divisions')
        }
        if (list.length === 0) throw new ConfError('roundup_power2_divisions: the list is empty')
        conf.roundupPower2Divisions = list
        break
      }
      default: {
        conf.other.push([key, value])
      }
    }
    if (i + 1 < t.length) expect(++i, ',', key)
  }
  return conf
}

function formatDivisions(d: RoundupDivisions): string {
  if (typeof d === 'number') return String(d)
  return `[${d.map((e) => `${e.boundary}:${e.divisions}`).join(',')}]`
}

/** The configuration as a PYTORCH_ALLOC_CONF value, in PyTorch's syntax; '' for the defaults. */
export function formatPytorchConf(conf: PytorchConf): string {
  const items: string[] = []
  if (conf.backend !== undefined && conf.backend !== 'native') items.push(`backend:${conf.backend}`)
  if (conf.expandableSegments !== undefined) items.push(`expandable_segments:${conf.expandableSegments ? 'True' : 'False'}`)
  if (conf.maxSplitSizeMb !== undefined) items.push(`max_split_size_mb:${conf.maxSplitSizeMb}`)
  if (conf.maxNonSplitRoundingMb !== undefined) items.push(`max_non_split_rounding_mb:${conf.maxNonSplitRoundingMb}`)
  if (conf.roundupPower2Divisions !== undefined) items.push(`roundup_power2_divisions:${formatDivisions(conf.roundupPower2Divisions)}`)
  if (conf.garbageCollectionThreshold !== undefined) items.push(`garbage_collection_threshold:${conf.garbageCollectionThreshold}`)
  if (conf.perProcessMemoryFraction !== undefined) items.push(`per_process_memory_fraction:${conf.perProcessMemoryFraction}`)
  for (const [k, v] of conf.other) items.push(`${k}:${v}`)
  return items.join(',')
}

/** The line to paste into a shell. */
export function confLine(conf: string): string {
  return conf === '' ? 'unset PYTORCH_ALLOC_CONF' : `PYTORCH_ALLOC_CONF=${/[\s'"$`\\[\]>]/.test(conf) ? `'${conf}'` : conf}`
}

/** The model of PyTorch's allocator that a configuration runs on: a strategy and its parameters. */
export interface ConfModel {
  strategy: 'caching' | 'async_pool'
  params: Record<string, string>
  /** What the model leaves out of this configuration (empty: nothing). */
  notModelled: string[]
}

/**
 * The model's strategy and parameters for a configuration under a device limit (bytes, as
 * set_per_process_memory_fraction sets it; 0: the whole device). garbage_collection_threshold is a
 * fraction of that limit, as in PyTorch; with no limit it is a fraction of `deviceBytes`.
 * A per_process_memory_fraction that leaves less than a byte of the device is a ConfError: 0 is
 * no limit to the model, and PyTorch would fail every request.
 */
export function confModel(conf: PytorchConf, limitBytes: number, deviceBytes: number): ConfModel {
  const notModelled: string[] = []
  let limit = limitBytes
  if (conf.perProcessMemoryFraction !== undefined) {
    const fromConf = Math.floor(conf.perProcessMemoryFraction * deviceBytes)
    if (fromConf < 1)
      throw new ConfError(
        `per_process_memory_fraction:${conf.perProcessMemoryFraction} of a device of ${deviceBytes} bytes is 0 bytes, which leaves no room for any request`,
      )
    limit = limit > 0 ? Math.min(limit, fromConf) : fromConf
  }
  if (conf.backend === 'cudaMallocAsync') {
    const params: Record<string, string> = {}
    return { strategy: 'async_pool', params, notModelled }
  }
  const params: Record<string, string> = { preset: 'pytorch' }
  if (conf.maxSplitSizeMb !== undefined) params['max_split_size'] = `${conf.maxSplitSizeMb}MiB`
  if (conf.maxNonSplitRoundingMb !== undefined) params['max_non_split_rounding_size'] = `${conf.maxNonSplitRoundingMb}MiB`
  const d = conf.roundupPower2Divisions
  if (d !== undefined) params['roundup_power2_divisions'] = typeof d === 'number' ? String(d) : d.map((e) => `${e.boundary}:${e.divisions}`).join(',')
  if (conf.expandableSegments) params['expandable_segments'] = 'true'
  if (conf.garbageCollectionThreshold !== undefined) {
    params['garbage_collection_threshold'] = String(conf.garbageCollectionThreshold)
    if (limit === 0) limit = deviceBytes
  }
  if (limit > 0) params['max_reserved'] = String(limit)
  return { strategy: 'caching', params, notModelled }
}

/** The allocator settings a trace carries, from its properties (`pytorch.allocator.<key>`, each value as JSON but the configuration strings). */
export function settingsOfProperties(properties: Readonly<Record<string, string>>): Record<string, unknown> | undefined {
  const prefix = 'pytorch.allocator.'
  const settings: Record<string, unknown> = {}
  let any = false
  for (const [k, v] of Object.entries(properties)) {
    if (!k.startsWith(prefix)) continue
    any = true
    const key = k.slice(prefix.length)
    try {
      settings[key] = key.endsWith('ALLOC_CONF') ? v : JSON.parse(v)
    } catch {
      settings[key] = v
    }
  }
  return any ? settings : undefined
}

/** A recorded configuration, and the recorded items PyTorch would refuse, which it leaves out. */
export interface SnapshotConf {
  /** PYTORCH_ALLOC_CONF as PyTorch prints it ('' for the defaults), every item one PyTorch accepts. */
  conf: string
  /** Each item left out: the key, the value as recorded and why ("max_split_size = 1048576: ..."). */
  refused: string[]
}

/** A recorded value as a refusal quotes it. */
function recordedValue(v: unknown): string {
  // A whole number past 2^53 in full (2^70 as 1180591620717411303424, not 1.18e+21).
  if (typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v)) return shownValue(BigInt(v).toString())
  return shownValue(typeof v === 'string' ? v : (JSON.stringify(v) ?? String(v)))
}

/**
 * The configuration a snapshot was recorded with, from its `allocator_settings` (PyTorch 2.11 keeps
 * the configuration string it parsed, and each value): the string when PyTorch's rules read it,
 * else the values written back as a configuration. A value PyTorch would refuse (a snapshot that
 * another tool wrote, or edited) is left out and named in `refused`, never passed on to fail a
 * replay later. Undefined when the snapshot has none.
 */
export function snapshotConf(settings: Record<string, unknown> | undefined): SnapshotConf | undefined {
  if (settings === undefined) return undefined
  const refused: string[] = []
  for (const key of ['PYTORCH_ALLOC_CONF', 'PYTORCH_CUDA_ALLOC_CONF']) {
    const text = settings[key]
    if (typeof text !== 'string') continue
    try {
      return { conf: formatPytorchConf(parsePytorchConf(text)), refused }
    } catch (e) {
      if (!(e instanceof ConfError)) throw e
      // A newer PyTorch's key: its values say what it parsed. A value PyTorch refuses: named.
      if (!e.unknownKey) refused.push(`${key} = '${shownValue(text)}': ${e.message}`)
    }
  }
  // Each value as the item it stands for, checked alone by PyTorch's rules.
  const items: string[] = []
  const item = (key: string, value: unknown, text: string): void => {
    try {
      parsePytorchConf(text)
      items.push(text)
    } catch (e) {
      if (!(e instanceof ConfError)) throw e
      refused.push(`${key} = ${recordedValue(value)}: ${e.message}`)
    }
  }
  const split = settings['max_split_size']
  // Unset is SIZE_MAX, which a snapshot writes as -1 (or as its unsigned value).
  if (typeof split === 'number' && split !== -1 && split !== 2 ** 64) {
    if (!Number.isSafeInteger(split) || split <= 0 || split % MiB !== 0)
      refused.push(`max_split_size = ${recordedValue(split)}: not a whole number of MiB from 1 MiB to 2^53 - 1 bytes, as PyTorch sets it`)
    else item('max_split_size', split, `max_split_size_mb:${split / MiB}`)
  }
  const gc = settings['garbage_collection_threshold']
  if (typeof gc === 'number' && gc !== 0) item('garbage_collection_threshold', gc, `garbage_collection_threshold:${gc}`)
  if (settings['expandable_segments'] === true) items.push('expandable_segments:True')
  const divisions = settings['roundup_power2_divisions']
  if (divisions !== null && typeof divisions === 'object') {
    const d = divisionsOfIntervals(divisions as Record<string, unknown>)
    if (d !== undefined) item('roundup_power2_divisions', divisions, `roundup_power2_divisions:${formatDivisions(d)}`)
  }
  return { conf: formatPytorchConf(parsePytorchConf(items.join(','))), refused }
}

/** snapshotConf's configuration alone. */
export function confOfSnapshotSettings(settings: Record<string, unknown> | undefined): string | undefined {
  return snapshotConf(settings)?.conf
}

/**
 * allocator_settings' roundup_power2_divisions (a value per interval, keyed by its start in MiB)
 * as the shortest configuration PyTorch reads back to the same 16 values: its bracket form sets
 * the intervals below the first entry to the first value, each entry its own interval, and '>'
 * every interval after the last entry.
 */
function divisionsOfIntervals(byInterval: Record<string, unknown>): RoundupDivisions | undefined {
  const entries = Object.entries(byInterval)
    .map(([k, v]) => [Number(k), Number(v)] as const)
    .filter(([k, v]) => Number.isFinite(k) && Number.isFinite(v))
    .sort((a, b) => a[0] - b[0])
  const values = entries.map(([, v]) => v)
  if (values.length === 0 || values.every((v) => v === 0)) return undefined
  if (values.every((v) => v === values[0])) return values[0]!
  let lead = 0
  while (lead + 1 < values.length && values[lead + 1] === values[0]) lead++
  let trail = values.length - 1
  while (trail - 1 > lead && values[trail - 1] === values[values.length - 1]) trail--
  const list: { boundary: number | '>'; divisions: number }[] = []
  for (let i = lead; i < trail; i++) list.push({ boundary: entries[i]![0], divisions: values[i]! })
  list.push({ boundary: '>', divisions: values[values.length - 1]! })
  return list
}
