// The desktop app end to end, driven by Playwright's _electron: launch on the bundled sample,
// compare strategies, export the view, and check that the page really is sandboxed (no Node, only
// the preload's API). Runs wherever Electron's binary exists: the npm package's (`out/`, as
// `npm start` runs it) or a packaged test build named by VRAMSCOPE_ELECTRON (`npm run dist:e2e`,
// fuses set except the inspector one Playwright needs). Where there is none it skips, saying why.
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'

import { _electron, type ElectronApplication, type Page } from 'playwright-core'

import { CONTENT_SECURITY_POLICY, SECURE_WEB_PREFERENCES } from '../../src-main/main/security.ts'
import { ROOT, waitForCount } from './helpers.ts'

const SAMPLE = join(ROOT, 'resources', 'samples', 'transformer_varseq.pickle')
const PACKAGED = process.env['VRAMSCOPE_ELECTRON']

/** Why the desktop tests cannot run here, or undefined when they can. */
function electronSkipReason(): string | undefined {
  if (PACKAGED !== undefined) return existsSync(PACKAGED) ? undefined : `VRAMSCOPE_ELECTRON=${PACKAGED} does not exist`
  try {
    // electron's index.js returns the binary's path and throws when the binary was never fetched.
    const binary = createRequire(import.meta.url)('electron') as string
    if (!existsSync(binary)) return `the Electron binary ${binary} is missing`
  } catch (e) {
    return `no Electron binary (${(e as Error).message.split('\n')[0]}; ELECTRON_SKIP_BINARY_DOWNLOAD=${process.env['ELECTRON_SKIP_BINARY_DOWNLOAD'] ?? 'unset'}): fetch it with node node_modules/electron/install.js, or set VRAMSCOPE_ELECTRON to a build of npm run dist:e2e`
  }
  if (!existsSync(join(ROOT, 'out', 'main', 'index.js'))) return 'the desktop app is not built: npm run build:app'
  return undefined
}

const skip = electronSkipReason()
if (skip) console.log(`# desktop e2e skipped: ${skip}`)

