#!/usr/bin/env node
// The `vramscope` command with plain Node (no Electron, no build step): tsx compiles the CLI's
// TypeScript as it loads, scoped to this import so nothing else in the process is affected.
import { availableParallelism } from 'node:os'

import { tsImport } from 'tsx/esm/api'

// The what-if lab runs a replay a core at once on libuv's thread pool, four threads unless sized
// before the pool's first use, which is now (src-main/utility/worker-env.ts says the same for the
// workers); a size the user set stays.
process.env.UV_THREADPOOL_SIZE ??= String(Math.min(1024, Math.max(4, availableParallelism())))

await tsImport('../src-main/cli/main.ts', import.meta.url)
