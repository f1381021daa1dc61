// The layers of docs/architecture.md ("Layers"), checked on the sources, one rule a layer: the
// renderer (src-renderer/) never imports the Node side (src-main/), a Node built-in or the native
// addon; the shared code (src-shared/) imports neither side nor a Node built-in, and a package only
// as types, so both sides can use it; on the Node side only the loader (src-main/native.ts) loads
// the addon, the services (src-main/services/) import no transport, no Electron and no HTTP, the
// dispatcher (src-main/ipc/) no transport, and a transport another only as the docs say (main and
// the web host the worker's src-main/utility/, the CLI's serve command the web host). Each
// offending import is reported with its file and line; the checker itself is tested on made-up
// sources. What main's code reaches through its whole import graph is electron-security's test.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const SOURCE = /\.(ts|js|mjs|svelte)$/

interface Import {
  line: number
  specifier: string
  /** `import type` / `export type`: erased, so it carries no code at run time. */
  typeOnly: boolean
}

/** Every module a source names: static and dynamic imports, re-exports, require() calls. */
function importsOf(source: string): Import[] {
  const out: Import[] = []
  const patterns = [
    /^\s*(?:import|export)\s+(type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"\n]+)['"]/gm,
    /\bimport\(\s*()['"]([^'"\n]+)['"]\s*\)/g,
    /\brequire\(\s*()['"]([^'"\n]+)['"]\s*\)/g,
  ]
  for (const pattern of patterns)
    for (const match of source.matchAll(pattern))
      out.push({ line: source.slice(0, match.index).split('\n').length, specifier: match[2]!, typeOnly: match[1] !== undefined && match[1] !== '' })
  return out.sort((a, b) => a.line - b.line)
}

const NODE_BUILTINS = new Set(builtinModules)

/** The layers a rule is about: the two outside src-main/, and each folder of src-main/. */
type Layer = 'src-renderer' | 'src-shared' | 'loader' | 'services' | 'ipc' | 'main' | 'preload' | 'utility' | 'web' | 'cli'
const NODE_LAYERS = ['services', 'ipc', 'main', 'preload', 'utility', 'web', 'cli'] as const
const TRANSPORTS = ['main', 'preload', 'utility', 'web', 'cli'] as const

/** What a path of the repository is, as the rules name it. */
function placeOf(path: string): Layer | 'addon' | 'other' {
  const rel = relative(ROOT, path).split(sep).join('/')
  if (rel === 'src-main/native.ts') return 'loader'
  if (rel.startsWith('native/') || rel.startsWith('build/')) return 'addon'
  if (rel.startsWith('src-renderer/')) return 'src-renderer'
  if (rel.startsWith('src-shared/')) return 'src-shared'
  const folder = /^src-main\/([^/]+)\//.exec(rel)?.[1]
  return (NODE_LAYERS as readonly string[]).includes(folder ?? '') ? (folder as Layer) : 'other'
}

const HTTP = new Set(['http', 'https', 'http2'])

/** Why `file` may not import `imp`, or undefined if it may. */
function forbidden(file: string, imp: Import): string | undefined {
  const layer = placeOf(file)
  const { specifier } = imp
  const rel = relative(ROOT, file).split(sep).join('/')
  const builtin = specifier.startsWith('node:') || NODE_BUILTINS.has(specifier.split('/')[0]!)
  const bare = specifier.replace(/^node:/, '').split('/')[0]!
  const addon = specifier.endsWith('.node') || specifier === 'bindings'
  const resolved = specifier.startsWith('.') ? resolve(dirname(file), specifier) : undefined
  const target = resolved !== undefined ? placeOf(resolved) : undefined

  if (layer === 'src-renderer' || layer === 'src-shared') {
    if (builtin) return 'a Node built-in'
    if (addon || target === 'addon') return 'the native addon'
    if (resolved !== undefined && relative(ROOT, resolved).split(sep)[0] === 'src-main') return 'the Node side (src-main/)'
    if (layer === 'src-shared' && target === 'src-renderer') return 'the renderer (src-renderer/)'
    if (layer === 'src-shared' && target === undefined && !imp.typeOnly) return 'a package, other than its types (import type)'
    return undefined
  }
  if (layer === 'other' || layer === 'loader') return undefined

  // The Node side: only the loader loads the addon; its typings (native/index.d.ts) are types.
  if (addon || (target === 'addon' && !imp.typeOnly)) return 'the native addon, which only src-main/native.ts loads'
  if (target === 'src-renderer') return 'the renderer (src-renderer/)'
  const transport = (TRANSPORTS as readonly string[]).includes(target ?? '') ? target : undefined
  switch (layer) {
    case 'services':
      if (transport !== undefined || target === 'ipc') return `a transport (src-main/${target}/)`
      if (specifier === 'electron') return 'Electron'
      if (builtin && HTTP.has(bare)) return 'HTTP'
      return undefined
    case 'ipc':
      if (transport !== undefined) return `a transport (src-main/${target}/)`
      if (specifier === 'electron') return 'Electron'
      if (builtin && HTTP.has(bare)) return 'HTTP'
      return undefined
    case 'preload':
      if (target !== undefined && target !== 'src-shared' && target !== 'preload')
        return `src-main/${target === 'loader' ? 'native.ts' : `${target}/`} (the preload uses src-shared/ alone)`
      return undefined
    case 'main':
      if (transport !== undefined && transport !== 'main' && transport !== 'utility') return `another transport (src-main/${transport}/)`
      if (!imp.typeOnly && (target === 'services' || target === 'loader')) return 'the services or the loader (main runs no services)'
      return undefined
    case 'utility':
      if (transport !== undefined && transport !== 'utility') return `another transport (src-main/${transport}/)`
      if (specifier === 'electron') return 'Electron (the worker runs under plain Node for vramscope serve)'
      return undefined
    case 'web':
      if (transport !== undefined && transport !== 'web' && transport !== 'utility') return `another transport (src-main/${transport}/)`
      if (specifier === 'electron') return 'Electron'
      return undefined
    case 'cli':
      if (transport === 'web' && rel === 'src-main/cli/commands/serve.ts') return undefined
      if (transport !== undefined && transport !== 'cli')
        return `another transport (src-main/${transport}/)${transport === 'web' ? ': only the serve command starts the web host' : ''}`
      if (specifier === 'electron') return 'Electron'
      return undefined
  }
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && SOURCE.test(e.name))
    .map((e) => join(e.parentPath, e.name))
}

