// scripts/cluster/ on a real Slurm: a one-node cluster of its own (munged, slurmctld, slurmd from
// Debian's packages, which .ci/run installs), started with a generated munge key and slurm.conf in
// a temporary folder and stopped at the end whatever happens. submit.sh submits the what-if of the
// two ranks of a real torchrun job (test/fixtures/pytorch/field-gpu.tar.gz) as a job array, one
// task a rank, and the merge after them (--dependency=afterok); the report the merge job writes
// equals what `whatif R0 R1 --json` prints on one machine. Skips, saying why, where the daemons
// are not installed or cannot run (they need root here: SlurmUser=root).
import assert from 'node:assert/strict'
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer } from 'node:net'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { after, before, describe, it } from 'node:test'

import { BIN, shown, vramscope } from '../helpers/cli.ts'
import { ddpRanks } from '../helpers/field-ddp.ts'

const SCRIPTS = fileURLToPath(new URL('../../scripts/cluster/', import.meta.url))
const CONFS = ['--conf', 'recorded', '--conf', 'expandable_segments:True']
// The daemons live in /usr/sbin, which a user's PATH may lack.
const PATH = [...(process.env['PATH'] ?? '').split(delimiter), '/usr/sbin', '/sbin'].join(delimiter)
const BINARIES = ['munged', 'slurmctld', 'slurmd', 'sbatch', 'sinfo', 'squeue', 'scancel']

function which(name: string): string | undefined {
  for (const dir of PATH.split(delimiter)) if (dir && existsSync(join(dir, name))) return join(dir, name)
  return undefined
}

interface NodeLine {
  name: string
  /** CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore as slurmd measured them. */
  shape: string[]
  memoryMiB: number
}

/** Why this machine cannot run the cluster, or false; and `slurmd -C`'s node line where it can. */
function probe(): { skip: string | false; node?: NodeLine } {
  if (process.platform !== 'linux') return { skip: 'Slurm runs on Linux only' }
  if (process.getuid?.() !== 0) return { skip: 'not root: the one-node Slurm runs as SlurmUser=root' }
  const missing = BINARIES.filter((b) => !which(b))
  if (missing.length > 0) return { skip: `${missing.join(', ')} not installed (Debian: apt-get install slurmctld slurmd slurm-client munge)` }
  let line: string
  try {
    line = execFileSync(which('slurmd')!, ['-C'], { encoding: 'utf8', timeout: 10_000 }).split('\n')[0]!
  } catch (error) {
    return { skip: `slurmd -C cannot run here: ${(error as Error).message.split('\n')[0]}` }
  }
  const fields = new Map(line.split(/\s+/).map((kv) => kv.split('=', 2) as [string, string]))
  const name = fields.get('NodeName')
  const memoryMiB = Number(fields.get('RealMemory'))
  if (!name || !fields.get('CPUs') || !(memoryMiB > 0)) return { skip: `slurmd -C printed no node line: ${line}` }
  const shape = ['CPUs', 'Boards', 'SocketsPerBoard', 'CoresPerSocket', 'ThreadsPerCore'].filter((k) => fields.has(k)).map((k) => `${k}=${fields.get(k)}`)
  return { skip: false, node: { name, shape, memoryMiB } }
}

