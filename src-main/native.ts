// The one place that loads the native addon. Everything else imports it from here (and uses it
// through src-main/services/), so there is one path, one error when it is missing, one cache.
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

import type * as Addon from '../native/index.js'

export type NativeAddon = typeof Addon

// Not named `require`: bundled for Electron (electron-vite), the ES module gets its own `require` shim.
const requireAddon = createRequire(import.meta.url)

/** Where the addon may be: $VRAMSCOPE_ADDON, else build/Release of this checkout. */
export function addonCandidates(): string[] {
  const fromEnv = process.env['VRAMSCOPE_ADDON']
  if (fromEnv) return [fromEnv]
  return [fileURLToPath(new URL('../build/Release/vramscope.node', import.meta.url))]
}

let cached: NativeAddon | undefined

export function loadNative(): NativeAddon {
  if (cached) return cached
  const candidates = addonCandidates()
  const found = candidates.find((path) => existsSync(path))
  if (!found) {
    throw new Error(
      `vramscope's native addon is not built (looked for ${candidates.join(', ')}). ` +
        'Run `npm install` in the repository: it builds native/ with cmake-js ' +
        '(needs CMake >= 3.24 and a C++17 compiler). `npm run build:addon` rebuilds it alone.',
    )
  }
  try {
    cached = requireAddon(found) as NativeAddon
  } catch (cause) {
    throw new Error(`vramscope's native addon at ${found} did not load: ${(cause as Error).message}. ` + 'Rebuild it with `npm run build:addon`.', { cause })
  }
  return cached
}
