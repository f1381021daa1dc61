// The frame filter (src-shared/frames.ts) on frames as PyTorch records them and on the stacks of
// real snapshots recorded with the default stacks: the unwinder, allocator, dispatcher and
// interpreter frames are hidden, the user's Python frame names the stack.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'

import { classifyFrame, collapseRepeats, frameLabel, shortName, StackFilter, stackLabel, type FrameLike } from '../../../src-shared/frames.ts'
import { openInput } from '../../../src-main/services/import/open-input.ts'
import { realSnapshot } from '../../helpers/real-snapshots.ts'

const f = (name: string, filename: string, line = 0): FrameLike => ({ name, filename, line })

describe('frame classification', () => {
  const cases: [FrameLike, string][] = [
    [f('torch::unwind::unwind()', 'torch/lib/libtorch_cpu.so', 107658604), 'unwinder'],
    [f('torch::CapturedTraceback::gather(bool, bool, bool)', 'torch/lib/libtorch_cpu.so'), 'unwinder'],
    [f('??', 'torch/lib/libc10_cuda.so', 273026), 'allocator'],
    [f('c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)', '??'), 'allocator'],
    [
      f(
        'at::detail::empty_cuda(c10::ArrayRef<long>, c10::ScalarType, std::optional<c10::Device>, std::optional<c10::MemoryFormat>)',
        'torch/lib/libtorch_cuda.so',
      ),
      'allocator',
    ],
    [f('at::_ops::empty_memory_format::call(c10::ArrayRef<c10::SymInt>)', 'torch/lib/libtorch_cpu.so'), 'dispatcher'],
    [f('c10::impl::BoxedKernelWrapper<at::Tensor ()>::call', '??'), 'dispatcher'],
    [f('at::(anonymous namespace)::wrapper_CUDA_mm(at::Tensor const&, at::Tensor const&)', 'RegisterCUDA.cpp'), 'dispatcher'],
    [f('torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)', 'torch/lib/libtorch_cpu.so'), 'autograd'],
    [f('_PyEval_EvalFrameDefault', 'python3.12', 6123790), 'interpreter'],
    [f('??', 'python3.12', 5775726), 'interpreter'],
    [f('PyObject_Call', 'Objects/call.c'), 'interpreter'],
    [f('__libc_start_main', 'libc.so.6'), 'libc'],
    [f('_start', 'python3.12'), 'libc'],
    [f('??', 'torch/lib/libtorch_cuda.so', 61877070), 'unknown'],
    [f('at::native::layer_norm_cuda(at::Tensor const&, c10::ArrayRef<long>)', 'torch/lib/libtorch_cuda.so'), 'cpp'],
    [f('torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)', 'torch/lib/libtorch_cpu.so'), 'cpp'],
    [f('_call_impl', 'torch/nn/modules/module.py', 1790), 'wrapper'],
    [f('_wrapped_call_impl', '/opt/venv/lib/python3.12/site-packages/torch/nn/modules/module.py', 1779), 'wrapper'],
    [f('forward', 'torch/nn/modules/linear.py', 134), 'torch'],
    [f('forward', '/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py', 134), 'torch'],
    [f('forward', 'transformers/models/gpt2/modeling_gpt2.py', 619), 'library'],
    [f('forward', '/home/me/.local/lib/python3.11/site-packages/timm/models/vit.py', 10), 'library'],
    [f('_run_module_as_main', '/usr/lib/python3.12/runpy.py', 198), 'library'],
    [f('step', 'train.py', 42), 'user'],
    [f('forward', '/home/me/project/model/attention.py', 7), 'user'],
    [f('forward', '<eval_with_key>.3', 5), 'torch'],
  ]
  for (const [frame, kind] of cases) it(`${frame.name} in ${frame.filename}: ${kind}`, () => assert.equal(classifyFrame(frame), kind))

  it('labels a Python frame by file and line, a C++ frame by its short name and library', () => {
    assert.equal(frameLabel(f('step', 'train.py', 42)), 'train.py:42 step')
    assert.equal(
      frameLabel(f('at::native::layer_norm_cuda(at::Tensor const&, double)', 'torch/lib/libtorch_cuda.so', 1)),
      'at::native::layer_norm_cuda (libtorch_cuda.so)',
    )
    assert.equal(shortName('std::vector<int>::push_back(int const&)'), 'std::vector::push_back')
  })

  it('names a stack by its innermost user frame, else a torch Python frame', () => {
    const stack = [
      f('torch::unwind::unwind()', 'torch/lib/libtorch_cpu.so'),
      f('??', 'torch/lib/libc10_cuda.so'),
      f('_PyEval_EvalFrameDefault', 'python3.12'),
      f('forward', 'torch/nn/modules/linear.py', 125),
      f('_call_impl', 'torch/nn/modules/module.py', 1790),
      f('step', 'train.py', 42),
      f('main', 'train.py', 90),
    ]
    assert.equal(stackLabel(stack), 'train.py:42 step')
    assert.equal(stackLabel(stack.slice(0, 5)), 'torch/nn/modules/linear.py:125 forward')
    assert.equal(stackLabel([]), null)
  })

  it("names a stack of the autograd engine's thread by its node, with the C++ frames that say what it did", () => {
    const stack = [
      f('torch::unwind::unwind()', 'torch/lib/libtorch_cpu.so'),
      f('??', 'torch/lib/libc10_cuda.so'),
      f('at::detail::empty_cuda(c10::ArrayRef<long>)', 'torch/lib/libtorch_cuda.so'),
      f('at::native::structured_mm_out_cuda::impl(at::Tensor const&)', 'torch/lib/libtorch_cuda.so'),
      f('at::_ops::mm::call(at::Tensor const&, at::Tensor const&)', 'torch/lib/libtorch_cpu.so'),
      f('torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor>&&)', 'torch/lib/libtorch_cpu.so'),
      f('torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)', 'torch/lib/libtorch_cpu.so'),
      f('??', 'libc.so.6'),
    ]
    assert.equal(stackLabel(stack), 'torch::autograd::generated::MmBackward0::apply (libtorch_cpu.so)')
    const filter = new StackFilter(stack)
    const r = filter.filter(stack.map((_, i) => i))
    assert.deepEqual(
      r.shown.map((s) => s.frame),
      [3, 5],
    )
    assert.equal(r.hidden, 6)
  })

  it('collapses repeated frames and recursion', () => {
    const kinds = Array(12).fill('user')
    const r = collapseRepeats([1, 2, 2, 2, 3, 4, 3, 4, 3, 4, 5], kinds)
    assert.deepEqual(
      r.map((s) => [s.frame, s.repeats, s.span]),
      [
        [1, 1, 1],
        [2, 3, 1],
        [3, 3, 2],
        [4, 1, 1],
        [5, 1, 1],
      ],
    )
  })
})

