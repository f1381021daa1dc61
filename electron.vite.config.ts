// Builds the desktop app into out/: main (out/main/index.js) with the worker process's entry beside
// it (out/main/worker.js), the sandboxed preload (out/preload/index.cjs: a sandboxed preload cannot
// be an ES module), and the renderer (out/renderer) with the same Vite settings as
// vite.renderer.config.ts (which keeps building dist/renderer for `vramscope serve`), plus the
// app's Content-Security-Policy as a <meta> in index.html. Main and preload bundle their
// dependencies, so the packaged app carries no node_modules: out/ is the whole app, staged with
// its own package.json and the native addon (out/native), and is what electron-builder packs.
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'

import { defineConfig } from 'electron-vite'
import type { Plugin } from 'vite'

import { CONTENT_SECURITY_POLICY } from './src-main/main/security.ts'
import renderer from './vite.renderer.config.ts'

const path = (p: string) => fileURLToPath(new URL(p, import.meta.url))

/** The CSP as the first thing in <head>, before any script or style the page names. */
function contentSecurityPolicyMeta(): Plugin {
  return {
    name: 'vramscope:csp-meta',
    transformIndexHtml: {
      order: 'post',
      handler: (html) => html.replace(/<head>/i, `<head>\n    <meta http-equiv="Content-Security-Policy" content="${CONTENT_SECURITY_POLICY}" />`),
    },
  }
}

/** Writes out/package.json and copies the addon to out/native, after main is built. */
function stageApp(): Plugin {
  return {
    name: 'vramscope:stage-app',
    apply: 'build',
    async closeBundle() {
      const root = JSON.parse(await readFile(path('./package.json'), 'utf8')) as Record<string, unknown>
      const staged = {
        name: root['name'],
        productName: 'vramscope',
        version: root['version'],
        description: root['description'],
        author: { name: 'vramscope developers' },
        license: root['license'] ?? 'UNLICENSED',
        type: 'module',
        main: 'main/index.js',
      }
      await writeFile(path('./out/package.json'), `${JSON.stringify(staged, null, 2)}\n`)
      await mkdir(path('./out/native'), { recursive: true })
      try {
        await copyFile(path('./build/Release/vramscope.node'), path('./out/native/vramscope.node'))
      } catch (e) {
        this.warn(`the native addon was not copied into out/native (${(e as Error).message}): run npm run build:addon`)
      }
    },
  }
}

export default defineConfig({
  main: {
    build: {
      outDir: path('./out/main'),
      externalizeDeps: false,
      sourcemap: true,
      // out/ also holds the staged package.json and native/: only main's own folder is emptied.
      emptyOutDir: true,
      rolldownOptions: {
        input: {
          index: path('./src-main/main/index.ts'),
          worker: path('./src-main/utility/worker.ts'),
        },
      },
    },
    plugins: [stageApp()],
  },
  preload: {
    build: {
      outDir: path('./out/preload'),
      externalizeDeps: false,
      rolldownOptions: {
        input: { index: path('./src-main/preload/index.ts') },
        output: { format: 'cjs', entryFileNames: '[name].cjs' },
      },
    },
  },
  renderer: {
    ...renderer,
    plugins: [...(renderer.plugins ?? []), contentSecurityPolicyMeta()],
    build: {
      ...renderer.build,
      outDir: path('./out/renderer'),
      rolldownOptions: { input: { index: path('./src-renderer/index.html') } },
    },
  },
})
