// The `vramscope` command (bin/vramscope.mjs starts it with plain Node): parsing and printing only;
// the work is in src-main/services. Exit codes: 0 done, 2 bad input (a bad file, option or
// strategy: the message names the file or option, the position and the problem), 1 anything else
// (a bug: the stack is printed for the report).
import { readFileSync } from 'node:fs'

import { Command, CommanderError, Option } from 'commander'

import { InputError } from '../services/input-error.ts'
import { OutputError } from '../services/output-file.ts'
import { TraceWriteError } from '../services/trace/file.ts'
import { diffCommand } from './commands/diff.ts'
import { EXPORT_FORMATS, exportCommand } from './commands/export.ts'
import { importCommand } from './commands/import.ts'
import { NoGpuError, recordCommand, RecorderCrashError } from './commands/record.ts'
import { infoCommand } from './commands/info.ts'
import { ranksCommand } from './commands/ranks.ts'
import { replayCommand } from './commands/replay.ts'
import { serveCommand } from './commands/serve.ts'
import { topCommand } from './commands/top.ts'
import { whatifCommand } from './commands/whatif.ts'
import { collect, type Io } from './shared.ts'

export const EXIT_BAD_INPUT = 2
export const EXIT_INTERNAL = 1

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

const STRATEGIES_HELP = 'strategies to replay, comma-separated, parameters after colons: caching:preset=pytorch,slab,buddy:pool_size=4GiB (repeatable)'

