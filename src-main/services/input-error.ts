// The one error type for bad input files (trace files, importers): it names the file, the position
// in it and the problem, so a user can find the spot, and the CLI can tell bad input (exit code 2)
// from a bug. Each reader extends it with its own codes.
import type { Stats } from 'node:fs'

export class InputError extends Error {
  /** The file as the caller named it. */
  readonly file: string
  /** Where in the file, for people: "byte 1234 (chunk 3, events)", "line 17". */
  readonly position: string
  /** What is wrong, without the file and position. */
  readonly problem: string

  constructor(file: string, position: string, problem: string) {
    super(position ? `${file}: ${position}: ${problem}` : `${file}: ${problem}`)
    this.name = new.target.name
    this.file = file
    this.position = position
    this.problem = problem
  }
}

/**
 * Why a path that exists cannot be read as an input file, or undefined when it is a regular file.
 * Checked from stat() before the file is opened: opening a FIFO waits for a writer, forever if none
 * comes, and a device or socket never ends.
 */
export function notARegularFile(stats: Stats): string | undefined {
  if (stats.isFile()) return undefined
  const what = stats.isDirectory()
    ? 'a directory'
    : stats.isFIFO()
      ? 'a FIFO (named pipe)'
      : stats.isSocket()
        ? 'a socket'
        : stats.isCharacterDevice() || stats.isBlockDevice()
          ? 'a device'
          : 'not a regular file'
  return `is ${what}; vramscope reads regular files only (save the data to a file first)`
}
