// Runs the real `vramscope` command (bin/vramscope.mjs, as npx would) in a child process with
// plain Node, for the cli-*.test.ts files: exit code, stdout and stderr as the user would see them.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'

export const BIN = fileURLToPath(new URL('../../bin/vramscope.mjs', import.meta.url))

export const fixture = (path: string): string => fileURLToPath(new URL(`../fixtures/${path}`, import.meta.url))

export interface CliRun {
  code: number
  stdout: string
  stderr: string
}

export function vramscope(args: readonly string[], options: { cwd?: string; timeoutMs?: number } = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      // Not a terminal, so no progress bars: stderr holds only messages.
      { cwd: options.cwd, timeout: options.timeoutMs ?? 120_000, maxBuffer: 256 << 20, encoding: 'utf8' },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== 'number') return reject(new Error(`vramscope ${args.join(' ')} did not run: ${error.message}\n${stderr}`))
        resolve({ code: error ? (error.code as number) : 0, stdout, stderr })
      },
    )
  })
}

/** A run's output, for assertion messages. */
export function shown(run: CliRun): string {
  return `exit ${run.code}\n--- stdout\n${run.stdout.slice(0, 4000)}\n--- stderr\n${run.stderr.slice(0, 4000)}`
}

/** Runs with --json expected to succeed, and returns the parsed stdout. */
export async function vramscopeJson<T = Record<string, unknown>>(args: readonly string[]): Promise<T> {
  const run = await vramscope([...args, '--json'])
  if (run.code !== 0) throw new Error(`vramscope ${args.join(' ')} --json failed: ${shown(run)}`)
  return JSON.parse(run.stdout) as T
}

/** The fixture PyTorch snapshots recorded on an H100, each with torch.cuda.memory_stats() of its run. */
export const PYTORCH_WORKLOADS = ['mlp_varbatch', 'transformer_varseq', 'convnet_varimg', 'inference_mixed'] as const
