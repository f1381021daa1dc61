// The desktop app's main process: windows (one per trace), the menu, files from the command line,
// the OS and the Open dialog, recent files and window state, and the IPC that routes the preload's
// calls to the worker process hosting the native module. It never blocks: files are read
// asynchronously, and reading and replaying traces happen in the worker (a utility process), so
// a crash there never takes the app down.
import { readFile } from 'node:fs/promises'
import { basename, dirname, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

import { app, BrowserWindow, dialog, ipcMain, Menu, nativeTheme, protocol, screen, session, type IpcMainInvokeEvent } from 'electron'

import { CHANNELS, type AppCommand } from '../../src-shared/contract.ts'
import { WorkerClient } from '../utility/client.ts'
import { forkElectronWorker } from './electron-worker.ts'
import { IpcRouter, type SenderInfo } from './ipc-router.ts'
import { filesFromArgv, OPEN_DIALOG_EXTENSIONS } from './launch.ts'
import { menuTemplate, RECORD_HELP, type ThemeChoice } from './menu.ts'
import { RecentFiles } from './recent-files.ts'
import { APP_SCHEME, appProtocolHandler, denyAllPermissions, devServerUrlOf, pageUrl, secureApp, secureWebPreferences } from './security.ts'
import { fitToDisplays, MIN_SIZE, WindowStateStore } from './window-state.ts'

const HERE = dirname(fileURLToPath(import.meta.url))
const RENDERER_DIR = join(HERE, '..', 'renderer')
const PRELOAD = join(HERE, '..', 'preload', 'index.cjs')
const WORKER_ENTRY = join(HERE, 'worker.js')
const DEV_SERVER_URL = devServerUrlOf(app.isPackaged, process.env)

/**
 * out/ is the app as packaged (out/package.json, out/native): the addon sits beside main, unpacked
 * from app.asar when packaged (a .node file cannot be loaded from inside an archive). The samples
 * are extraResources when packaged, the checkout's resources/ when run from out/.
 */
const ADDON = join(HERE, '..', 'native', 'vramscope.node').replace(`app.asar${sep}`, `app.asar.unpacked${sep}`)
const SAMPLES_DIR = app.isPackaged ? join(process.resourcesPath, 'samples') : join(HERE, '..', '..', 'resources', 'samples')
/** The PyTorch hook that record --pytorch puts on a program's PYTHONPATH (electron-builder.yml's extraResources). */
const PYTORCH_HOOK_DIR = app.isPackaged ? join(process.resourcesPath, 'pytorch') : join(HERE, '..', '..', 'resources', 'pytorch')

// Before ready: app:// privileged, every renderer sandboxed, every web contents held to the app's pages.
secureApp(app, protocol, DEV_SERVER_URL)

if (!app.requestSingleInstanceLock()) app.quit()

const recent = new RecentFiles(join(app.getPath('userData'), 'recent-files.json'))
const windowState = new WindowStateStore(join(app.getPath('userData'), 'window-state.json'))
let theme: ThemeChoice = 'system'
/** Files the OS asked to open before the app was ready (macOS open-file). */
const pendingFiles: string[] = []
let ready = false

const worker = new WorkerClient({
  spawn: () => forkElectronWorker(WORKER_ENTRY, { ...process.env, VRAMSCOPE_ADDON: ADDON }),
  // The worker is a utility process of its own: it records in place, and a CUDA fault there ends
  // only it (main reports it and starts a fresh one).
  init: {
    version: app.getVersion(),
    host: 'electron',
    samplesDir: SAMPLES_DIR,
    recordInProcess: true,
    // The page is the user's own window: the Record panel may start a program (record --pytorch).
    recordCommands: true,
    pytorchHookDir: PYTORCH_HOOK_DIR,
    recordingsDir: join(app.getPath('userData'), 'recordings'),
  },
  onCrash: (error) => broadcast({ command: 'error', message: error.message }),
})

const router = new IpcRouter({
  worker,
  recent,
  ...(DEV_SERVER_URL !== undefined && { devServerUrl: DEV_SERVER_URL }),
  onOpened: (_windowId, path) => {
    if (path !== undefined) app.addRecentDocument(path)
    updateMenu()
  },
  log: (message) => console.error(`vramscope: ${message}`),
})

function send(window: BrowserWindow | null | undefined, command: AppCommand): void {
  if (window && !window.isDestroyed()) window.webContents.send('app:command', command)
}

function broadcast(command: AppCommand): void {
  for (const window of BrowserWindow.getAllWindows()) send(window, command)
}

function focused(): BrowserWindow | undefined {
  return BrowserWindow.getFocusedWindow() ?? BrowserWindow.getAllWindows()[0]
}

function senderOf(event: IpcMainInvokeEvent): SenderInfo {
  const frame = event.senderFrame
  const window = BrowserWindow.fromWebContents(event.sender)
  return { windowId: window?.id, frameUrl: frame?.url ?? '', isMainFrame: frame !== null && frame === event.sender.mainFrame }
}

function createWindow(initialFile?: string): BrowserWindow {
  const saved = windowState.current
  const windows = BrowserWindow.getAllWindows().length
  const bounds = fitToDisplays(
    saved?.bounds,
    screen.getAllDisplays().map((d) => d.workArea),
    windows,
  )
  const window = new BrowserWindow({
    ...bounds,
    minWidth: MIN_SIZE.width,
    minHeight: MIN_SIZE.height,
    show: false,
    title: 'vramscope',
    backgroundColor: nativeTheme.shouldUseDarkColors ? '#16181d' : '#ffffff',
    webPreferences: secureWebPreferences(PRELOAD),
  })
  const id = window.id
  if (initialFile !== undefined) {
    router.setInitialFile(id, initialFile)
    // The worker opens the file and replays its first maps while the window loads its page, whose
    // own open of it then takes that job (AppSession.prefetchPath).
    void worker.session({ op: 'prefetchPath', path: initialFile }).catch(() => {})
  }
  if (saved?.maximized && windows === 0) window.maximize()
  window.once('ready-to-show', () => window.show())
  const remember = () => {
    if (!window.isDestroyed() && !window.isMinimized()) windowState.update({ bounds: window.getNormalBounds(), maximized: window.isMaximized() })
  }
  for (const event of ['resize', 'move', 'maximize', 'unmaximize'] as const) window.on(event as 'resize', remember)
  window.on('focus', updateMenu)
  window.on('closed', () => router.forgetWindow(id))
  void window.loadURL(pageUrl(DEV_SERVER_URL))
  return window
}

/** Each file in its own window, except that an empty focused window takes the first one. */
function openFiles(paths: readonly string[]): void {
  if (!ready) {
    pendingFiles.push(...paths)
    return
  }
  for (const [i, path] of paths.entries()) {
    const target = focused()
    if (i === 0 && target && !router.hasTrace(target.id) && !target.webContents.isLoading()) {
      send(target, { command: 'open', key: router.choose(path) })
      target.focus()
    } else createWindow(path)
  }
}

async function showOpenDialog(): Promise<void> {
  const parent = focused()
  const options: Electron.OpenDialogOptions = {
    title: 'Open a trace or snapshot',
    properties: ['openFile', 'multiSelections'],
    filters: [
      { name: 'Traces, PyTorch snapshots, profiler traces, Nsight Systems exports, Umpire and RMM logs', extensions: OPEN_DIALOG_EXTENSIONS },
      { name: 'All files', extensions: ['*'] },
    ],
  }
  const picked = parent ? await dialog.showOpenDialog(parent, options) : await dialog.showOpenDialog(options)
  if (!picked.canceled) openFiles(picked.filePaths)
}

async function showAbout(): Promise<void> {
  // The statement comes from the worker, so main loads none of the services' code.
  const privacy = await worker.call('app:info', undefined).then(
    (info) => info.privacy,
    (e: Error) => `(the worker process did not answer: ${e.message})`,
  )
  const detail = [
    privacy,
    '',
    `Electron ${process.versions.electron} · Chromium ${process.versions.chrome} · Node ${process.versions.node}`,
    '',
    RECORD_HELP,
  ].join('\n')
  const parent = focused()
  const options = { type: 'info' as const, title: 'About vramscope', message: `vramscope ${app.getVersion()}`, detail, buttons: ['OK'] }
  if (parent) await dialog.showMessageBox(parent, options)
  else await dialog.showMessageBox(options)
}

function currentTheme(): 'light' | 'dark' {
  return nativeTheme.shouldUseDarkColors ? 'dark' : 'light'
}

function updateMenu(): void {
  const window = focused()
  const template = menuTemplate(
    { platform: process.platform, recentPaths: recent.paths(), theme, hasTrace: window !== undefined && router.hasTrace(window.id), packaged: app.isPackaged },
    {
      open: () => void showOpenDialog(),
      openRecent: (path) => openFiles([path]),
      clearRecent: () => {
        app.clearRecentDocuments()
        void recent.clear().then(updateMenu)
      },
      exportView: (format) => send(focused(), { command: 'export', format }),
      record: () => send(focused(), { command: 'record' }),
      show: (view) => send(focused(), { command: 'show', view }),
      setTheme: (choice) => {
        theme = choice
        nativeTheme.themeSource = choice
        broadcast({ command: 'theme', theme: currentTheme() })
        updateMenu()
      },
      shortcuts: () => send(focused(), { command: 'shortcuts' }),
      about: () => void showAbout(),
    },
  )
  Menu.setApplicationMenu(Menu.buildFromTemplate(template))
}

app.on('second-instance', (_event, argv, cwd) => {
  const files = filesFromArgv(argv, { packaged: app.isPackaged, cwd })
  if (files.length > 0) openFiles(files)
  else focused()?.focus()
})

// macOS: a file opened from Finder or dropped on the Dock icon.
app.on('open-file', (event, path) => {
  event.preventDefault()
  openFiles([path])
})

app.on('window-all-closed', () => {
  if (process.platform !== 'darwin') app.quit()
})

app.on('activate', () => {
  if (ready && BrowserWindow.getAllWindows().length === 0) createWindow()
})

app.on('before-quit', () => {
  void windowState.flush()
  void worker.close()
})

nativeTheme.on('updated', () => {
  if (theme === 'system') broadcast({ command: 'theme', theme: currentTheme() })
})

async function start(): Promise<void> {
  await app.whenReady()
  await Promise.all([recent.load(), windowState.load()])
  denyAllPermissions(session.defaultSession)
  // Exports are downloads: a save dialog asks where, unless a test run names a folder for them.
  const downloadDir = process.env['VRAMSCOPE_DOWNLOAD_DIR']
  if (downloadDir) session.defaultSession.on('will-download', (_event, item) => item.setSavePath(join(downloadDir, basename(item.getFilename()))))
  protocol.handle(APP_SCHEME, appProtocolHandler(RENDERER_DIR, readFile))
  for (const channel of CHANNELS) ipcMain.handle(channel, (event, payload: unknown) => router.handle(senderOf(event), channel, payload))
  ready = true
  updateMenu()
  const files = [...filesFromArgv(process.argv, { packaged: app.isPackaged, cwd: process.cwd() }), ...pendingFiles.splice(0)]
  if (files.length === 0) createWindow()
  else for (const file of files) createWindow(file)
}

void start().catch((e: Error) => {
  dialog.showErrorBox('vramscope could not start', e.stack ?? e.message)
  app.exit(1)
})
