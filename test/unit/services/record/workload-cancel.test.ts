// A recording's cancel, the parts that run without a GPU: the recorder process's stdin wiring
// (workload-child.ts cancelOnInput: a `cancel` line, or the pipe's end when the parent has gone,
// aborts the recording's controller) and the addon's check of spec.cancelFlag, which comes before
// it looks for a device. That a raised flag stops a run on the GPU is scripts/gpu/app-record-check.ts's.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { describe, it } from 'node:test'

import { loadNative } from '../../../../src-main/native.ts'
import { cancelOnInput } from '../../../../src-main/services/record/workload-child.ts'

/** Lets the stream deliver what was written (data and end events come on later ticks). */
const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('the recorder process cancels on its stdin', () => {
  it('aborts on a `cancel` line, even one split across writes, and not on other lines', async () => {
    const input = new PassThrough()
    const controller = new AbortController()
    cancelOnInput(input, controller)
    input.write('hello\n')
    input.write('canc')
    await settle()
    assert.equal(controller.signal.aborted, false, 'neither another line nor half a cancel aborts')
    input.write('el\n')
    await settle()
    assert.equal(controller.signal.aborted, true)
    assert.match((controller.signal.reason as Error).message, /cancelled/)
  })

  it('aborts when the stream ends without a word (the parent died), and when it is destroyed', async () => {
    for (const close of [(s: PassThrough) => s.end(), (s: PassThrough) => s.destroy()]) {
      const input = new PassThrough()
      const controller = new AbortController()
      cancelOnInput(input, controller)
      input.resume()
      await settle()
      assert.equal(controller.signal.aborted, false)
      close(input)
      await settle()
      assert.equal(controller.signal.aborted, true)
      assert.match((controller.signal.reason as Error).message, /parent process went/)
    }
  })

  it('no longer listens once told to stop (the recording has ended)', async () => {
    const input = new PassThrough()
    const controller = new AbortController()
    const stop = cancelOnInput(input, controller)
    stop()
    input.resume()
    input.write('cancel\n')
    input.end()
    await settle()
    assert.equal(controller.signal.aborted, false)
    assert.equal(input.listenerCount('data'), 0)
  })
})

describe("recordWorkload's spec.cancelFlag", () => {
  const native = loadNative()
  const spec = { workload: 'training', strategy: 'caching', strategyParams: {}, workloadParams: {}, device: 0, capacity: 0 }

  it('refuses anything but a flag made by cancelFlag(), naming spec.cancelFlag, before it looks for a GPU', () => {
    for (const bad of [{}, { __cancelFlag: true }, 1, 'cancel', null])
      assert.throws(
        () => native.recordWorkload({ ...spec, cancelFlag: bad as never }, () => {}),
        (e: Error & { code?: string }) =>
          e instanceof TypeError && e.code === 'INVALID_ARGUMENT' && /^spec\.cancelFlag must be a flag made by cancelFlag\(\)/.test(e.message),
        JSON.stringify(bad),
      )
  })

  it('takes a flag, raised or not, and goes on to run (or to say there is no GPU)', async (t) => {
    if (native.cudaDeviceAvailable().available) return t.skip('a GPU is here: scripts/gpu/app-record-check.ts checks a run that is cancelled')
    const flag = native.cancelFlag()
    native.raiseCancelFlag(flag)
    await assert.rejects(
      Promise.resolve().then(() => native.recordWorkload({ ...spec, cancelFlag: flag }, () => {})),
      (e: Error & { code?: string }) => e.code === (native.builtWithCuda() ? 'NO_CUDA_DEVICE' : 'UNSUPPORTED'),
    )
  })
})
