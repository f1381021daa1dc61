// The desktop main process's own modules, without Electron: the recent-files list and window state
// on disk, the files a command line names, the menu's template, and the built worker entry
// (out/main/worker.js, what Electron's utilityProcess runs) serving the real native module.
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

import type { MenuItemConstructorOptions } from 'electron'

import type { AppCommand } from '../../../src-shared/contract.ts'
import { filesFromArgv } from '../../../src-main/main/launch.ts'
import { menuTemplate, RECORD_HELP, type MenuActions } from '../../../src-main/main/menu.ts'
import { MAX_RECENT, RecentFiles } from '../../../src-main/main/recent-files.ts'
import { DEFAULT_SIZE, fitToDisplays, WindowStateStore } from '../../../src-main/main/window-state.ts'
import { WorkerClient } from '../../../src-main/utility/client.ts'
import { forkNodeWorker } from '../../../src-main/utility/node-transport.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))

describe('desktop main-process modules', () => {
  let dir = ''
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vramscope-main-'))
  })
  after(() => rm(dir, { recursive: true, force: true }))

  test('recent files: newest first, one entry a path with a stable key, at most ten, saved and read back', async () => {
    let now = 1000
    const file = join(dir, 'recent.json')
    const recent = new RecentFiles(file, () => now++)
    await recent.load()
    assert.deepEqual(recent.list(), [], 'no file yet: an empty list')
    await recent.add('/data/a.vramscope')
    await recent.add('/data/b.pickle')
    const keyOfA = recent.list()[1]!.key
    await recent.add('/data/a.vramscope')
    assert.deepEqual(
      recent.list().map((r) => r.name),
      ['a.vramscope', 'b.pickle'],
    )
    assert.equal(recent.list()[0]!.key, keyOfA, 'reopening keeps the key')
    for (let i = 0; i < 15; i++) void recent.add(`/data/t${i}.vramscope`)
    await recent.add('/data/last.pickle')
    assert.equal(recent.list().length, MAX_RECENT)
    const again = new RecentFiles(file)
    await again.load()
    assert.deepEqual(again.paths(), recent.paths(), 'the last write wins on disk')
    assert.equal(again.pathOf(again.list()[0]!.key), '/data/last.pickle')
    await writeFile(file, '{ not json')
    await again.load()
    assert.deepEqual(again.list(), [], 'a garbled file reads as empty')
    await writeFile(file, JSON.stringify([{ path: 5 }, { path: '/x.pickle', key: 'k', name: 'x.pickle', openedAt: 1 }]))
    await again.load()
    assert.deepEqual(again.paths(), ['/x.pickle'], 'malformed entries are dropped')
  })

  test('window state: saved bounds come back on a display that still shows them, else centred on the first', async () => {
    const laptop = { x: 0, y: 0, width: 1920, height: 1080 }
    const external = { x: 1920, y: 0, width: 2560, height: 1440 }
    assert.deepEqual(fitToDisplays({ x: 2000, y: 100, width: 1600, height: 1000 }, [laptop, external]), { x: 2000, y: 100, width: 1600, height: 1000 })
    const unplugged = fitToDisplays({ x: 2000, y: 100, width: 1600, height: 1000 }, [laptop])
    assert.deepEqual(unplugged, { x: (1920 - DEFAULT_SIZE.width) / 2, y: (1080 - DEFAULT_SIZE.height) / 2, ...DEFAULT_SIZE })
    const tooBig = fitToDisplays({ x: -10, y: -10, width: 5000, height: 3000 }, [laptop])
    assert.deepEqual(tooBig, laptop, 'shrunk to the work area')
    const second = fitToDisplays(undefined, [laptop], 1)
    assert.equal(second.x - unplugged.x, 28, 'a second window is offset, not stacked')

    const file = join(dir, 'window.json')
    const store = new WindowStateStore(file, 10)
    assert.equal(await store.load(), undefined)
    store.update({ bounds: { x: 1, y: 2, width: 800, height: 600 }, maximized: false })
    store.update({ bounds: { x: 5, y: 6, width: 900, height: 700 }, maximized: true })
    await store.flush()
    assert.deepEqual(JSON.parse(await readFile(file, 'utf8')), { bounds: { x: 5, y: 6, width: 900, height: 700 }, maximized: true })
    assert.deepEqual(await new WindowStateStore(file).load(), { bounds: { x: 5, y: 6, width: 900, height: 700 }, maximized: true })
  })

  test('files from a command line: packaged, unpackaged (electron .), as Playwright launches it, and a second instance', () => {
    const cwd = '/home/u/work'
    assert.deepEqual(filesFromArgv(['/opt/vramscope/vramscope', 'run.vramscope', '/tmp/s.pickle'], { packaged: true, cwd }), [
      '/home/u/work/run.vramscope',
      '/tmp/s.pickle',
    ])
    assert.deepEqual(filesFromArgv(['electron', '.', 'resources/samples/a.pickle'], { packaged: false, cwd }), ['/home/u/work/resources/samples/a.pickle'])
    assert.deepEqual(
      filesFromArgv(['electron', '-r', '/pw/loader.js', '--inspect=0', '--remote-debugging-port=0', 'out', '/t/x.vramscope'], { packaged: false, cwd }),
      ['/t/x.vramscope'],
    )
    assert.deepEqual(filesFromArgv(['/opt/vramscope/vramscope', '--no-sandbox', '--allow-file-access-from-files'], { packaged: true, cwd }), [])
    assert.deepEqual(filesFromArgv(['electron', '.'], { packaged: false, cwd }), [])
  })

  test('menu: File (open, recent, export, record a workload), View (views, theme, zoom), Help (shortcuts, about)', () => {
    const calls: string[] = []
    const actions: MenuActions = {
      open: () => calls.push('open'),
      openRecent: (p) => calls.push(`recent ${p}`),
      clearRecent: () => calls.push('clear'),
      exportView: (f) => calls.push(`export ${f}`),
      show: (v) => calls.push(`show ${v}`),
      setTheme: (t) => calls.push(`theme ${t}`),
      shortcuts: () => calls.push('shortcuts'),
      record: () => calls.push('record'),
      about: () => calls.push('about'),
    }
    const template = menuTemplate({ platform: 'linux', recentPaths: ['/d/a.pickle'], theme: 'dark', hasTrace: true, packaged: true }, actions)
    const menu = (label: string) => template.find((m) => m.label === label || m.role === label)!.submenu as MenuItemConstructorOptions[]
    const item = (items: MenuItemConstructorOptions[], label: string) => items.find((i) => i.label === label)!
    const click = (i: MenuItemConstructorOptions) => (i.click as () => void)()
    const file = menu('File')
    click(item(file, 'Open…'))
    click(item(item(file, 'Open Recent').submenu as MenuItemConstructorOptions[], 'a.pickle'))
    click(item(file, 'Export View as PNG…'))
    const record = file.find((i) => i.id === 'record')!
    assert.notEqual(record.enabled, false)
    assert.equal(record.toolTip, RECORD_HELP)
    click(record)
    const view = menu('View')
    click(item(view, 'Timeline'))
    const theme = item(view, 'Theme').submenu as MenuItemConstructorOptions[]
    assert.equal(theme.find((t) => t.checked)!.label, 'Dark')
    click(item(theme, 'Light'))
    assert.deepEqual(
      view.filter((i) => i.role).map((i) => i.role),
      ['resetZoom', 'zoomIn', 'zoomOut', 'togglefullscreen'],
      'no developer tools in a packaged app',
    )
    const help = menu('help')
    click(item(help, 'Keyboard Shortcuts'))
    click(item(help, 'About vramscope'))
    assert.deepEqual(calls, ['open', 'recent /d/a.pickle', 'export png', 'record', 'show timeline', 'theme light', 'shortcuts', 'about'])

    const empty = menuTemplate({ platform: 'darwin', recentPaths: [], theme: 'system', hasTrace: false, packaged: false }, actions)
    assert.equal(empty[0]!.label, 'vramscope', 'macOS: the app menu first')
    const emptyFile = empty.find((m) => m.label === 'File')!.submenu as MenuItemConstructorOptions[]
    assert.equal(item(emptyFile, 'Export View as PNG…').enabled, false, 'nothing to export without a trace')
    assert.equal(item(item(emptyFile, 'Open Recent').submenu as MenuItemConstructorOptions[], 'No Recent Files').enabled, false)
    const shown: AppCommand['command'][] = ['open', 'theme', 'shortcuts', 'export', 'show', 'error']
    assert.ok(shown.length > 0)
  })

  test('the BUILT worker entry (what utilityProcess runs) loads the staged addon and opens a sample', async () => {
    const client = new WorkerClient({
      spawn: () =>
        forkNodeWorker({
          entry: join(ROOT, 'out', 'main', 'worker.js'),
          env: { ...process.env, VRAMSCOPE_ADDON: join(ROOT, 'out', 'native', 'vramscope.node') },
        }),
      init: { version: 'built', host: 'electron', samplesDir: join(ROOT, 'resources', 'samples') },
    })
    try {
      const info = await client.call('app:info', undefined)
      assert.ok(info.strategies.some((s) => s.name === 'buddy'))
      const { jobId } = await client.call('trace:openSample', { name: 'convnet_varimg.pickle' })
      let status = await client.call('job:status', { jobId })
      while (status.state === 'running') {
        await new Promise((r) => setTimeout(r, 20))
        status = await client.call('job:status', { jobId })
      }
      assert.equal(status.state, 'done', JSON.stringify(status.error))
    } finally {
      await client.close()
    }
  })
})