// Each test carries the skip (not the describe): node:test counts skipped tests, not skipped suites,
// and npm test's closing line should show these as skipped.
describe('vramscope desktop app (Electron)', () => {
  let electronApp: ElectronApplication
  let page: Page
  let downloads = ''
  before(async () => {
    if (skip) return
    downloads = await mkdtemp(join(tmpdir(), 'vramscope-e2e-downloads-'))
    const env = { ...process.env, VRAMSCOPE_DOWNLOAD_DIR: downloads } as Record<string, string>
    electronApp =
      PACKAGED !== undefined
        ? await _electron.launch({ executablePath: PACKAGED, args: [SAMPLE], env })
        : await _electron.launch({ args: [ROOT, SAMPLE], cwd: ROOT, env })
    page = await electronApp.firstWindow()
  })
  after(async () => {
    if (skip) return
    await electronApp?.close()
    await rm(downloads, { recursive: true, force: true })
  })

  test('launches on the sample named on the command line, from app://, with a sandboxed page', { skip }, async () => {
    assert.match(page.url(), /^app:\/\/vramscope\/index\.html/)
    await page.locator('.map canvas').first().waitFor({ timeout: 90_000 })
    await waitForCount(page.locator('.map'), (n) => n >= 6)
    assert.match((await page.locator('.toolbar .file').textContent()) ?? '', /transformer_varseq\.pickle/)
    // The page sees the preload's API and nothing of Node or Electron.
    const exposed = await page.evaluate(() => {
      const g = globalThis as unknown as Record<string, unknown>
      return {
        api: Object.keys((g['vramscope'] as object) ?? {}),
        require: typeof g['require'],
        process: typeof g['process'],
        ipc: typeof (g['vramscope'] as Record<string, unknown>)?.['ipcRenderer'],
      }
    })
    assert.ok(exposed.api.includes('replay:start') && exposed.api.includes('app:command'))
    assert.deepEqual([exposed.require, exposed.process, exposed.ipc], ['undefined', 'undefined', 'undefined'])
  })

  test('the running window has the settings of security.ts: its web preferences, the CSP, the app:// page', { skip }, async () => {
    // What Electron reports it applied, not what main asked for (test/unit/main/electron-security.test.ts
    // tests those). getLastWebPreferences is left out of Electron's typings but still there.
    type Reporting = { getLastWebPreferences(): Record<string, unknown> | null }
    const applied = await electronApp.evaluate(({ BrowserWindow }) =>
      BrowserWindow.getAllWindows().map((w) => (w.webContents as unknown as Reporting).getLastWebPreferences()),
    )
    assert.ok(applied.length > 0, 'a window is open')
    for (const prefs of applied) {
      assert.ok(prefs, 'the window reports its web preferences')
      for (const [name, value] of Object.entries(SECURE_WEB_PREFERENCES)) {
        if (name === 'enableBlinkFeatures' && prefs[name] === undefined) continue // '' (none) may be reported as unset
        assert.equal(prefs[name], value, name)
      }
      assert.match(String(prefs['preload']), /preload[\\/]index\.cjs$/)
    }
    assert.match(page.url(), /^app:\/\/vramscope\//)
    const csp = await page.evaluate(() =>
      (globalThis as unknown as { document: { querySelector(s: string): { getAttribute(a: string): string | null } | null } }).document
        .querySelector('meta[http-equiv="Content-Security-Policy"]')
        ?.getAttribute('content'),
    )
    assert.equal(csp, CONTENT_SECURITY_POLICY)
  })

  test('compares three strategies: one map each and a metrics table with winners', { skip }, async () => {
    await page.locator('input[name="strategies"]').fill('caching:preset=pytorch,slab,buddy')
    await page.getByRole('button', { name: 'Replay' }).click()
    await waitForCount(page.locator('.map'), (n) => n === 4)
    const header = await page.locator('table.metrics thead th').allTextContents()
    for (const name of ['caching (pytorch)', 'slab', 'buddy'])
      assert.ok(
        header.some((h) => h.includes(name)),
        `${name} in ${header.join(' | ')}`,
      )
    assert.ok((await page.locator('table.metrics td.best').count()) > 0)
  })

  test('exports the view as PNG (from the page, and from the File menu)', { skip }, async () => {
    await page.getByRole('button', { name: 'PNG' }).click()
    const deadline = Date.now() + 30_000
    let files: string[] = []
    while (Date.now() < deadline && !(files = await readdir(downloads)).some((f) => f.endsWith('.png'))) await new Promise((r) => setTimeout(r, 100))
    const png = files.find((f) => f.endsWith('.png'))
    assert.ok(png, `a PNG was saved (found: ${files.join(', ') || 'nothing'})`)
    assert.ok((await stat(join(downloads, png))).size > 1000)
    await electronApp.evaluate(({ Menu }) => {
      const item = Menu.getApplicationMenu()!
        .items.find((i) => i.label === 'File')!
        .submenu!.items.find((i) => i.label === 'Export View as SVG…')!
      item.click()
    })
    const svgDeadline = Date.now() + 30_000
    while (Date.now() < svgDeadline && !(await readdir(downloads)).some((f) => f.endsWith('.svg'))) await new Promise((r) => setTimeout(r, 100))
    assert.ok(
      (await readdir(downloads)).some((f) => f.endsWith('.svg')),
      'the menu’s export reached the page',
    )
  })

  test('navigation away and new windows are refused', { skip }, async () => {
    const before = electronApp.windows().length
    await page.evaluate(() => {
      const g = globalThis as unknown as { open(url: string, target: string): unknown; location: { href: string } }
      g.open('https://example.com/', '_blank')
      g.location.href = 'https://example.com/'
    })
    await new Promise((r) => setTimeout(r, 500))
    assert.equal(electronApp.windows().length, before)
    assert.match(page.url(), /^app:\/\/vramscope\//)
  })
})
