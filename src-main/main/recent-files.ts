// The recent-files list of the desktop app, kept in a JSON file in the user's data directory.
// Asynchronous file system only (main never blocks); written to a temporary file and renamed, so a
// crash mid-write leaves the previous list. A file that is missing or garbled reads as empty.
import { randomUUID } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'

import type { RecentFile } from '../../src-shared/contract.ts'
import { SettingsFile } from './settings-file.ts'

export const MAX_RECENT = 10

interface Entry extends RecentFile {
  path: string
}

function isEntry(v: unknown): v is Entry {
  const e = v as Entry
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.path === 'string' &&
    typeof e.key === 'string' &&
    typeof e.name === 'string' &&
    typeof e.openedAt === 'number'
  )
}

export class RecentFiles {
  private entries: Entry[] = []
  private readonly out: SettingsFile

  constructor(
    private readonly file: string,
    private readonly now: () => number = Date.now,
  ) {
    this.out = new SettingsFile(file)
  }

  async load(): Promise<void> {
    try {
      const parsed = JSON.parse(await readFile(this.file, 'utf8')) as unknown
      this.entries = Array.isArray(parsed) ? parsed.filter(isEntry).slice(0, MAX_RECENT) : []
    } catch {
      this.entries = []
    }
  }

  list(): RecentFile[] {
    return this.entries.map(({ name, key, openedAt }) => ({ name, key, openedAt }))
  }

  /** Full paths, newest first (for the OS's recent-documents list and the menu). */
  paths(): string[] {
    return this.entries.map((e) => e.path)
  }

  pathOf(key: string): string | undefined {
    return this.entries.find((e) => e.key === key)?.path
  }

  /** Puts `path` first (keeping its key if it was listed) and saves the list. */
  add(path: string): Promise<void> {
    const existing = this.entries.find((e) => e.path === path)
    this.entries = [
      { path, name: basename(path), key: existing?.key ?? randomUUID(), openedAt: this.now() },
      ...this.entries.filter((e) => e.path !== path),
    ].slice(0, MAX_RECENT)
    return this.save()
  }

  clear(): Promise<void> {
    this.entries = []
    return this.save()
  }

  private save(): Promise<void> {
    return this.out.write(`${JSON.stringify(this.entries, null, 1)}\n`)
  }
}
