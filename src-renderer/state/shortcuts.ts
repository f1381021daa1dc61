// The keyboard shortcuts: what each key does (shortcut()) and the cheat sheet that lists them
// (views/ShortcutsHelp.svelte).
import type { AppState } from './app.svelte.ts'

export const SHORTCUTS: [string, string][] = [
  ['space', 'play / pause'],
  ['← / →', 'step one event (shift: 100)'],
  ['Home / End', 'first / last event'],
  ['p', 'jump to peak reserved'],
  ['f', 'next failure'],
  ['m / M', 'next / previous marker'],
  ['o', 'open a file'],
  ['t', 'light / dark theme'],
  ['/', 'search blocks (Enter / Shift+Enter: next / previous)'],
  ['e', 'export the view as PNG'],
  ['Esc', 'clear selection and range'],
  ['c / w', 'compare view / what-if lab'],
  ['?', 'this cheat sheet'],
]

/** What the window does for the keys that reach past the app's state: the file picker, the search field. */
export interface ShortcutActions {
  pick(): void
  focusSearch(): void
}

/** Does what `e`'s key is a shortcut for (and keeps it from the page), unless a text field or the scrubber keeps it. */
export function shortcut(app: AppState, actions: ShortcutActions, e: KeyboardEvent): void {
  const target = e.target as HTMLElement
  // Text fields keep every key; the scrubber keeps the keys it moves with, not the letters.
  const slider = target instanceof HTMLInputElement && target.type === 'range'
  if (!slider && target.closest('input, select, textarea')) return
  if (slider && e.key.length !== 1) return
  if (e.ctrlKey || e.metaKey || e.altKey) return
  switch (e.key) {
    case ' ':
      app.toggle()
      break
    case 'ArrowRight':
      app.step(e.shiftKey ? 100 : 1)
      break
    case 'ArrowLeft':
      app.step(e.shiftKey ? -100 : -1)
      break
    case 'Home':
      app.seek(0)
      break
    case 'End':
      app.seek(app.lastEvent)
      break
    case 'p':
      app.jumpToPeak()
      break
    case 'f':
      app.jumpToFailure()
      break
    case 'm':
      app.jumpToMarker(1)
      break
    case 'M':
      app.jumpToMarker(-1)
      break
    case '/':
      actions.focusSearch()
      break
    case 'e':
      app.exportView('png')
      break
    case 'o':
      actions.pick()
      break
    case 'c':
      app.view = 'compare'
      break
    case 'w':
      if (app.trace) app.view = 'whatif'
      break
    case 't':
      app.theme = app.theme === 'light' ? 'dark' : 'light'
      break
    case 'Escape':
      app.select(null)
      app.range = null
      app.showHelp = false
      app.showRecord = false
      break
    case '?':
      app.showHelp = !app.showHelp
      break
    default:
      return
  }
  e.preventDefault()
}
