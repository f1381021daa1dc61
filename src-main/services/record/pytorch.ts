// `vramscope record --pytorch -- python train.py ...`: records a PyTorch program at tensor level
// without editing it. resources/pytorch/sitecustomize.py, put first on the program's PYTHONPATH,
// starts torch.cuda.memory._record_memory_history() in each process once it initialises CUDA and
// writes that process's snapshot (NAME.pickle, NAME.oom.pickle at its first out-of-memory) with
// torch.cuda.memory_stats() beside it (NAME.stats.json) into one folder; NAME is rank<RANK> under
// torchrun. Where the interposer is built it is preloaded too, each process logging the driver's
// calls to NAME.calls.log, which this recorder follows into NAME.driver.vramscope as the program
// runs. At the end the folder gets job.json, the list of what each process left
// (docs/architecture.md#recording-a-pytorch-program).
import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { basename, delimiter, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

import { InputError } from '../input-error.ts'
import { InterceptLogFollower, runRecorded, type ProgramExit, type RecordedStdio } from './program.ts'

/** The folder holding sitecustomize.py: $VRAMSCOPE_PYTORCH_HOOK, else resources/pytorch of this checkout (the desktop app passes its own). */
export function pytorchHookDir(): string {
  const fromEnv = process.env['VRAMSCOPE_PYTORCH_HOOK']
  if (fromEnv) return resolve(fromEnv)
  const packaged = (process as { resourcesPath?: string }).resourcesPath
  const candidates = [...(packaged ? [join(packaged, 'pytorch')] : []), fileURLToPath(new URL('../../../resources/pytorch', import.meta.url))]
  const found = candidates.find((dir) => existsSync(join(dir, 'sitecustomize.py')))
  if (!found) throw new InputError('sitecustomize.py', '', `vramscope's PyTorch hook is missing (looked in ${candidates.join(', ')})`)
  return found
}

export interface PytorchRecordOptions {
  command: readonly string[]
  /** The folder the recording goes into; made if missing, refused if it holds an earlier recording. */
  outDir: string
  /** The interposer to preload beside the hook (none: snapshots only, with a warning). */
  library?: string
  /** max_entries for _record_memory_history (none: PyTorch's default, every event). */
  maxEntries?: number
  /** Seconds between snapshots while the program runs (0: only at an out-of-memory, SIGTERM and exit). */
  everySeconds?: number
  /** Native frames the interposer captures per call (0-32). */
  stackDepth?: number
  stdio?: RecordedStdio
  pollMs?: number
  /** The program's working directory. */
  cwd?: string
  /** The folder holding sitecustomize.py (default pytorchHookDir()). */
  hookDir?: string
  /** The program's stdout and stderr into OUT_DIR/output.log rather than `stdio` (the app). */
  outputToFile?: boolean
  /** Aborting ends the program with SIGTERM, which the hook answers with a last snapshot. */
  signal?: AbortSignal
  onProgress?: (progress: { processes: number; driverEvents: number }) => void
}

/** What one process of the program left in the folder (paths relative to it). */
export interface RecordedProcess {
  name: string
  rank: number | null
  pid: number | null
  /** The last snapshot and why it was written (exit, oom, periodic, signal N), if any. */
  snapshot: string | null
  stats: string | null
  reason: string | null
  /** The snapshot written at the process's first out-of-memory. */
  oomSnapshot: string | null
  outOfMemory: boolean
  /** The driver's calls, where the interposer ran, and how many events they hold (null: not counted). */
  driver: string | null
  driverEvents: number | null
  conf: string | null
  device: string | null
  peakReservedBytes: number | null
}

export interface PytorchRecording {
  outDir: string
  command: string[]
  exit: ProgramExit
  processes: RecordedProcess[]
  warnings: string[]
  job: string
}

export const JOB_FILE = 'job.json'
/** The program's output, where the recorder was asked to keep it (the app: no terminal). */
export const OUTPUT_LOG = 'output.log'

/** What a recording of `command` is called: its script's name (train for python train.py), else the program's. */
export function programStem(command: readonly string[]): string {
  const script = command.find((arg, i) => i > 0 && /\.py$/.test(arg)) ?? command[0] ?? 'program'
  return (
    basename(script)
      .replace(/\.py$/, '')
      .replace(/[^A-Za-z0-9_.-]+/g, '_') || 'program'
  )
}

/** A recording folder's name: PREFIX-<script>-<time>. */
export function recordingFolderName(prefix: string, command: readonly string[], now = new Date()): string {
  return `${prefix}-${programStem(command)}-${now.toISOString().replace(/[:.]/g, '-')}`
}

/** The CLI's default folder: vramscope-<script>-<time> in the working directory. */
export function defaultPytorchOutDir(command: readonly string[], now = new Date()): string {
  return resolve(recordingFolderName('vramscope', command, now))
}

async function refuseEarlierRecording(outDir: string): Promise<void> {
  let entries: string[]
  try {
    entries = await readdir(outDir)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return
    if ((e as NodeJS.ErrnoException).code === 'ENOTDIR') throw new InputError(outDir, '', 'is a file; --pytorch records into a folder')
    throw e
  }
  const earlier = entries.filter((f) => f === JOB_FILE || /\.(pickle|stats\.json|calls\.log|driver\.vramscope)$/.test(f))
  if (earlier.length > 0)
    throw new InputError(
      outDir,
      '',
      `holds an earlier recording (${earlier.slice(0, 3).join(', ')}${earlier.length > 3 ? ', ...' : ''}); give another folder with -o`,
    )
}

const LOG_SUFFIX = '.calls.log'
const DRIVER_SUFFIX = '.driver.vramscope'

export async function recordPytorch(options: PytorchRecordOptions): Promise<PytorchRecording> {
  const outDir = resolve(options.outDir)
  await refuseEarlierRecording(outDir)
  const hook = options.hookDir ?? pytorchHookDir()
  await mkdir(outDir, { recursive: true })
  const warnings: string[] = []
  const followers = new Map<string, InterceptLogFollower>()
  const command = options.command.join(' ')

  // Each process names its own log (NAME.calls.log) once it starts; follow every one that appears.
  const tick = async () => {
    if (options.library) {
      for (const file of await readdir(outDir).catch(() => [] as string[])) {
        if (!file.endsWith(LOG_SUFFIX) || followers.has(file)) continue
        const name = file.slice(0, -LOG_SUFFIX.length)
        followers.set(file, await InterceptLogFollower.create(join(outDir, file), join(outDir, name + DRIVER_SUFFIX), { command, process: name }))
      }
      for (const follower of followers.values()) await follower.drain()
    }
    const snapshots = (await readdir(outDir).catch(() => [] as string[])).filter((f) => f.endsWith('.stats.json')).length
    options.onProgress?.({ processes: Math.max(snapshots, followers.size), driverEvents: [...followers.values()].reduce((n, f) => n + f.events, 0) })
  }

  const env: Record<string, string> = {
    PYTHONPATH: [hook, process.env['PYTHONPATH']].filter(Boolean).join(delimiter),
    VRAMSCOPE_PYTORCH_DIR: outDir,
    VRAMSCOPE_PYTORCH_PARENT_PID: String(process.pid),
    VRAMSCOPE_PYTORCH_EVERY_S: String(options.everySeconds ?? 60),
    // Python's own output unbuffered, so what the program printed before a kill is not lost.
    PYTHONUNBUFFERED: process.env['PYTHONUNBUFFERED'] ?? '1',
  }
  if (options.maxEntries !== undefined) env['VRAMSCOPE_PYTORCH_MAX_ENTRIES'] = String(options.maxEntries)
  if (options.library) {
    env['LD_PRELOAD'] = [options.library, process.env['LD_PRELOAD']].filter(Boolean).join(' ')
    env['VRAMSCOPE_INTERCEPT_STACK'] = String(options.stackDepth ?? 0)
  } else warnings.push("the interposer is not built: the driver's calls are not recorded, only PyTorch's snapshots")

  const exit = await runRecorded(
    options.command,
    env,
    {
      ...(options.stdio !== undefined && { stdio: options.stdio }),
      ...(options.pollMs !== undefined && { pollMs: options.pollMs }),
      ...(options.cwd !== undefined && { cwd: options.cwd }),
      ...(options.outputToFile && { outputFile: join(outDir, OUTPUT_LOG) }),
      ...(options.signal !== undefined && { signal: options.signal }),
    },
    tick,
  )
  await tick()
  const ended = exit.signal ?? String(exit.exitCode)
  const driverEvents = new Map<string, number>()
  for (const [file, follower] of followers) {
    const name = file.slice(0, -LOG_SUFFIX.length)
    await follower.finish(ended, exit.signal)
    driverEvents.set(name, follower.events)
    await rm(join(outDir, file), { force: true }) // its records are all in NAME.driver.vramscope now
  }

  // Each recording process's claim on its name (sitecustomize.py): done with once all have ended.
  // A file still being written when its process was killed is a temporary one, never renamed over
  // the last whole snapshot: removed, and said.
  for (const file of await readdir(outDir)) {
    if (file.endsWith('.claim')) await rm(join(outDir, file), { force: true })
    else if (/\.tmp\d+$/.test(file)) {
      await rm(join(outDir, file), { force: true })
      warnings.push(`${file.replace(/\.tmp\d+$/, '')} was being written again when its process ended; the last whole one is kept`)
    }
  }
  const processes = await listProcesses(outDir, driverEvents)
  if (processes.every((p) => p.snapshot === null))
    warnings.push(
      'no snapshot was written: the program never initialised CUDA through torch, or is not a Python program that imports torch (with this folder first on PYTHONPATH)',
    )
  for (const p of processes) if (p.snapshot === null && p.driver !== null) warnings.push(`${p.name}: the driver's calls only, no snapshot`)
  const job = join(outDir, JOB_FILE)
  await writeFile(
    job,
    `${JSON.stringify(
      {
        recorder: 'vramscope record --pytorch',
        command: [...options.command],
        exit: { code: exit.exitCode, signal: exit.signal },
        processes: processes.map((p) => ({ ...p })),
        warnings,
      },
      null,
      1,
    )}\n`,
  )
  return { outDir, command: [...options.command], exit, processes, warnings, job }
}

interface StatsFile {
  name?: string
  rank?: number | null
  pid?: number | null
  reason?: string
  conf?: string
  device_name?: string | null
  oom?: { happened?: boolean }
  memory_stats?: Record<string, number>
}

/** What each process left in `outDir`: its snapshots, their stats and its driver trace. */
export async function listProcesses(outDir: string, driverEvents = new Map<string, number>()): Promise<RecordedProcess[]> {
  const files = new Set(await readdir(outDir))
  const names = new Set<string>()
  for (const f of files) {
    const m = /^(.+?)(?:\.oom)?\.(?:pickle|stats\.json)$/.exec(f) ?? /^(.+)\.driver\.vramscope$/.exec(f)
    if (m) names.add(m[1]!)
  }
  const out: RecordedProcess[] = []
  for (const name of names) {
    const statsName = files.has(`${name}.stats.json`) ? `${name}.stats.json` : files.has(`${name}.oom.stats.json`) ? `${name}.oom.stats.json` : null
    let stats: StatsFile = {}
    if (statsName) {
      try {
        stats = JSON.parse(await readFile(join(outDir, statsName), 'utf8')) as StatsFile
      } catch {
        stats = {}
      }
    }
    const snapshot = files.has(`${name}.pickle`) ? `${name}.pickle` : files.has(`${name}.oom.pickle`) ? `${name}.oom.pickle` : null
    const driver = files.has(name + DRIVER_SUFFIX) ? name + DRIVER_SUFFIX : null
    out.push({
      name,
      rank: typeof stats.rank === 'number' ? stats.rank : /^rank(\d+)$/.test(name) ? Number(name.slice(4)) : null,
      pid: typeof stats.pid === 'number' ? stats.pid : null,
      snapshot,
      stats: statsName,
      reason: stats.reason ?? null,
      oomSnapshot: files.has(`${name}.oom.pickle`) ? `${name}.oom.pickle` : null,
      outOfMemory: stats.oom?.happened === true,
      driver,
      driverEvents: driverEvents.get(name) ?? null,
      conf: typeof stats.conf === 'string' ? stats.conf : null,
      device: stats.device_name ?? null,
      peakReservedBytes: typeof stats.memory_stats?.['reserved_bytes.all.peak'] === 'number' ? stats.memory_stats['reserved_bytes.all.peak']! : null,
    })
  }
  // Ranks in order, then the rest by name.
  return out.sort((a, b) => (a.rank ?? Infinity) - (b.rank ?? Infinity) || a.name.localeCompare(b.name))
}
