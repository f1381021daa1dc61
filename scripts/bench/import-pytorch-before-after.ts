// Benchmark: this checkout's PyTorch snapshot import against another checkout's (a worktree of an
// earlier commit), in one process, the two taking turns, on files as the app and the CLI import
// them (importPytorchSnapshot from a path: read whole and the fast lane below 256 MiB, the general
// lane streamed in bounded memory above). A before/after check for a change to the importer; the
// output gives both sides' medians of wall and process CPU time (the CPU figure is the steadier on
// a machine shared with other work).
//   npx tsx scripts/bench/import-pytorch-before-after.ts --before ../checkout-of-base --file F.pickle [--file G.pickle]... [--rounds R]
// Each round imports the file once with each side, the side going first alternating; the first
// round warms both up and is left out of the medians.
import { existsSync } from 'node:fs'
import { loadavg } from 'node:os'
import { basename, join, resolve } from 'node:path'

function options(name: string): string[] {
  const values: string[] = []
  process.argv.forEach((a, i) => {
    if (a === `--${name}` && process.argv[i + 1] !== undefined) values.push(process.argv[i + 1]!)
  })
  return values
}

type Import = (path: string) => Promise<unknown>

/** The importPytorchSnapshot of a checkout: the entry of src-main/services/import/pytorch/, or the single file it replaced. */
async function importerOf(checkout: string): Promise<Import> {
  const entry = ['src-main/services/import/pytorch/index.ts', 'src-main/services/import/pytorch.ts'].map((p) => join(checkout, p)).find((p) => existsSync(p))
  if (entry === undefined) throw new Error(`${checkout} has no PyTorch importer (src-main/services/import/pytorch/index.ts or pytorch.ts)`)
  return ((await import(entry)) as { importPytorchSnapshot: Import }).importPytorchSnapshot
}

const before = options('before')[0]
const files = options('file')
const rounds = Number(options('rounds')[0] ?? 5)
if (before === undefined || files.length === 0) {
  console.error('usage: npx tsx scripts/bench/import-pytorch-before-after.ts --before CHECKOUT --file F.pickle [--rounds R]')
  process.exit(2)
}
const sides: [string, Import][] = [
  ['before', await importerOf(resolve(before))],
  ['after', await importerOf(join(import.meta.dirname, '..', '..'))],
]

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!
console.log(`import-pytorch-before-after: ${rounds} rounds, before = ${resolve(before)}, load average ${loadavg()[0]!.toFixed(2)}, node ${process.version}`)
for (const file of files) {
  const wall: Record<string, number[]> = { before: [], after: [] }
  const cpu: Record<string, number[]> = { before: [], after: [] }
  for (let r = 0; r < rounds; r++) {
    for (const [name, run] of r % 2 === 0 ? sides : [...sides].reverse()) {
      const c = process.cpuUsage()
      const t = performance.now()
      await run(file)
      const elapsed = performance.now() - t
      const used = process.cpuUsage(c)
      if (r === 0) continue
      wall[name]!.push(elapsed)
      cpu[name]!.push((used.user + used.system) / 1000)
    }
  }
  console.log(`\n${basename(file)}, medians of ${rounds - 1} imports each (load average now ${loadavg()[0]!.toFixed(2)}):`)
  for (const [name] of sides)
    console.log(
      `  ${name.padEnd(6)} wall ${median(wall[name]!).toFixed(0).padStart(7)} ms  cpu ${median(cpu[name]!).toFixed(0).padStart(7)} ms   (wall: ${wall[name]!.map((t) => t.toFixed(0)).join(' ')})`,
    )
  console.log(
    `  after / before: wall ${(median(wall['after']!) / median(wall['before']!)).toFixed(3)}, cpu ${(median(cpu['after']!) / median(cpu['before']!)).toFixed(3)}`,
  )
}
