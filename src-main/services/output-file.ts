// Files vramscope writes whole (trace files, exports): written to a temporary name beside the
// target and renamed over it once complete and synced, so the target holds the old file or the
// whole new one, never a part. A write the file system refuses (a full disk, a file size limit, a
// quota) is an OutputError naming the file and the cause, and the temporary file is removed. A
// writer killed outright (SIGKILL, a power cut) cannot remove its own: the next write of that output
// removes the temporary files of writers no longer running.
import { open, readdir, rename, rm } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

/** Why the file system refused a write, in a user's words. */
export function writeFailureReason(cause: NodeJS.ErrnoException): string {
  switch (cause.code) {
    case 'ENOSPC':
      return 'the disk is full'
    case 'EFBIG':
      return "the file reached the size limit (ulimit -f or the file system's largest file)"
    case 'EDQUOT':
      return 'the disk quota is used up'
    case 'EACCES':
    case 'EPERM':
      return 'permission denied'
    case 'ENOENT':
      return 'its folder does not exist'
    case 'EISDIR':
      return 'it is a directory'
    case 'EROFS':
      return 'the file system is read-only'
    default:
      return `writing failed (${cause.message})`
  }
}

/** A file could not be written; nothing was left at `path` (an older file there is unchanged). */
export class OutputError extends Error {
  readonly code: string
  constructor(
    readonly path: string,
    cause: NodeJS.ErrnoException,
  ) {
    super(`${path}: ${writeFailureReason(cause)}; nothing was written (an older file of that name is unchanged)`, { cause })
    this.name = 'OutputError'
    this.code = cause.code ?? 'EIO'
  }
}

/**
 * Writes `pieces` in order to `path` through a temporary file and a rename; returns the bytes
 * written. Throws OutputError when the file system refuses; an error thrown by `pieces` itself is
 * passed on unchanged, with the temporary file removed either way.
 */
export async function writeFileAtomically(path: string, pieces: Iterable<Uint8Array | string> | AsyncIterable<Uint8Array | string>): Promise<number> {
  const temporary = `${path}.${process.pid}.partial`
  await removeStalePartials(path)
  let bytes = 0
  let handle
  try {
    handle = await open(temporary, 'w')
  } catch (e) {
    throw new OutputError(path, e as NodeJS.ErrnoException)
  }
  try {
    for await (const piece of pieces) {
      const data = typeof piece === 'string' ? Buffer.from(piece) : piece
      let done = 0
      while (done < data.length) done += (await written(handle.write(data, done, data.length - done), path)).bytesWritten
      bytes += data.length
    }
    await written(handle.sync(), path)
    await written(handle.close(), path)
    handle = undefined
    await written(rename(temporary, path), path)
  } catch (e) {
    await handle?.close().catch(() => undefined)
    await rm(temporary, { force: true })
    throw e
  }
  return bytes
}

/** A file system operation's promise, its refusal turned into an OutputError for `path`. */
async function written<T>(operation: Promise<T>, path: string): Promise<T> {
  try {
    return await operation
  } catch (e) {
    throw new OutputError(path, e as NodeJS.ErrnoException)
  }
}

/** The largest process id Linux gives (PID_MAX_LIMIT); a larger number is not a writer's. */
const PID_MAX = 4_194_304

/**
 * Removes `PATH.PID.partial` files beside `path` whose writer (process PID) is no longer running.
 * A partial of a live process is kept (it may be another vramscope writing the same output); one
 * that cannot be listed or removed is left as it is: this never fails the write.
 */
async function removeStalePartials(path: string): Promise<void> {
  const prefix = `${basename(path)}.`
  let names: string[]
  try {
    names = await readdir(dirname(path))
  } catch {
    return
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.endsWith('.partial')) continue
    const pid = name.slice(prefix.length, -'.partial'.length)
    if (!/^[1-9]\d{0,6}$/.test(pid) || Number(pid) > PID_MAX || Number(pid) === process.pid || running(Number(pid))) continue
    await rm(join(dirname(path), name), { force: true }).catch(() => undefined)
  }
}

/** Whether process `pid` exists (EPERM: it does, under another user). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'
  }
}
