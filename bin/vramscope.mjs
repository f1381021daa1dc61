#!/usr/bin/env node
// The `vramscope` command with plain Node (no Electron, no build step): tsx compiles the CLI's
// TypeScript as it loads, scoped to this import so nothing else in the process is affected.
import { tsImport } from 'tsx/esm/api'

await tsImport('../src-main/cli/main.ts', import.meta.url)
