// Builds the renderer (src-renderer/, Svelte 5) into dist/renderer: what `vramscope serve` serves
// and, with the desktop shell, what Electron loads. Relative asset paths so either can host it.
import { svelte } from '@sveltejs/vite-plugin-svelte'
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vite'

const root = fileURLToPath(new URL('./src-renderer', import.meta.url))

export default defineConfig({
  root,
  base: './',
  plugins: [svelte()],
  build: {
    outDir: fileURLToPath(new URL('./dist/renderer', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    chunkSizeWarningLimit: 1024,
  },
  worker: { format: 'es' },
})