function buildProgram(io: Io): Command {
  const program = new Command('vramscope')
    .description('See how GPU device memory is handed out: import traces, replay them through allocator strategies, compare.')
    .version(packageJson.version)
    .showHelpAfterError('(vramscope --help lists the commands)')
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout.write(s),
      writeErr: (s) => io.stderr.write(s),
    })

  const placement = () =>
    new Option('--no-recorded-placement', "replay PyTorch-policy strategies at the model's own segment addresses, not PyTorch's recorded ones")
  const resets = () => new Option('--no-reset-at-markers', "do not reset strategies that support it (arena) at the trace's markers")

  program
    .command('info')
    .description('what a trace file, PyTorch snapshot or RMM log holds')
    .argument(
      '<files...>',
      ".vramscope/.arrow trace, PyTorch snapshot (.pickle or .json) or RMM log (.csv); several (one a rank), a folder (record --pytorch's) or a pattern: a job of many ranks",
    )
    .option('--device <n>', "which device of a PyTorch snapshot to import: an ordinal or 'all' (default: device 0, else the first it has)")
    .option('--json', 'machine-readable output on stdout')
    .action((files: string[], options) => infoCommand(io, files, options))

  program
    .command('import')
    .description('save a PyTorch snapshot or RMM log as a .vramscope trace (PyTorch\'s layout kept as "pytorch (recorded)")')
    .argument('<file>', 'PyTorch snapshot (.pickle or .json), RMM log (.csv), or a trace to rewrite whole')
    .requiredOption('-o, --output <out>', 'the .vramscope file to write')
    .option('--device <n>', "which device of a PyTorch snapshot to import: an ordinal or 'all' (default: device 0, else the first it has)")
    .option('--json', 'machine-readable output on stdout')
    .action((file: string, options) => importCommand(io, file, options))

  program
    .command('replay')
    .description('replay a trace through strategies and compare peak, waste, fragmentation, failures, device calls, speed')
    .argument('<file>', 'trace, PyTorch snapshot or RMM log')
    .option('-s, --strategies <list>', STRATEGIES_HELP, collect)
    .option(
      '--conf <conf>',
      'a PYTORCH_ALLOC_CONF string such as "max_split_size_mb:128" replayed through the PyTorch model (repeatable; "recorded": the snapshot\'s own)',
      collect,
    )
    .option('--cap <size>', 'device memory cap such as 24GiB: requests that do not fit fail and are counted')
    .option('--gpu <size>', "the device's memory, what the strategies run on without --cap (default: what the file implies, else 79.18 GiB, an H100 80GB)")
    .option('-o, --output <out>', 'save the trace with every result (layout, metrics, summary) as a .vramscope file')
    .addOption(placement())
    .option(
      '--no-recorded-state',
      'on a late or overflowed recording, start PyTorch-policy strategies empty, with the blocks live when recording began allocated at t = 0, not from the segments as they stood then',
    )
    .addOption(resets())
    .option('--json', 'machine-readable output on stdout')
    .action((file: string, options) => replayCommand(io, file, options))

  program
    .command('whatif')
    .description(
      'which PYTORCH_ALLOC_CONF would fix an out-of-memory, and how much GPU the job needs: replays the trace under many allocator configurations (or those given) and ranks them',
    )
    .argument(
      '<files...>',
      "PyTorch snapshot (.pickle or .json), trace or RMM log; several (one a rank), a folder (record --pytorch's) or a pattern: a job of many ranks",
    )
    .option(
      '--conf <conf>',
      'a PYTORCH_ALLOC_CONF string such as "expandable_segments:True" (repeatable; "recorded": the snapshot\'s own); none: a grid',
      collect,
    )
    .option(
      '--cap <size>',
      'the device limit as set_per_process_memory_fraction sets it: a size such as 24GiB, or the fraction itself (0.25, of --gpu) (default: the limit a recorded out-of-memory implies)',
    )
    .option('--gpu <size>', "the device's memory, what a per_process_memory_fraction is a fraction of (default 79.18 GiB, an H100 80GB)")
    .option('--no-search', 'skip the search for the smallest limit that runs the whole trace')
    .option('--no-strategies', "grid: leave out vramscope's other strategies")
    .option(
      '--json',
      'machine-readable output on stdout: {"configs": [{"conf", "peakReserved", "peakAllocated", "segments", "failures", "smallestFittingBytes", ...}], ...}',
    )
    .action((files: string[], options) => whatifCommand(io, files, options))

  program
    .command('ranks')
    .description(
      "a job's what-if report merged from its ranks' separate `whatif FILE --json` outputs (one a rank, as a cluster runs them): the report `whatif R0 R1 ...` prints",
    )
    .argument('<results...>', 'the output of `vramscope whatif FILE --json`, one a rank; a folder of them or a pattern')
    .option('--json', 'machine-readable output on stdout, as `whatif R0 R1 ... --json`: {"ranks", "worstRank", "configs": [{"fitsEveryRank", "perRank", ...}]}')
    .action((files: string[], options) => ranksCommand(io, files, options))

  program
    .command('top')
    .description(
      'what was using memory at the peak, at an out-of-memory or at any event: live blocks grouped by the frame of your code (or tag, stream), largest first',
    )
    .argument(
      '<files...>',
      "PyTorch snapshot (.pickle or .json), trace or RMM log; several (one a rank), a folder (record --pytorch's) or a pattern: a job of many ranks",
    )
    .option(
      '--at <moment>',
      "peak (the recorded layout's peak reserved, else the peak of requested bytes), oom (the first recorded out-of-memory) or an event index",
      'peak',
    )
    .option('--by <grouping>', 'frame (the first frame of your code), tag or stream', 'frame')
    .option(
      '--strategy <name>',
      "count the blocks as this strategy's replay lays them out (rounded sizes), e.g. caching:preset=pytorch; 'recorded': the recorded layout",
    )
    .option('--limit <n>', 'groups to print (default 20; --json gives all)')
    .option('--frames <n>', 'frames printed under each group (default 3)')
    .addOption(placement())
    .option(
      '--json',
      'machine-readable output on stdout: {"at": {"event", "time", "reason", ...}, "groups": [{"key", "bytes", "blocks", "share", "frames"}, ...]}',
    )
    .action((files: string[], options) => topCommand(io, files, options))

  program
    .command('export')
    .description('results as Chrome Trace Event JSON (counter tracks per strategy; opens in Perfetto) or a CSV of each summary')
    .argument('<file>', 'a trace holding replay results, or any input with --strategies')
    .addOption(new Option('-f, --format <format>', 'output format').choices(EXPORT_FORMATS).makeOptionMandatory())
    .option('-o, --output <out>', 'file to write (default: stdout)')
    .option('-s, --strategies <list>', `replay first: ${STRATEGIES_HELP}`, collect)
    .option('--cap <size>', 'device memory cap for the replay, such as 24GiB')
    .addOption(placement())
    .addOption(resets())
    .option('--json', 'report what was written as JSON on stdout (needs -o)')
    .action((file: string, options) => exportCommand(io, file, options))

  program
    .command('diff')
    .description('two traces or two result files side by side, with the differences')
    .argument('<a>', 'first trace or result file')
    .argument('<b>', 'second trace or result file')
    .option('-s, --strategies <list>', `replay both first: ${STRATEGIES_HELP}`, collect)
    .option('--cap <size>', 'device memory cap for the replays, such as 24GiB')
    .addOption(placement())
    .addOption(resets())
    .option('--json', 'machine-readable output on stdout')
    .action((a: string, b: string, options) => diffCommand(io, a, b, options))

  program
    .command('record')
    .description(
      'record real GPU memory use: any CUDA program (-- python train.py) through an LD_PRELOAD interposer, or a built-in workload (--workload); needs an NVIDIA GPU and driver',
    )
    .argument('[command...]', 'the program to run and record, after --')
    .option(
      '-o, --output <out>',
      'the .vramscope file to stream the recording into (it opens even if the program crashes or is killed); with --pytorch, the folder (default vramscope-SCRIPT-TIME)',
    )
    .option(
      '--pytorch',
      "with a program: record it at tensor level too: PyTorch's memory history in every process that initialises CUDA (one snapshot per rank under torchrun, written at an out-of-memory, every --snapshot-every seconds and at exit), torch.cuda.memory_stats() beside each, and the driver's calls of each",
    )
    .option('--max-entries <n>', "with --pytorch: the history's ring size (max_entries); default PyTorch's, every event")
    .option(
      '--snapshot-every <seconds>',
      'with --pytorch: seconds between snapshots while the program runs, so a kill leaves a recent one (default 60; 0: at an out-of-memory, SIGTERM and exit only)',
    )
    .option(
      '-w, --workload <name>',
      'run a built-in workload instead: async_pipeline, cross_stream, slab_mix, buddy_mix, arena_steps, growable_buffer, device_bump, training, inference, fragmentation',
    )
    .option('-s, --strategy <spec>', 'with --workload: the strategy on its real backing, parameters after colons (default caching)')
    .option('-p, --param <key=value>', 'with --workload: a workload parameter such as steps=50 (repeatable)', collect)
    .option('--cap <size>', 'with --workload: memory the backing may hand out, such as 2GiB (an out-of-memory ends the workload as a recorded failure)')
    .option('--device <n>', 'with --workload: CUDA device ordinal (default 0)')
    .option('--stack <frames>', 'with a program: native stack frames recorded per call (0-32, default 0; costs microseconds a call)')
    .addOption(new Option('--skip-driver-check', 'record a program even where no NVIDIA driver shows (tests with a stand-in driver)').hideHelp())
    .option('--json', 'machine-readable output on stdout')
    .action((command: string[], options) => recordCommand(io, command, options))

  program
    .command('serve')
    .description('the app in a browser: serves the UI and its API on 127.0.0.1 (for a GPU server reached through an SSH tunnel)')
    .argument(
      '[files...]',
      'a trace, PyTorch snapshot or RMM log to open at start (the page opens it and nothing else from disk); several files, a folder or a pattern: a job of many ranks, one file a rank',
    )
    .option('--host <host>', 'interface to listen on (0.0.0.0: every interface, guarded by the token only)', '127.0.0.1')
    .option('--port <port>', 'port to listen on (0: a free one)', '0')
    .option(
      '--allow-record-commands',
      "let the page record a PyTorch program here (the Record panel's command line, run as this user): anyone holding the URL's token can then run commands on this host",
    )
    .addOption(new Option('--skip-driver-check', 'record programs even where no NVIDIA driver shows (tests with a stand-in torch)').hideHelp())
    .option('--json', 'print {url, port, token} as JSON')
    .option('--upload-dir <dir>', 'where uploads are written while they arrive (default: the temp directory)')
    .addOption(new Option('--page-idle-ms <ms>', 'close a page that makes no request for this long').hideHelp())
    .action((files: string[], options) => serveCommand(io, files, options))

  program
    .command('mcp')
    .description(
      'a Model Context Protocol server on stdin/stdout, for an agent: tools info, top, whatif, replay and diff, each answering as the command with --json does',
    )
    .option('--allow <dir>', 'a folder whose files (and folders below) the tools may read (repeatable; default: the working directory)', collect)
    // The MCP SDK loads only for this command: every other command starts without it.
    .action(async (options) => (await import('./commands/mcp.ts')).mcpCommand(io, options, runCli, { version: packageJson.version }))

  return program
}

