// Exports the current view as one image: every strategy's map as drawn, with its title and
// figures, and the metrics at the playhead beneath. One scene (positions of text and maps) is
// laid out once and written either onto a canvas (PNG) or as SVG, where each map becomes rects:
// runs of equal colour along a pixel row, stacked into taller rects where rows repeat, over one
// background rect of the map's commonest colour, so a map is kilobytes, not a rect per pixel.
// Pure (tested in Node); export-page.ts takes the canvases from the page and downloads the files.
import type { StrategyView } from './data.ts'
import { formatBytes, formatCount, formatRatio } from './format.ts'
import { figuresAt, fragmentationAt } from './model.ts'

export interface ExportColors {
  background: string
  text: string
  muted: string
  border: string
}

export interface ExportPanel {
  title: string
  subtitle: string
  width: number
  height: number
}

export interface MetricsTable {
  columns: string[]
  rows: { label: string; values: string[] }[]
}

export type SceneItem =
  | { kind: 'text'; x: number; y: number; text: string; size: number; bold: boolean; color: string; anchor: 'start' | 'end' }
  /** A map's pixels, outlined in `border` as on screen (an unreserved map is near the page's colour). */
  | { kind: 'map'; x: number; y: number; width: number; height: number; panel: number; border: string }
  | { kind: 'line'; x1: number; y1: number; x2: number; y2: number; color: string }
  /** A legend's colour square. */
  | { kind: 'swatch'; x: number; y: number; size: number; color: string }

/** What a colour of the maps means (colour by frame: the frames of the user's code). */
export interface LegendEntry {
  color: string
  label: string
}

export interface Scene {
  width: number
  height: number
  background: string
  items: SceneItem[]
}

const PAD = 16
const GAP = 16
const TITLE = 13
const SMALL = 11
const ROW = 18
/** A conservative average glyph width, as a fraction of the font size (no text measuring in SVG). */
const GLYPH = 0.6

function textWidth(text: string, size: number): number {
  return Math.ceil(text.length * size * GLYPH)
}

/** The text cut short with an ellipsis where it would overrun `width` (a neighbouring map's title). */
function fitText(text: string, width: number, size: number): string {
  const fits = Math.floor(width / (size * GLYPH))
  return text.length <= fits ? text : `${text.slice(0, Math.max(0, fits - 1))}…`
}

/** The figures of each strategy after `event`, as the metrics table shows them. */
export function metricsAt(strategies: StrategyView[], event: number): MetricsTable {
  const figures = strategies.map((s) => figuresAt(s.model, event))
  const row = (label: string, value: (i: number) => string) => ({ label, values: strategies.map((_, i) => value(i)) })
  return {
    columns: strategies.map((s) => s.name),
    rows: [
      row('reserved', (i) => formatBytes(figures[i]!.reserved)),
      row('in use (rounded)', (i) => formatBytes(figures[i]!.rounded)),
      row('requested', (i) => formatBytes(figures[i]!.requested)),
      row('waste (rounded − requested)', (i) => formatBytes(figures[i]!.rounded - figures[i]!.requested)),
      row('pending frees', (i) => formatBytes(figures[i]!.pendingBytes)),
      row('live blocks', (i) => formatCount(figures[i]!.liveBlocks)),
      row('fragmentation', (i) => formatRatio(fragmentationAt(strategies[i]!.model, event).fragmentation)),
      row('peak reserved (whole trace)', (i) => formatBytes(strategies[i]!.summary['peakReserved'] ?? Number.NaN)),
    ],
  }
}

/**
 * Positions of everything: a heading, the colour legend when there is one (wrapped to the maps'
 * width), the maps in `columns` columns (as they stand on screen), each under its title and
 * figures, then the metrics table.
 */