const { skip, node } = probe()
if (skip) console.log(`# skip slurm: ${skip}`)

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// The suite runs its hooks only where the cluster can run; its test says why it skips (counted as skipped).
describe('scripts/cluster on a one-node Slurm: a job array a rank, the merge after it', () => {
  const { dir, src } = ddpRanks('vramscope-slurm-')
  // The cluster's own folder, removed once its daemons are stopped.
  const cluster = mkdtempSync(join(tmpdir(), 'vramscope-slurm-cluster-'))
  const conf = join(cluster, 'slurm.conf')
  const env = { ...process.env, PATH, SLURM_CONF: conf, VRAMSCOPE: `${process.execPath} ${BIN}` }
  const daemons: { name: string; child: ChildProcess }[] = []
  const jobs: string[] = []
  const out = join(dir, 'job')
  let started = 0
  let up = 0

  const slurm = (cmd: string, args: string[]) => execFileSync(which(cmd)!, args, { env, encoding: 'utf8', timeout: 15_000 })
  // Every daemon's and job's log, for a failure's message.
  const logs = () =>
    [join(cluster, 'log'), join(out, 'logs')]
      .filter((d) => existsSync(d))
      .flatMap((d) => readdirSync(d).map((f) => join(d, f)))
      .map((f) => `--- ${f}\n${readFileSync(f, 'utf8').slice(-3000)}`)
      .join('\n')

  function start(name: string, args: string[]): void {
    const log = openSync(join(cluster, 'log', `${name}.out`), 'a')
    const child = spawn(which(name)!, args, { env, stdio: ['ignore', log, log] })
    daemons.push({ name, child })
  }

  async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
    const end = Date.now() + ms
    while (!ok()) {
      if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s\n${logs()}`)
      for (const { name, child } of daemons)
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`${name} exited (${child.exitCode ?? child.signalCode}) while waiting for ${what}\n${logs()}`)
      await sleep(200)
    }
  }

  // Whatever happened: our jobs cancelled, then every daemon this file started stopped, by its pid.
  const stopAll = async () => {
    if (jobs.length > 0 && daemons.length > 0) {
      try {
        slurm('scancel', jobs)
      } catch {
        // The jobs are over, or slurmctld is gone.
      }
    }
    for (const { child } of daemons.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      const killed = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(killed)
    }
    daemons.length = 0
  }
  const killNow = () => {
    for (const { child } of daemons) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
  process.once('exit', killNow)

  before(async () => {
    if (skip) return
    started = Date.now()
    for (const sub of ['', 'munge', 'state', 'spool', 'log']) mkdirSync(join(cluster, sub), { recursive: true })
    // munged refuses a socket folder others cannot enter, and a key others can read.
    for (const d of [cluster, join(cluster, 'munge')]) chmodSync(d, 0o755)
    const key = join(cluster, 'munge', 'munge.key')
    writeFileSync(key, randomBytes(1024), { mode: 0o600 })
    const socket = join(cluster, 'munge', 'munge.socket')
    const m = join(cluster, 'munge')
    start('munged', [
      '-F',
      `--key-file=${key}`,
      `--socket=${socket}`,
      `--pid-file=${m}/munged.pid`,
      `--seed-file=${m}/munged.seed`,
      `--log-file=${m}/munged.log`,
    ])
    await until('munged socket', () => existsSync(socket), 10_000)

    const [ctldPort, dPort] = [await freePort(), await freePort()]
    const n = node!
    writeFileSync(
      conf,
      [
        'ClusterName=vramscope-test',
        `SlurmctldHost=${n.name}(127.0.0.1)`,
        'SlurmUser=root',
        'SlurmdUser=root',
        `SlurmctldPort=${ctldPort}`,
        `SlurmdPort=${dPort}`,
        'AuthType=auth/munge',
        'CredType=cred/munge',
        `AuthInfo=socket=${socket}`,
        `StateSaveLocation=${cluster}/state`,
        `SlurmdSpoolDir=${cluster}/spool`,
        `SlurmctldPidFile=${cluster}/slurmctld.pid`,
        `SlurmdPidFile=${cluster}/slurmd.pid`,
        `SlurmctldLogFile=${cluster}/log/slurmctld.log`,
        `SlurmdLogFile=${cluster}/log/slurmd.log`,
        'ProctrackType=proctrack/linuxproc',
        'TaskPlugin=task/none',
        'SelectType=select/cons_tres',
        'SelectTypeParameters=CR_Core',
        'ReturnToService=2',
        'MpiDefault=none',
        'JobAcctGatherType=jobacct_gather/none',
        'AccountingStorageType=accounting_storage/none',
        'JobCompType=jobcomp/none',
        // The memory a little under what slurmd measures, so that the node never drains for less.
        `NodeName=${n.name} NodeAddr=127.0.0.1 ${n.shape.join(' ')} RealMemory=${Math.floor(n.memoryMiB * 0.9)} State=UNKNOWN`,
        'PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP',
        '',
      ].join('\n'),
    )
    start('slurmctld', ['-D', '-f', conf])
    start('slurmd', ['-D', '-f', conf])
    await until(
      'the node idle (sinfo)',
      () => {
        try {
          return slurm('sinfo', ['-h', '-o', '%T']).trim() === 'idle'
        } catch {
          return false
        }
      },
      30_000,
    )
    up = Date.now()
  })

  after(async () => {
    if (skip) {
      rmSync(cluster, { recursive: true, force: true })
      return
    }
    const stopping = Date.now()
    await stopAll()
    process.removeListener('exit', killNow)
    rmSync(cluster, { recursive: true, force: true })
    const s = (a: number, b: number) => `${((b - a) / 1000).toFixed(1)} s`
    console.log(`slurm: cluster up in ${s(started, up)}, job run and merged in ${s(up, stopping)}, daemons stopped in ${s(stopping, Date.now())}`)
  })

  it('submit.sh runs one array task a rank and the merge after them; the report equals whatif R0 R1 --json', { skip }, async () => {
    const submitted = execFileSync(join(SCRIPTS, 'submit.sh'), ['-o', out, src(0, 'pickle'), src(1, 'pickle'), '--', ...CONFS], {
      env,
      cwd: dir,
      encoding: 'utf8',
      timeout: 30_000,
    })
    const ids = submitted.trim().split(/\s+/)
    assert.equal(ids.length, 2, submitted)
    jobs.push(...ids)
    assert.deepEqual(readFileSync(join(out, 'files.txt'), 'utf8').trim().split('\n'), [src(0, 'pickle'), src(1, 'pickle')])

    const report = join(out, 'report.json')
    // The jobs still queued or running (none once both ended; squeue refuses ids it forgot).
    const queued = () => {
      try {
        return slurm('squeue', ['-h', '-j', ids.join(','), '-o', '%i']).trim()
      } catch {
        return ''
      }
    }
    await until('the merge job', () => existsSync(report) || queued() === '', 120_000)
    assert.ok(existsSync(report), `no report: the jobs ended without one\n${logs()}`)

    // One result a task, named by the task's index, each the rank its file names.
    assert.deepEqual(readdirSync(join(out, 'results')).sort(), ['rank-0.json', 'rank-1.json'])
    for (const task of [0, 1]) {
      const one = JSON.parse(readFileSync(join(out, 'results', `rank-${task}.json`), 'utf8')) as { file: string; rank: number }
      assert.deepEqual([one.file, one.rank], [src(task, 'pickle'), task])
    }

    interface Job {
      worstRank: number
      configs: { conf: string; fitsEveryRank: boolean; smallestFittingBytes: number | null; worstRank: number }[]
    }
    const merged = JSON.parse(readFileSync(report, 'utf8')) as Job
    const local = await vramscope(['whatif', src(0, 'pickle'), src(1, 'pickle'), '--json', ...CONFS])
    assert.equal(local.code, 0, shown(local))
    const together = JSON.parse(local.stdout) as Job
    assert.equal(merged.worstRank, together.worstRank)
    assert.equal(merged.worstRank, 1)
    const figures = (j: Job) => j.configs.map((c) => [c.conf, c.fitsEveryRank, c.smallestFittingBytes, c.worstRank])
    assert.deepEqual(figures(merged), figures(together))
    assert.equal(merged.configs.length, 2)
    // The report carries no timing: the whole of it is the same.
    assert.deepEqual(merged, together)
    // And the text report beside it is what `whatif R0 R1` prints.
    const text = await vramscope(['whatif', src(0, 'pickle'), src(1, 'pickle'), ...CONFS])
    assert.equal(readFileSync(join(out, 'report.txt'), 'utf8'), text.stdout)
  })
})
