// The boundaries of docs/architecture.md, checked on the sources: the renderer (src-renderer/) never
// imports the Node side (src-main/), a Node built-in or the native addon; the shared code
// (src-shared/) imports neither side nor a Node built-in, so both sides can use it. Each offending
// import is reported with its file and line; the checker itself is tested on made-up sources.
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
}

/** Every module a source names: static and dynamic imports, re-exports, require() calls. */
function importsOf(source: string): Import[] {
  const out: Import[] = []
  const patterns = [
    /^\s*(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"\n]+)['"]/gm,
    /\bimport\(\s*['"]([^'"\n]+)['"]\s*\)/g,
    /\brequire\(\s*['"]([^'"\n]+)['"]\s*\)/g,
  ]
  for (const pattern of patterns)
    for (const match of source.matchAll(pattern)) out.push({ line: source.slice(0, match.index).split('\n').length, specifier: match[1]! })
  return out.sort((a, b) => a.line - b.line)
}

const NODE_BUILTINS = new Set(builtinModules)

/** Why a file in `layer` may not import `specifier`, or undefined if it may. */
function forbidden(layer: 'src-renderer' | 'src-shared', file: string, specifier: string): string | undefined {
  if (specifier.startsWith('node:') || NODE_BUILTINS.has(specifier.split('/')[0]!)) return 'a Node built-in'
  if (specifier.endsWith('.node') || specifier === 'bindings') return 'the native addon'
  if (!specifier.startsWith('.')) return undefined
  const target = relative(ROOT, resolve(dirname(file), specifier))
    .split(sep)
    .join('/')
  if (target.startsWith('src-main/')) return 'the Node side (src-main/)'
  if (target.startsWith('native/') || target.startsWith('build/')) return 'the native addon'
  if (layer === 'src-shared' && target.startsWith('src-renderer/')) return 'the renderer (src-renderer/)'
  return undefined
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && SOURCE.test(e.name))
    .map((e) => join(e.parentPath, e.name))
}

/** "src-renderer/x.ts:3 imports '../src-main/y.ts' (the Node side (src-main/))", one per offence. */
function offences(layer: 'src-renderer' | 'src-shared'): string[] {
  const out: string[] = []
  for (const file of sourcesUnder(join(ROOT, layer)))
    for (const { line, specifier } of importsOf(readFileSync(file, 'utf8'))) {
      const why = forbidden(layer, file, specifier)
      if (why) out.push(`${relative(ROOT, file)}:${line} imports '${specifier}' (${why})`)
    }
  return out
}

describe('architecture: who may import what', () => {
  it('the renderer imports nothing of src-main/, no Node built-in and not the native addon', () => {
    assert.ok(sourcesUnder(join(ROOT, 'src-renderer')).length > 10, 'the renderer sources were found')
    assert.deepEqual(offences('src-renderer'), [])
  })

  it('src-shared/ imports neither src-main/ nor src-renderer/ nor a Node built-in', () => {
    assert.ok(sourcesUnder(join(ROOT, 'src-shared')).length > 3, 'the shared sources were found')
    assert.deepEqual(offences('src-shared'), [])
  })

  it('the check finds each kind of offending import and names its line', () => {
    const renderer = join(ROOT, 'src-renderer', 'viz', 'example.ts')
    const source = [
      "// a comment that says from '../../src-main/x.ts' is not an import",
      "import { z } from 'zod'",
      "import type { AppSession } from '../../src-main/services/app-session.ts'",
      "import { readFile } from 'node:fs/promises'",
      "export * from '../../src-shared/bundle.ts'",
      "const path = await import('path')",
      "const addon = require('../../build/Release/vramscope.node')",
    ].join('\n')
    const found = importsOf(source).map(({ line, specifier }) => `${line} ${specifier} ${forbidden('src-renderer', renderer, specifier) ?? 'allowed'}`)
    assert.deepEqual(found, [
      '2 zod allowed',
      '3 ../../src-main/services/app-session.ts the Node side (src-main/)',
      '4 node:fs/promises a Node built-in',
      '5 ../../src-shared/bundle.ts allowed',
      '6 path a Node built-in',
      '7 ../../build/Release/vramscope.node the native addon',
    ])
    const shared = join(ROOT, 'src-shared', 'example.ts')
    assert.equal(forbidden('src-shared', shared, '../src-renderer/viz/model.ts'), 'the renderer (src-renderer/)')
    assert.equal(forbidden('src-shared', shared, '../src-main/native.ts'), 'the Node side (src-main/)')
    assert.equal(forbidden('src-shared', shared, './layout.ts'), undefined)
  })
})