export function composeScene(
  heading: string,
  panels: ExportPanel[],
  metrics: MetricsTable,
  colors: ExportColors,
  columns: number,
  legend: readonly LegendEntry[] = [],
): Scene {
  const items: SceneItem[] = []
  const text = (x: number, y: number, t: string, size: number, bold = false, color = colors.text, anchor: 'start' | 'end' = 'start') =>
    items.push({ kind: 'text', x, y, text: t, size, bold, color, anchor })
  text(PAD, PAD + TITLE, heading, TITLE, true)
  let y = PAD + TITLE + GAP
  const cols = Math.max(1, Math.min(columns, panels.length))
  const cellWidth = Math.max(0, ...panels.map((p) => p.width))
  let maxX = PAD + textWidth(heading, TITLE)
  if (legend.length > 0) {
    const right = PAD + Math.max(600, cols * cellWidth + (cols - 1) * GAP)
    let x = PAD
    for (const e of legend) {
      const w = SMALL + 4 + textWidth(e.label, SMALL)
      if (x > PAD && x + w > right) {
        x = PAD
        y += ROW
      }
      items.push({ kind: 'swatch', x, y: y + 1, size: SMALL, color: e.color })
      text(x + SMALL + 4, y + SMALL, e.label, SMALL)
      x += w + GAP
      maxX = Math.max(maxX, x - GAP)
    }
    y += ROW + GAP / 2
  }
  for (let start = 0; start < panels.length; start += cols) {
    const row = panels.slice(start, start + cols)
    const rowHeight = Math.max(...row.map((p) => p.height))
    row.forEach((p, j) => {
      const x = PAD + j * (cellWidth + GAP)
      text(x, y + TITLE, p.title, TITLE, true)
      text(x, y + TITLE + 4 + SMALL, fitText(p.subtitle, cellWidth, SMALL), SMALL, false, colors.muted)
      items.push({ kind: 'map', x, y: y + TITLE + SMALL + 10, width: p.width, height: p.height, panel: start + j, border: colors.border })
      maxX = Math.max(maxX, x + p.width)
    })
    y += TITLE + SMALL + 10 + rowHeight + GAP
  }
  // The metrics table: labels, then one right-aligned column per strategy.
  const labelWidth = Math.max(...metrics.rows.map((r) => textWidth(r.label, SMALL))) + GAP
  // Column names are bold, wider than the estimate for regular text.
  const columnWidths = metrics.columns.map((c, i) => Math.max(textWidth(c, SMALL * 1.15), ...metrics.rows.map((r) => textWidth(r.values[i]!, SMALL))) + GAP)
  text(PAD, y + SMALL, 'at the playhead', SMALL, true, colors.muted)
  let x = PAD + labelWidth
  metrics.columns.forEach((c, i) => {
    x += columnWidths[i]!
    text(x, y + SMALL, c, SMALL, true, colors.text, 'end')
  })
  const tableRight = x
  // Under the column names, clear of their descenders.
  items.push({ kind: 'line', x1: PAD, y1: y + SMALL + 4, x2: tableRight, y2: y + SMALL + 4, color: colors.border })
  y += ROW + 2
  for (const r of metrics.rows) {
    text(PAD, y + SMALL, r.label, SMALL, false, colors.muted)
    let cx = PAD + labelWidth
    r.values.forEach((v, i) => {
      cx += columnWidths[i]!
      text(cx, y + SMALL, v, SMALL, false, colors.text, 'end')
    })
    y += ROW
  }
  maxX = Math.max(maxX, tableRight)
  return { width: Math.ceil(maxX + PAD), height: Math.ceil(y + PAD), background: colors.background, items }
}

/** A rect of one colour in a map's pixel grid. */
export interface PixelRect {
  x: number
  y: number
  width: number
  height: number
  color: number
}

/** The colour most pixels have: drawn once as the map's background. */
export function commonestColor(pixels: Uint32Array): number {
  const counts = new Map<number, number>()
  let best = pixels[0] ?? 0
  let bestCount = 0
  for (let i = 0; i < pixels.length;) {
    const c = pixels[i]!
    let j = i + 1
    while (j < pixels.length && pixels[j] === c) j++
    const n = (counts.get(c) ?? 0) + (j - i)
    counts.set(c, n)
    if (n > bestCount) {
      bestCount = n
      best = c
    }
    i = j
  }
  return best
}

