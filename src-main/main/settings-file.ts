// A small settings file of the desktop app (recent files, window state), written whole: to a
// temporary file renamed over the old one, so a crash leaves the old or the new text, never half;
// writes one after another, so a later one never lands before an earlier one.
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'

export class SettingsFile {
  private writing: Promise<void> = Promise.resolve()

  constructor(readonly path: string) {}

  /** Queues `text` to replace the file's contents; resolves once it has (rejects if it could not). */
  write(text: string): Promise<void> {
    this.writing = this.writing
      .catch(() => {})
      .then(async () => {
        await mkdir(dirname(this.path), { recursive: true })
        const temporary = `${this.path}.${process.pid}.tmp`
        await writeFile(temporary, text)
        await rename(temporary, this.path)
      })
    return this.writing
  }

  /** The last write queued (resolved at once if none was). */
  settled(): Promise<void> {
    return this.writing
  }
}
