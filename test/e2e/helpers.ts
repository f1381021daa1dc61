// What the end-to-end tests share: the real `vramscope serve` started as a user starts it (the
// bin script, a free port, the printed URL) and Debian's Chromium driven by Playwright. Where no
// Chromium is installed the tests skip and say why.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

import { chromium, type Browser, type Page } from 'playwright-core'

export const ROOT = join(import.meta.dirname, '..', '..')
/** Where the tests put their screenshots (look at them). */
export const OUTPUT = join(ROOT, 'test', 'e2e', 'output')
export const CHROMIUM = process.env['VRAMSCOPE_CHROMIUM'] ?? '/usr/bin/chromium'
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--no-first-run',
  '--disable-sync',
]

/** Why the browser tests cannot run here, or undefined when they can. */
export function browserSkipReason(): string | undefined {
  return existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set VRAMSCOPE_CHROMIUM)`
}

export interface Served {
  url: string
  process: ChildProcess
  /** The file it serves, where one was extracted for it (serveSuiteSnapshot), until stop(). */
  file?: string
  stop(): Promise<void>
}

/** Starts `vramscope serve [file]` and resolves with its URL once it prints it. */
export async function serve(args: string[] = []): Promise<Served> {
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'vramscope.mjs'), 'serve', '--json', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()))
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! })
    lines.once('line', (line) => {
      try {
        resolve((JSON.parse(line) as { url: string }).url)
      } catch {
        reject(new Error(`vramscope serve printed ${line}\n${stderr}`))
      }
    })
    child.once('exit', (code) => reject(new Error(`vramscope serve exited ${code} before printing its URL:\n${stderr}`)))
  })
  return {
    url,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve()
        child.once('exit', () => resolve())
        child.kill('SIGTERM')
      }),
  }
}

/**
 * `vramscope serve` on one snapshot of the what-if data set (test/fixtures/pytorch/whatif-suite.tar.gz:
 * real H100 runs recorded with PyTorch's default stacks), taken out to a folder of its own that
 * stop() removes with the server.
 */
export async function serveSuiteSnapshot(name: string): Promise<Served> {
  const dir = mkdtempSync(join(tmpdir(), 'vramscope-e2e-suite-'))
  try {
    execFileSync('tar', ['xzf', join(ROOT, 'test', 'fixtures', 'pytorch', 'whatif-suite.tar.gz'), '-C', dir, `whatif/${name}`])
    const file = join(dir, 'whatif', name)
    const served = await serve([file])
    return {
      ...served,
      file,
      stop: async () => {
        await served.stop()
        rmSync(dir, { recursive: true, force: true })
      },
    }
  } catch (e) {
    rmSync(dir, { recursive: true, force: true })
    throw e
  }
}

export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
}

/**
 * Waits until `count()` satisfies `ok`. (Playwright's waitForFunction evaluates code in the page,
 * which the app's CSP forbids, as it should: polling a locator needs no eval.)
 */
export async function waitForCount(locator: { count(): Promise<number> }, ok: (n: number) => boolean, timeoutMs = 60_000): Promise<number> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const n = await locator.count()
    if (ok(n)) return n
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms; the count is still ${n}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** A served app in a fresh browser page: what each e2e file starts from. */
export interface OpenedApp {
  served: Served
  browser: Browser
  page: Page
  /** Uncaught errors of the page, for a last test to assert there were none. */
  pageErrors: string[]
  close(): Promise<void>
}

export async function openApp(viewport = { width: 1500, height: 1000 }): Promise<OpenedApp> {
  mkdirSync(OUTPUT, { recursive: true })
  const served = await serve()
  const browser = await launchBrowser()
  const page = await browser.newPage({ viewport })
  const pageErrors: string[] = []
  page.on('pageerror', (e) => pageErrors.push(e.message))
  await page.goto(served.url)
  return {
    served,
    browser,
    page,
    pageErrors,
    async close() {
      await browser.close()
      await served.stop()
    },
  }
}

/** The event the playhead is at, as the toolbar shows it. */
export async function eventPosition(page: Page): Promise<number> {
  const text = await page.getByTestId('event-position').textContent()
  return Number(/event ([\d,]+)/.exec(text ?? '')![1]!.replaceAll(',', ''))
}
