// The bad-input error of the PyTorch snapshot importer and its unpickler: an InputError (the CLI's
// exit code 2) with a code for programs and the byte offset the problem was found at.
import { InputError } from '../../input-error.ts'

export type SnapshotErrorCode =
  | 'unreadable' // the file could not be read
  | 'empty' // zero bytes
  | 'forbidden' // a pickle opcode that would import, call or construct Python objects
  | 'unsupported' // a pickle opcode for values a snapshot does not hold (sets, buffers, protocol 0 strings)
  | 'corrupt' // not a pickle, or a pickle that contradicts itself
  | 'truncated' // the input ends before the pickle does
  | 'limit' // deeper, larger or longer than the configured limits
  | 'not-a-snapshot' // a valid pickle or JSON document that is not a memory snapshot

export class SnapshotImportError extends InputError {
  constructor(
    file: string,
    readonly code: SnapshotErrorCode,
    /** Byte offset in the file, when the problem has one. */
    readonly offset: number | undefined,
    problem: string,
    /** Where in the snapshot's structure, e.g. "device_traces[0][17]". */
    readonly path?: string,
  ) {
    super(file, [offset === undefined ? '' : `byte ${offset}`, path ?? ''].filter((p) => p !== '').join(', '), problem)
  }
}
