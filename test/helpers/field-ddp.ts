// The two ranks of the real torchrun job in test/fixtures/pytorch/field-gpu.tar.gz (recorded on an
// H200 by record --pytorch: rank r trained on a batch of 4 (r + 1)), extracted into a temporary
// folder that the calling test file removes when it ends: each rank's snapshot, the stats beside
// it, and torch.cuda.memory_stats()' peak reserved of its run.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after } from 'node:test'

import { fixture } from './cli.ts'

export interface DdpRanks {
  /** The temporary folder (the ranks are under field/); anything else the test makes may go here too. */
  dir: string
  /** Rank r's file: its snapshot (`pickle`) or the stats beside it (`stats.json`). */
  src: (rank: number, ext: 'pickle' | 'stats.json') => string
  /** Rank r's recorded peak reserved (memory_stats' reserved_bytes.all.peak). */
  peak: (rank: number) => number
}

export function ddpRanks(prefix: string): DdpRanks {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  const names = [0, 1].flatMap((r) => [`field/ddp_rank${r}__default.pickle`, `field/ddp_rank${r}__default.stats.json`])
  execFileSync('tar', ['xzf', fixture('pytorch/field-gpu.tar.gz'), '-C', dir, ...names])
  after(() => rmSync(dir, { recursive: true, force: true }))
  const src = (rank: number, ext: 'pickle' | 'stats.json') => join(dir, 'field', `ddp_rank${rank}__default.${ext}`)
  const peak = (rank: number) =>
    (JSON.parse(readFileSync(src(rank, 'stats.json'), 'utf8')) as { memory_stats: Record<string, number> }).memory_stats['reserved_bytes.all.peak']!
  return { dir, src, peak }
}