/**
 * The pixels as rects over a `background`: each row's runs of equal colour, and a run that repeats
 * exactly in the next row grows down instead of starting a new rect (a block spanning whole rows
 * of the wrapped map is one rect).
 */
export function pixelRects(pixels: Uint32Array, width: number, height: number, background: number): PixelRect[] {
  const rects: PixelRect[] = []
  let open = new Map<string, number>()
  for (let y = 0; y < height; y++) {
    const next = new Map<string, number>()
    const row = y * width
    for (let x = 0; x < width;) {
      const c = pixels[row + x]!
      let end = x + 1
      while (end < width && pixels[row + end] === c) end++
      if (c !== background) {
        const key = `${x},${end},${c}`
        const above = open.get(key)
        if (above !== undefined) {
          rects[above]!.height++
          next.set(key, above)
        } else {
          next.set(key, rects.length)
          rects.push({ x, y, width: end - x, height: 1, color: c })
        }
      }
      x = end
    }
    open = next
  }
  return rects
}

/** #rrggbb of a 0xAABBGGRR pixel word. */
export function cssColor(pixel: number): string {
  const r = pixel & 0xff
  const g = (pixel >>> 8) & 0xff
  const b = (pixel >>> 16) & 0xff
  return `#${((r << 16) | (g << 8) | b).toString(16).padStart(6, '0')}`
}

function escapeXml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c]!)
}

/** The scene as an SVG document; `maps[i]` holds panel i's pixels (width × height of its item). */
export function sceneToSvg(scene: Scene, maps: Uint32Array[]): string {
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${scene.width}" height="${scene.height}" viewBox="0 0 ${scene.width} ${scene.height}" font-family="system-ui, sans-serif">`,
    `<rect width="${scene.width}" height="${scene.height}" fill="${scene.background}"/>`,
  ]
  for (const item of scene.items) {
    if (item.kind === 'text') {
      out.push(
        `<text x="${item.x}" y="${item.y}" font-size="${item.size}"${item.bold ? ' font-weight="bold"' : ''}${item.anchor === 'end' ? ' text-anchor="end"' : ''} fill="${item.color}">${escapeXml(item.text)}</text>`,
      )
    } else if (item.kind === 'line') {
      out.push(`<line x1="${item.x1}" y1="${item.y1}" x2="${item.x2}" y2="${item.y2}" stroke="${item.color}"/>`)
    } else if (item.kind === 'swatch') {
      out.push(`<rect x="${item.x}" y="${item.y}" width="${item.size}" height="${item.size}" fill="${item.color}"/>`)
    } else {
      const pixels = maps[item.panel]
      if (!pixels) continue
      const background = commonestColor(pixels)
      out.push(`<g transform="translate(${item.x},${item.y})" shape-rendering="crispEdges">`)
      out.push(`<rect width="${item.width}" height="${item.height}" fill="${cssColor(background)}"/>`)
      const byColor = new Map<number, string[]>()
      for (const r of pixelRects(pixels, item.width, item.height, background)) {
        let list = byColor.get(r.color)
        if (!list) byColor.set(r.color, (list = []))
        list.push(`<rect x="${r.x}" y="${r.y}" width="${r.width}" height="${r.height}"/>`)
      }
      for (const [color, rects] of byColor) out.push(`<g fill="${cssColor(color)}">${rects.join('')}</g>`)
      out.push(`<rect x="-0.5" y="-0.5" width="${item.width + 1}" height="${item.height + 1}" fill="none" stroke="${item.border}"/>`)
      out.push('</g>')
    }
  }
  out.push('</svg>')
  return out.join('\n')
}

/** A file name for the view: the trace's name and the event shown. */
export function exportFileStem(traceName: string, event: number): string {
  const stem = traceName.replace(/\.[^.]*$/, '').replace(/[^\w.-]+/g, '_') || 'trace'
  return `vramscope-${stem}-event${event}`
}
