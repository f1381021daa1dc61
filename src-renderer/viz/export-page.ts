// Exports the view on screen: takes the map canvases from the page, lays them out with their
// titles and the metrics at the playhead (export.ts), and downloads a PNG or an SVG through a
// blob link. Nothing leaves the machine: the file is made in the page.
import type { StrategyView } from './data.ts'
import { composeScene, metricsAt, sceneToSvg, type ExportColors, type ExportPanel, type LegendEntry, type Scene } from './export.ts'
import { formatBytes, formatCount } from './format.ts'
import { figuresAt } from './model.ts'

export interface ExportSource {
  heading: string
  fileStem: string
  strategies: StrategyView[]
  event: number
  /** What the map colours mean, where the view says (colour by frame). */
  legend?: LegendEntry[]
}

/** The map canvases on screen in strategy order, and how many columns they stand in. */
function mapCanvases(): { canvases: HTMLCanvasElement[]; columns: number } {
  const canvases = [...document.querySelectorAll<HTMLCanvasElement>('section.map canvas')]
  const lefts = new Set(canvases.map((c) => Math.round(c.getBoundingClientRect().left)))
  return { canvases, columns: Math.max(1, lefts.size) }
}

function themeColors(): ExportColors {
  const style = getComputedStyle(document.documentElement)
  const v = (name: string, fallback: string) => style.getPropertyValue(name).trim() || fallback
  return { background: v('--bg', '#ffffff'), text: v('--text', '#1d2330'), muted: v('--muted', '#5d6678'), border: v('--border', '#d8dde6') }
}

function sceneOf(source: ExportSource): { scene: Scene; canvases: HTMLCanvasElement[] } {
  const { canvases, columns } = mapCanvases()
  const table = metricsAt(source.strategies, source.event)
  const panels: ExportPanel[] = canvases.map((c, i) => {
    const s = source.strategies[i]
    const f = s ? figuresAt(s.model, source.event) : null
    return {
      title: s?.name ?? `map ${i + 1}`,
      subtitle: f
        ? `reserved ${formatBytes(f.reserved)} · in use ${formatBytes(f.rounded)} · waste ${formatBytes(f.rounded - f.requested)} · ${formatCount(f.liveBlocks)} blocks`
        : '',
      width: c.width,
      height: c.height,
    }
  })
  return { scene: composeScene(source.heading, panels, table, themeColors(), columns, source.legend), canvases }
}

function download(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob)
  const a = document.createElement('a')
  a.href = url
  a.download = name
  document.body.append(a)
  a.click()
  a.remove()
  // The download has its own reference by now; the URL only has to live until the click is handled.
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

/** Draws the scene with the maps as they are on screen and downloads it as a PNG. */
export async function exportPng(source: ExportSource): Promise<void> {
  const { scene, canvases } = sceneOf(source)
  const canvas = document.createElement('canvas')
  canvas.width = scene.width
  canvas.height = scene.height
  const ctx = canvas.getContext('2d')!
  ctx.fillStyle = scene.background
  ctx.fillRect(0, 0, scene.width, scene.height)
  ctx.textBaseline = 'alphabetic'
  for (const item of scene.items) {
    if (item.kind === 'text') {
      ctx.font = `${item.bold ? 'bold ' : ''}${item.size}px system-ui, sans-serif`
      ctx.fillStyle = item.color
      ctx.textAlign = item.anchor === 'end' ? 'right' : 'left'
      ctx.fillText(item.text, item.x, item.y)
    } else if (item.kind === 'swatch') {
      ctx.fillStyle = item.color
      ctx.fillRect(item.x, item.y, item.size, item.size)
    } else if (item.kind === 'line') {
      ctx.strokeStyle = item.color
      ctx.beginPath()
      ctx.moveTo(item.x1, item.y1 + 0.5)
      ctx.lineTo(item.x2, item.y2 + 0.5)
      ctx.stroke()
    } else {
      const source = canvases[item.panel]
      if (source) ctx.drawImage(source, item.x, item.y)
      ctx.strokeStyle = item.border
      ctx.strokeRect(item.x - 0.5, item.y - 0.5, item.width + 1, item.height + 1)
    }
  }
  const blob = await new Promise<Blob>((resolve, reject) =>
    canvas.toBlob((b) => (b ? resolve(b) : reject(new Error('the browser could not encode the PNG'))), 'image/png'),
  )
  download(blob, `${source.fileStem}.png`)
}

/** The same scene as SVG, the maps as rects read back from their canvases. */
export function exportSvg(source: ExportSource): void {
  const { scene, canvases } = sceneOf(source)
  const maps = canvases.map((c) => {
    const data = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data
    return new Uint32Array(data.buffer, data.byteOffset, data.byteLength / 4)
  })
  download(new Blob([sceneToSvg(scene, maps)], { type: 'image/svg+xml' }), `${source.fileStem}.svg`)
}
