// Numbers as people read them in the UI: bytes in binary units, ratios as percentages.
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return '—'
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = Math.abs(bytes)
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  // A fraction of a byte (bytes per pixel, averages) with three significant digits, not a raw float.
  const text = u === 0 ? (Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(3)))) : v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
  return `${bytes < 0 ? '-' : ''}${text} ${units[u]}`
}

export function formatRatio(r: number): string {
  return Number.isFinite(r) ? `${(r * 100).toFixed(1)} %` : '—'
}

export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return '—'
  // Integers, as toLocaleString('en-US') writes them, without Intl's cost (playback asks every frame).
  if (!Number.isSafeInteger(n)) return n.toLocaleString('en-US')
  const digits = String(Math.abs(n))
  let out = digits.slice(0, ((digits.length - 1) % 3) + 1)
  for (let i = out.length; i < digits.length; i += 3) out += ',' + digits.slice(i, i + 3)
  return n < 0 ? '-' + out : out
}

export function formatAddress(a: number): string {
  return `0x${a.toString(16)}`
}

export function formatTime(ns: number): string {
  if (!Number.isFinite(ns)) return '—'
  if (ns < 1e3) return `${ns.toFixed(0)} ns`
  if (ns < 1e6) return `${(ns / 1e3).toFixed(1)} µs`
  if (ns < 1e9) return `${(ns / 1e6).toFixed(1)} ms`
  return `${(ns / 1e9).toFixed(2)} s`
}

/**
 * A time to the microsecond, for telling events apart: "6.470123 s", "12.345 ms", "250 µs"
 * (formatTime's "6.47 s" says the same for two events 179 apart).
 */
export function formatTimePrecise(ns: number): string {
  if (!Number.isFinite(ns)) return '—'
  const a = Math.abs(ns)
  if (a < 1e3) return `${ns.toFixed(0)} ns`
  if (a < 1e6) return `${(ns / 1e3).toFixed(a < 1e4 ? 3 : 0)} µs`
  if (a < 1e9) return `${(ns / 1e6).toFixed(3)} ms`
  return `${(ns / 1e9).toFixed(6)} s`
}