function wantsJson(argv: readonly string[]): boolean {
  return argv.includes('--json')
}

/** Runs the CLI on `argv` (without node and the script) and returns the exit code. */
export async function runCli(argv: readonly string[], io: Io): Promise<number> {
  const program = buildProgram(io)
  try {
    await program.parseAsync([...argv], { from: 'user' })
    return 0
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has printed its message already (unknown option, missing argument...).
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version' || error.code === 'commander.help') return 0
      return EXIT_BAD_INPUT
    }
    if (error instanceof NoGpuError) {
      io.stderr.write(`${error.message}\n`)
      if (wantsJson(argv)) io.stdout.write(`${JSON.stringify({ error: { kind: 'no-gpu', message: error.message } })}\n`)
      return EXIT_BAD_INPUT
    }
    if (error instanceof RecorderCrashError) {
      io.stderr.write(`${error.message}\n`)
      if (wantsJson(argv)) io.stdout.write(`${JSON.stringify({ error: { kind: 'recorder', message: error.message } })}\n`)
      return EXIT_INTERNAL
    }
    if (error instanceof OutputError || error instanceof TraceWriteError) {
      io.stderr.write(`vramscope: ${error.message}\n`)
      if (wantsJson(argv)) io.stdout.write(`${JSON.stringify({ error: { kind: 'output', file: error.path, code: error.code, message: error.message } })}\n`)
      return EXIT_INTERNAL
    }
    if (error instanceof InputError) {
      io.stderr.write(`vramscope: ${error.message}\n`)
      if (wantsJson(argv))
        io.stdout.write(
          `${JSON.stringify({ error: { kind: 'input', file: error.file, position: error.position, problem: error.problem, message: error.message } })}\n`,
        )
      return EXIT_BAD_INPUT
    }
    const e = error instanceof Error ? error : new Error(String(error))
    io.stderr.write(`vramscope: internal error: ${e.stack ?? e.message}\n`)
    if (wantsJson(argv)) io.stdout.write(`${JSON.stringify({ error: { kind: 'internal', message: e.message } })}\n`)
    return EXIT_INTERNAL
  }
}

// A reader that stops early (`vramscope export ... | head`) is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0)
  throw e
})

process.exitCode = await runCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr })
