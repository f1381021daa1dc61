// The application menu as a template built from plain data (recent paths, theme, platform) and
// callbacks, so it is tested without Electron. File: open, open recent, export, record; View: the
// views, theme, zoom; Help: shortcuts, about.
import { basename } from 'node:path'

import type { MenuItemConstructorOptions } from 'electron'

import type { AppCommand } from '../../src-shared/contract.ts'

export type ThemeChoice = 'system' | 'light' | 'dark'
export type ViewName = Extract<AppCommand, { command: 'show' }>['view']

/** What File › Record does, and how to record what it cannot (shown in its tooltip and the About box). */
export const RECORD_HELP =
  'File › Record runs a built-in GPU workload on this machine (it needs an NVIDIA GPU and driver). To record any CUDA program use `vramscope record -o run.vramscope -- PROGRAM` on the GPU machine (or PyTorch’s torch.cuda.memory._dump_snapshot, or RMM logging), then open the file here.'

export interface MenuContext {
  platform: NodeJS.Platform
  /** Full paths, newest first. */
  recentPaths: readonly string[]
  theme: ThemeChoice
  /** The focused window shows a trace (export needs one). */
  hasTrace: boolean
  /** Developer tools only outside packaged builds. */
  packaged: boolean
}

export interface MenuActions {
  open(): void
  openRecent(path: string): void
  clearRecent(): void
  exportView(format: 'png' | 'svg'): void
  show(view: ViewName): void
  setTheme(theme: ThemeChoice): void
  shortcuts(): void
  record(): void
  about(): void
}

const VIEWS: [ViewName, string, string][] = [
  ['maps', 'Memory Maps', 'CmdOrCtrl+1'],
  ['timeline', 'Timeline', 'CmdOrCtrl+2'],
  ['metrics', 'Metrics Table', 'CmdOrCtrl+3'],
  ['peak', 'Peak View', 'CmdOrCtrl+4'],
  ['diff', 'Diff', 'CmdOrCtrl+5'],
]

export function menuTemplate(context: MenuContext, actions: MenuActions): MenuItemConstructorOptions[] {
  const mac = context.platform === 'darwin'
  const recent: MenuItemConstructorOptions[] =
    context.recentPaths.length === 0
      ? [{ label: 'No Recent Files', enabled: false }]
      : [
          ...context.recentPaths.map((path): MenuItemConstructorOptions => ({ label: basename(path), toolTip: path, click: () => actions.openRecent(path) })),
          { type: 'separator' },
          { label: 'Clear Recent', click: () => actions.clearRecent() },
        ]
  const file: MenuItemConstructorOptions = {
    label: 'File',
    submenu: [
      { label: 'Open…', accelerator: 'CmdOrCtrl+O', click: () => actions.open() },
      { label: 'Open Recent', submenu: recent },
      { type: 'separator' },
      { label: 'Export View as PNG…', accelerator: 'CmdOrCtrl+E', enabled: context.hasTrace, click: () => actions.exportView('png') },
      { label: 'Export View as SVG…', accelerator: 'CmdOrCtrl+Shift+E', enabled: context.hasTrace, click: () => actions.exportView('svg') },
      { type: 'separator' },
      { id: 'record', label: 'Record a GPU Workload…', toolTip: RECORD_HELP, click: () => actions.record() },
      { type: 'separator' },
      mac ? { role: 'close' } : { role: 'quit' },
    ],
  }
  const themes: [ThemeChoice, string][] = [
    ['system', 'System'],
    ['light', 'Light'],
    ['dark', 'Dark'],
  ]
  const view: MenuItemConstructorOptions = {
    label: 'View',
    submenu: [
      ...VIEWS.map(([name, label, accelerator]): MenuItemConstructorOptions => ({
        label,
        accelerator,
        enabled: context.hasTrace,
        click: () => actions.show(name),
      })),
      { type: 'separator' },
      {
        label: 'Theme',
        submenu: themes.map(([theme, label]): MenuItemConstructorOptions => ({
          label,
          type: 'radio',
          checked: context.theme === theme,
          click: () => actions.setTheme(theme),
        })),
      },
      { type: 'separator' },
      { role: 'resetZoom' },
      { role: 'zoomIn' },
      { role: 'zoomOut' },
      { type: 'separator' },
      { role: 'togglefullscreen' },
      ...(context.packaged ? [] : [{ role: 'toggleDevTools' } as MenuItemConstructorOptions]),
    ],
  }
  const help: MenuItemConstructorOptions = {
    role: 'help',
    submenu: [
      { label: 'Keyboard Shortcuts', accelerator: 'CmdOrCtrl+/', click: () => actions.shortcuts() },
      ...(mac ? [] : [{ type: 'separator' } as MenuItemConstructorOptions, { label: 'About vramscope', click: () => actions.about() }]),
    ],
  }
  const macApp: MenuItemConstructorOptions = {
    label: 'vramscope',
    submenu: [
      { label: 'About vramscope', click: () => actions.about() },
      { type: 'separator' },
      { role: 'hide' },
      { role: 'hideOthers' },
      { role: 'unhide' },
      { type: 'separator' },
      { role: 'quit' },
    ],
  }
  return [...(mac ? [macApp] : []), file, { role: 'editMenu' }, view, ...(mac ? [{ role: 'windowMenu' } as MenuItemConstructorOptions] : []), help]
}
