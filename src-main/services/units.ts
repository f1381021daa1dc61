// Byte sizes as people write them ("24GiB", "1.5G", "80GB", "512") and as vramscope prints them.
// Parsing follows the native library's parse_size (native/core/params.cpp): KiB, MiB, GiB, TiB
// and the bare letters K, M, G, T are binary; kB, MB, GB and TB are decimal (a GPU sold as 80 GB
// has 80e9 bytes), never read as their binary cousins; whole bytes only, so a size means the same
// to the CLI and to a strategy parameter.

const UNITS = new Map<string, number>([
  ['', 1],
  ['b', 1],
  ['k', 2 ** 10],
  ['kb', 1e3],
  ['kib', 2 ** 10],
  ['m', 2 ** 20],
  ['mb', 1e6],
  ['mib', 2 ** 20],
  ['g', 2 ** 30],
  ['gb', 1e9],
  ['gib', 2 ** 30],
  ['t', 2 ** 40],
  ['tb', 1e12],
  ['tib', 2 ** 40],
])

/** A size as an error quotes it: a pasted 10 kB value by its start and length. */
function shownText(text: string): string {
  return text.length <= 48 ? text : `${text.slice(0, 48)}… (${text.length} characters)`
}

const SIZE = /^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$/

/** Bytes of a size such as "24GiB", or a RangeError whose message says what is wrong with it. */
export function parseByteSize(text: string): number {
  const match = SIZE.exec(text)
  const shown = shownText(text)
  if (!match) throw new RangeError(`'${shown}' is not a size (try 512, 64KiB, 2MiB, 24GiB)`)
  const multiplier = UNITS.get(match[2]!.toLowerCase())
  if (multiplier === undefined)
    throw new RangeError(`unknown unit '${shownText(match[2]!)}' in '${shown}' (B, KiB, MiB, GiB, TiB binary; kB, MB, GB, TB decimal)`)
  const bytes = Number(match[1]) * multiplier
  if (!Number.isSafeInteger(bytes)) {
    // In the units it reads: PiB is not one of them (nor of the native library's).
    if (Number.isInteger(bytes) || !Number.isFinite(bytes)) throw new RangeError(`'${shown}' is too large (at most 2^53 - 1 bytes, just under 8192 TiB)`)
    throw new RangeError(`'${shown}' is not a whole number of bytes`)
  }
  return bytes
}

const BINARY_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']

/** "1.50 GiB", "512 B": three significant figures, binary units. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return String(bytes)
  const sign = bytes < 0 ? '-' : ''
  let value = Math.abs(bytes)
  let unit = 0
  while (value >= 1024 && unit < BINARY_UNITS.length - 1) {
    value /= 1024
    unit++
  }
  if (unit === 0) return `${sign}${value} B`
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2
  return `${sign}${value.toFixed(digits)} ${BINARY_UNITS[unit]}`
}

/** "1.23 s", "456 ms", "12.0 µs" for a duration in nanoseconds. */
export function formatDuration(ns: number): string {
  if (!Number.isFinite(ns)) return String(ns)
  const abs = Math.abs(ns)
  if (abs >= 3600e9) return `${(ns / 3600e9).toFixed(2)} h`
  if (abs >= 60e9) return `${(ns / 60e9).toFixed(2)} min`
  if (abs >= 1e9) return `${(ns / 1e9).toFixed(2)} s`
  if (abs >= 1e6) return `${(ns / 1e6).toFixed(1)} ms`
  if (abs >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`
  return `${ns} ns`
}

/** "12.3 M", "4.56 k": counts and rates with an SI prefix. */
export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return String(n)
  const abs = Math.abs(n)
  if (abs >= 1e9) return `${(n / 1e9).toFixed(2)} G`
  if (abs >= 1e6) return `${(n / 1e6).toFixed(2)} M`
  if (abs >= 1e4) return `${(n / 1e3).toFixed(1)} k`
  if (abs >= 100 || Number.isInteger(n)) return String(Math.round(n))
  return n.toPrecision(3)
}
