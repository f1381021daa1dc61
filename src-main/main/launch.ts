// What the app was asked to open at launch: files named on the command line (and by the OS when a
// user opens an associated file, which arrives the same way on Linux and Windows), and which file
// types are associated with the app. Pure, so it is tested without Electron.
import { extname, isAbsolute, resolve } from 'node:path'

/** File types the app registers for (electron-builder's fileAssociations) and its Open dialog offers. */
export const FILE_TYPES = [
  { ext: 'vramscope', name: 'vramscope trace', role: 'Editor' },
  { ext: 'arrow', name: 'vramscope trace (Arrow)', role: 'Viewer' },
  { ext: 'pickle', name: 'PyTorch memory snapshot', role: 'Viewer' },
  { ext: 'pkl', name: 'PyTorch memory snapshot', role: 'Viewer' },
] as const

/** Extensions the Open dialog lists besides FILE_TYPES (JSON snapshots and profiler traces, .json.gz, Nsight Systems exports, Umpire's .stats, RMM and Umpire logs). */
export const OPEN_DIALOG_EXTENSIONS = [...FILE_TYPES.map((t) => t.ext), 'pt', 'json', 'gz', 'sqlite', 'stats', 'csv', 'log']

/**
 * The files in a command line: everything after the executable (and, unpackaged, after the app's
 * own path, as in `electron .`) that is not a switch. Relative paths are taken from `cwd`.
 */
/** Switches whose value is the next argument (Node's preload, as Playwright launches Electron). */
const SWITCHES_WITH_VALUE = new Set(['-r', '--require'])

export function filesFromArgv(argv: readonly string[], options: { packaged: boolean; cwd: string }): string[] {
  const rest: string[] = []
  for (let i = 1; i < argv.length; i++) {
    if (SWITCHES_WITH_VALUE.has(argv[i]!)) i++
    else rest.push(argv[i]!)
  }
  if (!options.packaged) {
    // `electron [switches] APP [files]`: the first non-switch is the app.
    const app = rest.findIndex((a) => !a.startsWith('-'))
    if (app >= 0) rest.splice(0, app + 1)
    else rest.length = 0
  }
  const files: string[] = []
  for (const arg of rest) {
    if (arg.startsWith('-') || arg === '') continue
    // Chromium and macOS pass a few non-file words (process serial numbers): keep paths only.
    if (!isAbsolute(arg) && !arg.includes('/') && !arg.includes('\\') && extname(arg) === '') continue
    files.push(resolve(options.cwd, arg))
  }
  return files
}