/** "src-renderer/x.ts:3 imports '../src-main/y.ts' (the Node side (src-main/))", one per offence. */
function offences(dir: string): string[] {
  const out: string[] = []
  for (const file of sourcesUnder(join(ROOT, dir)))
    for (const imp of importsOf(readFileSync(file, 'utf8'))) {
      const why = forbidden(file, imp)
      if (why) out.push(`${relative(ROOT, file)}:${imp.line} imports '${imp.specifier}' (${why})`)
    }
  return out
}

/** The sources of `dir` were found (a moved folder would make its rule pass on nothing). */
function found(dir: string, atLeast: number): void {
  const n = sourcesUnder(join(ROOT, dir)).length
  assert.ok(n >= atLeast, `${n} sources found under ${dir}, expected at least ${atLeast}`)
}

describe('architecture: who may import what', () => {
  it('the renderer imports nothing of src-main/, no Node built-in and not the native addon', () => {
    found('src-renderer', 10)
    assert.deepEqual(offences('src-renderer'), [])
  })

  it('src-shared/ imports neither src-main/ nor src-renderer/ nor a Node built-in, and packages only as types', () => {
    found('src-shared', 3)
    assert.deepEqual(offences('src-shared'), [])
  })

  it('services/ import no transport (ipc, web, main, utility, preload, cli), no Electron, no HTTP, and the addon only through the loader', () => {
    found('src-main/services', 30)
    assert.deepEqual(offences('src-main/services'), [])
  })

  it('the dispatcher (ipc/) imports no transport, no Electron and no HTTP', () => {
    found('src-main/ipc', 2)
    assert.deepEqual(offences('src-main/ipc'), [])
  })

  it('each transport imports another only as the docs say: main and web the worker (utility/), the CLI web only to serve', () => {
    for (const t of TRANSPORTS) found(`src-main/${t}`, 1)
    assert.deepEqual(
      TRANSPORTS.flatMap((t) => offences(`src-main/${t}`)),
      [],
    )
  })

  it('src-main/ loads the addon only in the loader (native.ts)', () => {
    const loader = join(ROOT, 'src-main', 'native.ts')
    assert.match(readFileSync(loader, 'utf8'), /vramscope\.node/, 'the loader names the addon')
    const others = sourcesUnder(join(ROOT, 'src-main')).filter((f) => f !== loader)
    const loads = others.flatMap((f) =>
      importsOf(readFileSync(f, 'utf8'))
        .filter((imp) => forbidden(f, imp)?.startsWith('the native addon'))
        .map((imp) => `${relative(ROOT, f)}:${imp.line}`),
    )
    assert.deepEqual(loads, [])
  })

  it('the check finds each kind of offending import and names its line', () => {
    const check = (file: string, lines: string[]) =>
      importsOf(lines.join('\n')).map((imp) => `${imp.line} ${imp.specifier}${imp.typeOnly ? ' (type)' : ''} ${forbidden(join(ROOT, file), imp) ?? 'allowed'}`)
    assert.deepEqual(
      check('src-renderer/viz/example.ts', [
        "// a comment that says from '../../src-main/x.ts' is not an import",
        "import { z } from 'zod'",
        "import type { AppSession } from '../../src-main/services/app-session.ts'",
        "import { readFile } from 'node:fs/promises'",
        "export * from '../../src-shared/bundle.ts'",
        "const path = await import('path')",
        "const addon = require('../../build/Release/vramscope.node')",
      ]),
      [
        '2 zod allowed',
        '3 ../../src-main/services/app-session.ts (type) the Node side (src-main/)',
        '4 node:fs/promises a Node built-in',
        '5 ../../src-shared/bundle.ts allowed',
        '6 path a Node built-in',
        '7 ../../build/Release/vramscope.node the native addon',
      ],
    )
    assert.deepEqual(
      check('src-shared/example.ts', [
        "import { x } from '../src-renderer/viz/model.ts'",
        "import { loadNative } from '../src-main/native.ts'",
        "import { y } from './layout.ts'",
        "import type { ZodType } from 'zod'",
        "import { string } from 'zod'",
      ]),
      [
        '1 ../src-renderer/viz/model.ts the renderer (src-renderer/)',
        '2 ../src-main/native.ts the Node side (src-main/)',
        '3 ./layout.ts allowed',
        '4 zod (type) allowed',
        '5 zod a package, other than its types (import type)',
      ],
    )
    assert.deepEqual(
      check('src-main/services/replay/example.ts', [
        "import type { Handlers } from '../../ipc/dispatch.ts'",
        "import { startWebHost } from '../../web/server.ts'",
        "import { WorkerClient } from '../../utility/client.ts'",
        "import { app } from 'electron'",
        "import { createServer } from 'node:http'",
        "import { request } from 'https'",
        "import { readFile } from 'node:fs/promises'",
        "import { loadNative } from '../../native.ts'",
        "import type { StrategyParams } from '../../../native/index.js'",
        "import { StrategyParams } from '../../../native/index.js'",
        "const addon = require('../../../build/Release/vramscope.node')",
        "import { ApiError } from '../../../src-shared/api-error.ts'",
        "import { jobs } from '../jobs.ts'",
      ]),
      [
        '1 ../../ipc/dispatch.ts (type) a transport (src-main/ipc/)',
        '2 ../../web/server.ts a transport (src-main/web/)',
        '3 ../../utility/client.ts a transport (src-main/utility/)',
        '4 electron Electron',
        '5 node:http HTTP',
        '6 https HTTP',
        '7 node:fs/promises allowed',
        '8 ../../native.ts allowed',
        '9 ../../../native/index.js (type) allowed',
        '10 ../../../native/index.js the native addon, which only src-main/native.ts loads',
        '11 ../../../build/Release/vramscope.node the native addon, which only src-main/native.ts loads',
        '12 ../../../src-shared/api-error.ts allowed',
        '13 ../jobs.ts allowed',
      ],
    )
    assert.deepEqual(
      check('src-main/ipc/example.ts', ["import { AppSession } from '../services/app-session.ts'", "import { WorkerSession } from '../web/worker-session.ts'"]),
      ['1 ../services/app-session.ts allowed', '2 ../web/worker-session.ts a transport (src-main/web/)'],
    )
    assert.deepEqual(
      check('src-main/cli/commands/export.ts', [
        "import { startWebHost } from '../../web/server.ts'",
        "import { WorkerClient } from '../../utility/client.ts'",
      ]),
      [
        '1 ../../web/server.ts another transport (src-main/web/): only the serve command starts the web host',
        '2 ../../utility/client.ts another transport (src-main/utility/)',
      ],
    )
    assert.deepEqual(check('src-main/cli/commands/serve.ts', ["import { startWebHost } from '../../web/server.ts'"]), ['1 ../../web/server.ts allowed'])
    assert.deepEqual(
      check('src-main/main/example.ts', [
        "import { WorkerClient } from '../utility/client.ts'",
        "import type { SessionOptions } from '../services/app-session.ts'",
        "import { AppSession } from '../services/app-session.ts'",
        "import { startWebHost } from '../web/server.ts'",
      ]),
      [
        '1 ../utility/client.ts allowed',
        '2 ../services/app-session.ts (type) allowed',
        '3 ../services/app-session.ts the services or the loader (main runs no services)',
        '4 ../web/server.ts another transport (src-main/web/)',
      ],
    )
    assert.deepEqual(check('src-main/utility/example.ts', ["import { app } from 'electron'", "import { x } from '../main/index.ts'"]), [
      '1 electron Electron (the worker runs under plain Node for vramscope serve)',
      '2 ../main/index.ts another transport (src-main/main/)',
    ])
    assert.deepEqual(check('src-main/web/example.ts', ["import { x } from '../utility/client.ts'", "import { y } from '../cli/main.ts'"]), [
      '1 ../utility/client.ts allowed',
      '2 ../cli/main.ts another transport (src-main/cli/)',
    ])
    assert.deepEqual(
      check('src-main/preload/example.ts', ["import { CHANNELS } from '../../src-shared/contract.ts'", "import { x } from '../ipc/dispatch.ts'"]),
      ['1 ../../src-shared/contract.ts allowed', '2 ../ipc/dispatch.ts src-main/ipc/ (the preload uses src-shared/ alone)'],
    )
  })
})
