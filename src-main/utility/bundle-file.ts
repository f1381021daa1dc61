// Large bundles between the worker process and a Node host go through a file, not the IPC channel.
// Over child_process's channel a bundle is copied five times (serialized, written to the pipe in
// pieces, read, joined, deserialized), each copy into fresh memory: a 57 MB replay took about a
// second to cross, and the trace's 35 MB columns held up the page's first paint by as much. Written
// to a file from the arrays themselves (no joined copy) and streamed from there by the host, the
// bytes are copied by the kernel alone. A bundle file belongs to whoever holds the BundleFile: the
// web host streams it to the page and deletes it; its folder is the transport's, removed when the
// worker ends.
import { randomUUID } from 'node:crypto'
import { open, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'

/** The environment variable that names a forked worker's folder for bundle files. */
export const BUNDLE_DIR_ENV = 'VRAMSCOPE_BUNDLE_DIR'

/** Below this many bytes a bundle crosses as an ArrayBuffer: a file costs more than it saves. */
export const BUNDLE_FILE_MIN_BYTES = 1 << 20

/** A bundle the worker wrote to a file: its path and length in bytes. */
export interface BundleFile {
  bundleFile: string
  bytes: number
}

export function isBundleFile(value: unknown): value is BundleFile {
  return typeof value === 'object' && value !== null && typeof (value as BundleFile).bundleFile === 'string' && typeof (value as BundleFile).bytes === 'number'
}

/**
 * Writes a bundle's parts (encodeBundleParts: views of its arrays, in order; `bytes` long in all)
 * to a new file in `dir`. Rejects, leaving no file behind, when the disk is full or the folder is
 * gone: the caller then sends the bundle as bytes.
 */
export async function writeBundleFile(dir: string, parts: readonly Uint8Array[], bytes: number): Promise<BundleFile> {
  const path = join(dir, `${randomUUID()}.bundle`)
  const file = await open(path, 'wx', 0o600)
  try {
    // writev takes at most IOV_MAX (1024) pieces a call; a bundle has a few dozen.
    for (let i = 0; i < parts.length; i += 512) {
      const batch = parts.slice(i, i + 512)
      let written = (await file.writev(batch as Uint8Array[])).bytesWritten
      // A short write (rare, on some file systems): the rest one piece at a time.
      for (const p of batch) {
        if (written >= p.byteLength) {
          written -= p.byteLength
          continue
        }
        for (let off = written; off < p.byteLength;) off += (await file.write(p, off)).bytesWritten
        written = 0
      }
    }
    await file.close()
  } catch (e) {
    await file.close().catch(() => {})
    await rm(path, { force: true })
    throw e
  }
  return { bundleFile: path, bytes }
}

/** The bundle's bytes (for a host that hands them on whole), and the file removed. */
export async function takeBundleFile(file: BundleFile): Promise<ArrayBuffer> {
  try {
    const data = await readFile(file.bundleFile)
    if (data.byteLength !== file.bytes) throw new Error(`bundle file ${file.bundleFile}: ${data.byteLength} bytes, the worker wrote ${file.bytes}`)
    // A file this large is read into a buffer of its own: handed on without a copy.
    if (data.byteOffset === 0 && data.byteLength === data.buffer.byteLength) return data.buffer as ArrayBuffer
    return data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer
  } finally {
    await rm(file.bundleFile, { force: true })
  }
}
