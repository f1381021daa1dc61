// `vramscope ranks RESULTS... [--json]`: a job's report merged from its ranks' separate
// `whatif FILE --json` outputs, one a rank (a cluster runs one rank's what-if a task): each output
// read, checked and turned into the rank's result (services/whatif/job.ts), the job report of them
// all printed as `whatif R0 R1 ...` prints it (../job-report.ts).
import { readdir, stat } from 'node:fs/promises'
import { basename, dirname, extname, join, resolve } from 'node:path'

import { InputError } from '../../services/input-error.ts'
import { jobReport } from '../../services/whatif/job.ts'
import { readRankResults } from '../../services/whatif/rank-results.ts'
import { jobJson, jobText } from '../job-report.ts'
import { printJson, type CommonOptions, type Io } from '../shared.ts'

// What a folder of results may hold beside them: the stats and lists record --pytorch writes.
const NOT_RESULTS = /(\.stats\.json|^job\.json|\.figures\.json)$/

function natural(a: string, b: string): number {
  return a.localeCompare(b, undefined, { numeric: true })
}

function globToRegExp(pattern: string): RegExp {
  let out = ''
  for (const c of pattern) out += c === '*' ? '[^/]*' : c === '?' ? '[^/]' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&')
  return new RegExp(`^${out}$`)
}

/**
 * The result files the arguments name, in order: a file as it is; a folder's .json files (not the
 * stats or job.json beside snapshots), natural order; a pattern with * or ? that names no file,
 * the files of its folder it matches. Each argument must give at least one, and no file twice.
 */
export async function expandResults(args: readonly string[]): Promise<string[]> {
  const out: string[] = []
  for (const arg of args) {
    const s = await stat(arg).catch(() => undefined)
    if (s?.isDirectory()) {
      const files = (await readdir(arg)).filter((f) => extname(f).toLowerCase() === '.json' && !NOT_RESULTS.test(f)).sort(natural)
      if (files.length === 0) throw new InputError(arg, '', 'holds no .json file (the output of `vramscope whatif FILE --json`, one a rank)')
      out.push(...files.map((f) => join(arg, f)))
    } else if (s) out.push(arg)
    else if (/[*?]/.test(basename(arg)) && !/[*?]/.test(dirname(arg))) {
      const re = globToRegExp(basename(arg))
      const matched = (await readdir(dirname(arg)).catch(() => [] as string[])).filter((f) => re.test(f)).sort(natural)
      if (matched.length === 0) throw new InputError(arg, '', 'matches no file')
      out.push(...matched.map((f) => join(dirname(arg), f)))
    } else throw new InputError(arg, '', 'no such file or folder')
  }
  const seen = new Set<string>()
  for (const f of out) {
    const key = resolve(f)
    if (seen.has(key)) throw new InputError(f, '', 'is given twice')
    seen.add(key)
  }
  return out
}

export async function ranksCommand(io: Io, args: string[], options: CommonOptions): Promise<void> {
  const { results, search } = await readRankResults(await expandResults(args))
  const report = jobReport(results)
  if (options.json) return printJson(io, jobJson(report))
  io.stdout.write(jobText(report, { search }))
}
