// The packaging configuration, checked offline: electron-builder loads electron-builder.yml as
// `npm run dist` would and validates it against its own schema (packaging itself downloads
// Electron and tools from outside the registries, so it cannot run in CI), then the fields this
// app depends on are checked against the files they name.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

import { FILE_TYPES } from '../../../src-main/main/launch.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const require = createRequire(import.meta.url)

type Config = Record<string, any>

const { getConfig, validateConfiguration } = require('app-builder-lib/out/util/config/config.js') as {
  getConfig(projectDir: string, configPath: string | null, fromOptions: Config | null): Promise<Config>
  validateConfiguration(config: Config, debugLogger: unknown): Promise<void>
}
const { DebugLogger, log } = require('builder-util') as { DebugLogger: new (enabled: boolean) => unknown; log: { stream: NodeJS.WritableStream } }
// electron-builder logs to stdout, which the test runner reads as its own protocol: to stderr instead.
log.stream = process.stderr

const packageJson = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>
  main: string
  devDependencies: Record<string, string>
}

/** The `--config.a.b=value` overrides of a script, as the object electron-builder merges. */
function overridesOf(script: string): Config {
  const out: Config = {}
  for (const [, path, value] of script.matchAll(/--config\.([\w.]+)=(\S+)/g)) {
    const keys = path!.split('.')
    let at = out
    for (const k of keys.slice(0, -1)) at = at[k] ??= {}
    at[keys.at(-1)!] = value === 'true' ? true : value === 'false' ? false : value
  }
  return out
}

describe('packaging (electron-builder.yml), validated offline', () => {
  test('electron-builder finds the configuration and its own schema accepts it, and the test variant', async () => {
    const config = await getConfig(ROOT, null, null)
    await validateConfiguration(config, new DebugLogger(false))
    const e2e = await getConfig(ROOT, null, overridesOf(packageJson.scripts['dist:e2e']!))
    await validateConfiguration(e2e, new DebugLogger(false))
    // The validator is live: a misspelt option is refused.
    await assert.rejects(
      validateConfiguration({ ...config, linux: { ...config['linux'], targets: ['deb'] } }, new DebugLogger(false)),
      /Invalid configuration object.*\n.*configuration\.linux/,
    )
  })

  test('Linux AppImage and deb, macOS and Windows targets are configured', async () => {
    const config = await getConfig(ROOT, null, null)
    assert.deepEqual(config['linux'].target, ['AppImage', 'deb'])
    assert.ok(config['mac'].target.length > 0 && config['win'].target.length > 0)
    assert.ok(config['linux'].maintainer, 'deb needs a maintainer')
    assert.ok(config['appId'] && config['productName'])
  })

  test('packs the staged app (out/), unpacks the native addon from asar, ships the samples as resources', async () => {
    const config = await getConfig(ROOT, null, null)
    assert.equal(config['directories'].app, 'out', 'out/ is the whole app, staged by electron-vite build')
    assert.notEqual(config['directories'].buildResources ?? 'build', 'build', 'build/ is the addon build folder, not build resources')
    assert.equal(config['asar'], true)
    const { minimatch } = require('minimatch') as { minimatch: (path: string, pattern: string) => boolean }
    assert.ok(
      (config['asarUnpack'] as string[]).some((p) => minimatch('native/vramscope.node', p)),
      'native/vramscope.node is unpacked',
    )
    assert.equal(config['npmRebuild'], false, 'the addon is Node-API: no rebuild against Electronʼs headers')
    const samples = (config['extraResources'] as { from: string; to: string }[]).find((r) => r.to === 'samples')
    assert.ok(samples && existsSync(join(ROOT, samples.from, 'samples.json')), 'the samples folder exists where extraResources takes it from')
    assert.ok(existsSync(join(ROOT, samples.from, 'transformer_varseq.pickle')))
    // What the app itself expects of the staged folder (electron.vite.config.ts writes it).
    const staged = JSON.parse(readFileSync(join(ROOT, 'out', 'package.json'), 'utf8')) as {
      main: string
      dependencies?: object
      author?: unknown
      description?: string
    }
    assert.ok(existsSync(join(ROOT, 'out', staged.main)), `out/${staged.main} is built`)
    assert.equal(staged.dependencies, undefined, 'nothing for electron-builder to copy from node_modules')
    assert.ok(staged.author && staged.description, 'deb and rpm need an author and a description')
    assert.ok(existsSync(join(ROOT, 'out', 'native', 'vramscope.node')), 'the addon is staged in out/native')
    assert.equal(join(ROOT, packageJson.main), join(ROOT, 'out', staged.main), 'package.json main (npm start, electron .) is the staged main')
  })

  test('file associations cover the file types the app opens', async () => {
    const config = await getConfig(ROOT, null, null)
    const associated = (config['fileAssociations'] as { ext: string; name: string }[]).map((a) => a.ext)
    assert.deepEqual(associated.sort(), FILE_TYPES.map((t) => t.ext).sort())
  })

  test('fuses are set for release; the test variant only lets an inspector attach (for Playwright)', async () => {
    const release = (await getConfig(ROOT, null, null))['electronFuses']
    assert.deepEqual(release, {
      runAsNode: false,
      enableCookieEncryption: true,
      enableNodeOptionsEnvironmentVariable: false,
      enableNodeCliInspectArguments: false,
      enableEmbeddedAsarIntegrityValidation: true,
      onlyLoadAppFromAsar: true,
      loadBrowserProcessSpecificV8Snapshot: false,
      grantFileProtocolExtraPrivileges: false,
    })
    const e2e = (await getConfig(ROOT, null, overridesOf(packageJson.scripts['dist:e2e']!)))['electronFuses']
    assert.deepEqual(e2e, { ...release, enableNodeCliInspectArguments: true })
    assert.match(packageJson.scripts['dist']!, /electron-builder/)
    assert.doesNotMatch(packageJson.scripts['dist']!, /--config\./, 'the release build takes the configuration as it is')
  })
})
