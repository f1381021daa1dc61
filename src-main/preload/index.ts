// The preload: the app's API (src-shared/contract.ts) as one method per channel on
// `window.vramscope`, and one subscribe method per event that returns its unsubscribe. The page
// never gets ipcRenderer, an IPC event or anything of Node; it runs sandboxed with context
// isolation, so only what is exposed here crosses.
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron'

import { BUNDLE_CHANNELS, CHANNELS, EVENTS, type Channel, type EventName, type Events } from '../../src-shared/contract.ts'

type Reply = { ok: true; value: unknown } | { ok: false; error: { code: string; message: string } }

async function invoke(channel: Channel, arg: unknown): Promise<unknown> {
  const reply = (await ipcRenderer.invoke(channel, arg)) as Reply
  if (!reply.ok) throw Object.assign(new Error(reply.error.message), { code: reply.error.code })
  // Bundles reach the page as one ArrayBuffer, which its decoder views without a copy.
  if (BUNDLE_CHANNELS.has(channel) && ArrayBuffer.isView(reply.value)) {
    const view = reply.value
    return view.buffer.slice(view.byteOffset, view.byteOffset + view.byteLength)
  }
  return reply.value
}

function subscribe<E extends EventName>(event: E, listener: (payload: Events[E]) => void): () => void {
  if (typeof listener !== 'function') throw new TypeError(`${event}: the listener must be a function`)
  // Only the payload is passed on: the IPC event would hand the page ipcRenderer itself.
  const forward = (_event: IpcRendererEvent, payload: Events[E]) => listener(payload)
  ipcRenderer.on(event, forward)
  return () => {
    ipcRenderer.removeListener(event, forward)
  }
}

const api: Record<string, unknown> = {}
for (const channel of CHANNELS) api[channel] = (arg?: unknown) => invoke(channel, arg)
for (const event of EVENTS) api[event] = (listener: (payload: Events[typeof event]) => void) => subscribe(event, listener)

contextBridge.exposeInMainWorld('vramscope', api)
