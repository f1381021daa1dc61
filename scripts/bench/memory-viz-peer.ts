// The renderer benchmark's peer for PyTorch snapshots: PyTorch's memory_viz page
// (torch/utils/viz/MemoryViz.js), run from a directory outside the repository. MemoryViz.js is
// PyTorch's code, so it is never copied into this repository: put the public file at
// DIR/MemoryViz.js (it is at https://github.com/pytorch/pytorch/blob/main/torch/utils/viz/MemoryViz.js).
// It imports d3 from a CDN that a benchmark machine cannot reach; this writes a page that loads
// node_modules/d3's build locally and rewrites those imports to a shim over it, then opens the
// snapshot the way its drag-and-drop does (add_remote_files: fetch, unpickle, draw).
import { existsSync } from 'node:fs'
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'

import { ROOT } from '../../test/e2e/helpers.ts'

export const MEMORY_VIZ_PEER_PAGE = 'index.html'

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>memory_viz (peer)</title>
<script src="d3.min.js"></script>
<script type="module">
import { add_remote_files } from './MemoryViz.local.js'
add_remote_files([{ name: 'snapshot.pickle', url: 'snapshot.pickle' }])
</script>
</head><body></body></html>
`

// MemoryViz.js was written against d3 v5 (it reads d3.event in its event handlers only); the
// names it imports are the same in the d3 v7 that node_modules holds.
const SHIM = `const d3 = globalThis.d3
export const { select, format, event, axisLeft, scaleLinear, zoom, zoomIdentity, brushX } = d3
`

/** Why the peer cannot run, or undefined when it can. */
export function memoryVizSkipReason(dir: string): string | undefined {
  return existsSync(join(dir, 'MemoryViz.js')) ? undefined : `no ${join(dir, 'MemoryViz.js')} (put PyTorch's public torch/utils/viz/MemoryViz.js there)`
}

/** Writes the page, the d3 shim and the import-rewritten MemoryViz into `dir`. */
export async function writeMemoryVizPeer(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true })
  const original = await readFile(join(dir, 'MemoryViz.js'), 'utf8')
  const local = original.replace(/^import\s+(.+?)\s+from\s+["']https:\/\/cdn\.[^"']+["'];?$/gm, "import $1 from './d3-shim.js';")
  if (local.includes('https://cdn.')) throw new Error('MemoryViz.js: an import from a CDN was left that the shim does not replace')
  await writeFile(join(dir, 'MemoryViz.local.js'), local)
  await writeFile(join(dir, 'd3-shim.js'), SHIM)
  await writeFile(join(dir, MEMORY_VIZ_PEER_PAGE), PAGE)
  await copyFile(join(ROOT, 'node_modules', 'd3', 'dist', 'd3.min.js'), join(dir, 'd3.min.js'))
}
