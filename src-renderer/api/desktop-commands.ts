// What the desktop app's main process asks of a window (its menu; a worker process that died),
// through the preload's `app:command` subscription. In a browser (vramscope serve) there is no
// such subscription and nothing happens.
import type { AppCommand } from '../../src-shared/contract.ts'
import type { AppState } from '../state/app.svelte.ts'

type Subscribe = (listener: (command: AppCommand) => void) => () => void

/** Where each view of the menu's View list is on the page. */
const VIEW_SELECTORS: Record<Extract<AppCommand, { command: 'show' }>['view'], string> = {
  maps: '.maps',
  timeline: '.timeline',
  metrics: 'table.metrics',
  peak: 'section.peak',
  diff: 'section.diff',
}

export interface DesktopHandlers {
  exportView(format: 'png' | 'svg'): void
}

export function applyDesktopCommand(app: AppState, handlers: DesktopHandlers, command: AppCommand): void {
  switch (command.command) {
    case 'open':
      void app.openRecent(command.key)
      return
    case 'theme':
      app.theme = command.theme
      return
    case 'shortcuts':
      app.showHelp = true
      return
    case 'record':
      app.showRecord = true
      return
    case 'export':
      handlers.exportView(command.format)
      return
    case 'show':
      // Every view of the menu is part of the compare view: leave the what-if panel for it first.
      if (app.view !== 'compare') {
        app.view = 'compare'
        requestAnimationFrame(() => document.querySelector(VIEW_SELECTORS[command.view])?.scrollIntoView({ behavior: 'smooth', block: 'start' }))
        return
      }
      document.querySelector(VIEW_SELECTORS[command.view])?.scrollIntoView({ behavior: 'smooth', block: 'start' })
      return
    case 'error':
      app.job = null
      app.error = command.message
  }
}

/** Subscribes to the desktop app's commands; returns the unsubscribe (undefined in a browser). */
export function listenToDesktop(app: AppState, handlers: DesktopHandlers): (() => void) | undefined {
  const subscribe = (globalThis as { vramscope?: { 'app:command'?: Subscribe } }).vramscope?.['app:command']
  return subscribe?.((command) => applyDesktopCommand(app, handlers, command))
}
