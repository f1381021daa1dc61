// Scales' ticks and labels for the charts: bytes at binary-round values (256 MiB, 512 MiB, 1 GiB),
// never decimal steps in binary units (954 MiB); rates (bytes per pixel) with a few significant
// digits; and failure marks binned to pixels, one lane per strategy.

/** Ticks from 0 at a power-of-two step, about `count` of them above 0, and the top of the scale (the last tick, at or above max). */
export function binaryTicks(max: number, count = 4): { ticks: number[]; top: number } {
  if (!(max > 0) || !Number.isFinite(max)) return { ticks: [0, 1], top: 1 }
  let step = 1
  while (step * count < max) step *= 2
  // Halve while that still gives no more than count + 1 ticks above 0.
  while (step >= 2 && Math.ceil(max / (step / 2)) <= count) step /= 2
  const top = Math.ceil(max / step) * step
  const ticks: number[] = []
  for (let v = 0; v <= top; v += step) ticks.push(v)
  return { ticks, top }
}

/** A byte count at a tick: the fewest digits that say it exactly ("512 MiB", "1.5 GiB", "3 GiB"). */
export function formatTickBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = bytes
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return `${Number(v.toFixed(2))} ${units[u]}`
}

/** A positive figure with three significant digits and no exponent's float noise: 322 for 322.4426369087142, 0.0000104 for 0.0000104329681794447053. */
export function formatSignificant(v: number, digits = 3): string {
  if (!Number.isFinite(v)) return '—'
  if (v === 0) return '0'
  const a = Math.abs(v)
  if (a >= 10 ** digits) return Math.round(v).toLocaleString('en-US')
  const decimals = Math.max(0, digits - 1 - Math.floor(Math.log10(a)))
  return String(Number(v.toFixed(Math.min(decimals, 20))))
}

/** Bytes per pixel of a map's scale, as a person reads it: "322 B/px", "1.5 MiB/px", "1 px per 96 KiB", or below a byte a pixel "0.0000104 B/px". */
export function formatBytesPerPixel(bytesPerPixel: number): string {
  if (!Number.isFinite(bytesPerPixel) || bytesPerPixel <= 0) return '—'
  if (bytesPerPixel < 1) return `${formatSignificant(bytesPerPixel)} B/px`
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let v = bytesPerPixel
  let u = 0
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024
    u++
  }
  return `${formatSignificant(v)} ${units[u]}/px`
}

/** Pixel columns [from, to) where marks fall, merged where they touch: thousands of failures become a few spans. */
export function pixelSpans(events: ArrayLike<number>, toPixel: (event: number) => number): [number, number][] {
  const columns = new Set<number>()
  for (let k = 0; k < events.length; k++) columns.add(Math.round(toPixel(events[k]!)))
  const sorted = [...columns].sort((a, b) => a - b)
  const spans: [number, number][] = []
  for (const c of sorted) {
    const last = spans.at(-1)
    if (last && c <= last[1]) last[1] = c + 1
    else spans.push([c, c + 1])
  }
  return spans
}
