// The one error type for bad input files (trace files, importers): it names the file, the position
// in it and the problem, so a user can find the spot, and the CLI can tell bad input (exit code 2)
// from a bug. Each reader extends it with its own codes.

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