describe('frames of real snapshots with default stacks', async () => {
  for (const name of ['gpt2_varshape__default', 'bert_train__default', 'convnet_varimg__default', 'cuda_graph__default']) {
    const { trace } = await openInput(realSnapshot(name))
    const { frames, stacks } = trace.tables
    const filter = new StackFilter(frames)

    it(`${name}: the recorded stacks start in the unwinder and the allocator`, () => {
      const innermost = stacks.filter((s) => s.length > 0).map((s) => frames[s[0]!]!.name)
      assert.ok(innermost.length > 0)
      assert.ok(
        innermost.every((n) => n.includes('unwind')),
        'every stack starts with torch::unwind::unwind()',
      )
    })

    it(`${name}: no shown frame is hidden machinery, and most stacks show a Python frame with a file first`, () => {
      let python = 0
      stacks.forEach((s, i) => {
        const r = filter.filter(s, i)
        assert.ok(r.shown.length > 0 && r.shown.length <= s.length)
        if (r.shown.length > 1 || r.headlineKind === 'user' || r.headlineKind === 'torch' || r.headlineKind === 'library' || r.headlineKind === 'cpp')
          for (const x of r.shown) assert.ok(['user', 'library', 'torch', 'cpp'].includes(x.kind), `${frames[x.frame]!.name}: ${x.kind}`)
        const first = frames[r.shown[0]!.frame]!
        if (/\.py$/.test(first.filename) && first.line > 0) python++
        for (const x of r.shown)
          assert.ok(!/unwind|CapturedTraceback|_PyEval|__libc_start_main|CUDACachingAllocator|at::_ops::/.test(frames[x.frame]!.name), frames[x.frame]!.name)
      })
      assert.ok(python / stacks.length > 0.5, `${python} of ${stacks.length} stacks show a Python frame first`)
    })

    it(`${name}: the headline of a stack with Python frames is a user frame (the recording script)`, () => {
      let user = 0
      let pythonStacks = 0
      stacks.forEach((s, i) => {
        const r = filter.filter(s, i)
        if (!r.shown.some((x) => x.kind === 'user' || x.kind === 'torch' || x.kind === 'library')) return
        pythonStacks++
        if (r.headlineKind === 'user') {
          user++
          assert.match(frames[r.headline]!.filename, /record_whatif_suite\.py$/)
        }
      })
      assert.ok(pythonStacks > 0)
      assert.equal(user, pythonStacks, 'every stack with Python frames has the script in it')
    })

    it(`${name}: the grouping of allocations by headline is not one group`, () => {
      const bytes = new Map<string, number>()
      const { kind, size, stack } = trace.events
      let total = 0
      for (let e = 0; e < kind.length; e++) {
        if (kind[e] !== 0 || stack[e]! < 0) continue
        const label = filter.label(stacks[stack[e]!]!, stack[e]!)!
        bytes.set(label, (bytes.get(label) ?? 0) + size[e]!)
        total += size[e]!
      }
      const top = [...bytes].sort((a, b) => b[1] - a[1])[0]!
      assert.ok(bytes.size > 3, `${bytes.size} groups`)
      assert.ok(!/unwind/.test(top[0]), `the largest group is ${top[0]}`)
      assert.ok(top[1] < total, 'the largest group is not everything')
    })
  }
})
