// What each benchmark script hands to `npm run bench` (scripts/bench/all.ts): its figures, each with
// the peer measured in the same run, written as JSON to the file named by `--json FILE`. The
// scripts go on printing their own tables; this is the machine-readable copy the one table is
// built from.
import { writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'

export interface Peer {
  name: string
  value: number
}

export interface Figure {
  /** The row group in the one table: "pair latency", "replay", "trace load", "import", "renderer". */
  area: string
  /** What was measured, in words a reader of the table understands without the script. */
  what: string
  value: number
  unit: string
  /** Peers measured in the same run, on the same input. */
  peers: Peer[]
  /** How "better" reads for this unit: lower (times) or higher (rates). */
  better: 'lower' | 'higher'
  /** The target as the issue words it, and whether this run met it (undefined: no target). */
  target?: string
  met?: boolean
  note?: string
}

export interface FigureFile {
  script: string
  date: string
  node: string
  cpu: string
  cores: number
  loadAverage: [number, number]
  figures: Figure[]
}

/** `--json FILE` from argv, or undefined. */
export function jsonOutputPath(argv = process.argv): string | undefined {
  const i = argv.indexOf('--json')
  if (i < 0) return undefined
  const path = argv[i + 1]
  if (path === undefined || path.startsWith('--')) throw new Error('--json needs a file name')
  return path
}

export class FigureLog {
  readonly figures: Figure[] = []
  private readonly start = loadavg()[0]!

  constructor(private readonly script: string) {}

  add(figure: Figure): void {
    this.figures.push(figure)
  }

  /** Writes the figures where --json says; a script without --json writes nothing. */
  writeIfAsked(argv = process.argv): void {
    const path = jsonOutputPath(argv)
    if (path === undefined) return
    const file: FigureFile = {
      script: this.script,
      date: new Date().toISOString(),
      node: process.version,
      cpu: cpus()[0]?.model.trim() ?? 'unknown',
      cores: cpus().length,
      loadAverage: [this.start, loadavg()[0]!],
      figures: this.figures,
    }
    writeFileSync(path, JSON.stringify(file, null, 1) + '\n')
  }
}
