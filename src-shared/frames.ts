// Which frames of an allocating stack are worth showing, and the one frame that names the stack.
// PyTorch's default stacks (_record_memory_history() with C++ and Python frames) start with the
// unwinder, the caching allocator, the dispatcher and the interpreter: tens of frames before the
// first line of the program. Every place that shows a stack or a frame (the peak view, colour by
// frame, the inspector, hover, search, exports, the CLI) goes through this module, so they all
// agree on what is hidden and on a stack's headline (docs/architecture.md#frames).
//
// Rules, in order of what is shown:
// - user: Python frames of the program's own code;
// - library: Python frames of third-party packages (site-packages, transformers…) and the
//   standard library; torch: Python frames of torch itself;
// - hidden Python frames: the wrappers every call goes through (torch.nn.Module._call_impl and
//   _wrapped_call_impl, decorator wrappers of torch and libraries);
// - C++ frames are shown only when a stack has no Python frame at all, and then only those that
//   name an operation: the unwinder (torch::unwind, CapturedTraceback), the caching allocator and
//   tensor allocation (c10 CUDA allocator, empty/resize helpers), the dispatcher and boxing
//   (at::_ops, c10::Dispatcher, c10::impl, VariableType, wrapper kernels), the autograd engine,
//   the CPython interpreter and Python bindings, libc and thread start, and unknown frames (??)
//   are hidden.
// The headline of a stack is its innermost user frame, else its innermost library frame, else its
// innermost torch Python frame, else its autograd node (MmBackward0::apply) or first shown C++
// frame, else its first frame at all.

export interface FrameLike {
  name: string
  filename: string
  line: number
}

export type FrameKind =
  | 'user'
  | 'library'
  | 'torch'
  | 'cpp'
  // hidden kinds
  | 'wrapper'
  | 'unwinder'
  | 'allocator'
  | 'dispatcher'
  | 'autograd'
  | 'interpreter'
  | 'libc'
  | 'unknown'

const SHOWN_KINDS: ReadonlySet<FrameKind> = new Set(['user', 'library', 'torch', 'cpp'])

/** Whether frames of this kind are shown in the filtered stack (C++ ones only when no Python frame is there). */
export function isShownKind(kind: FrameKind): boolean {
  return SHOWN_KINDS.has(kind)
}

export function isPythonKind(kind: FrameKind): boolean {
  return kind === 'user' || kind === 'library' || kind === 'torch' || kind === 'wrapper'
}

/** What each hidden kind is, for the inspector's "hidden" note. */
export const KIND_NAMES: Record<FrameKind, string> = {
  user: 'your code',
  library: 'library',
  torch: 'torch',
  cpp: 'C++',
  wrapper: 'module/decorator wrapper',
  unwinder: 'stack unwinder',
  allocator: 'caching allocator',
  dispatcher: 'dispatcher',
  autograd: 'autograd engine',
  interpreter: 'Python interpreter',
  libc: 'libc / thread start',
  unknown: 'unknown (??)',
}

/** A Python source frame: a .py file, or code Python made up (<string>, <frozen …>, <eval_with_key>.3). */
export function isPythonFrame(f: FrameLike): boolean {
  const file = f.filename
  return /\.py[cwi]?$/i.test(file) || /^<[^>]+>/.test(file)
}

// Python packages that are not the user's even when the recorder wrote their paths relative
// ("transformers/models/gpt2/modeling_gpt2.py").
const LIBRARY_PACKAGES = new Set([
  'accelerate',
  'apex',
  'bitsandbytes',
  'datasets',
  'deepspeed',
  'diffusers',
  'einops',
  'fairscale',
  'flash_attn',
  'functorch',
  'huggingface_hub',
  'lightning',
  'lightning_fabric',
  'numpy',
  'peft',
  'pytorch_lightning',
  'safetensors',
  'timm',
  'tokenizers',
  'torchaudio',
  'torchao',
  'torchtext',
  'torchvision',
  'transformer_engine',
  'transformers',
  'triton',
  'trl',
  'vllm',
  'xformers',
])

// Standard-library modules often seen in stacks (also when written relative, without /lib/python3.x/).
const STDLIB_FILES = new Set([
  'runpy.py',
  'contextlib.py',
  'threading.py',
  'functools.py',
  'abc.py',
  'typing.py',
  'code.py',
  'pdb.py',
  'bdb.py',
  'cProfile.py',
  'profile.py',
])
const STDLIB_DIRS = new Set(['asyncio', 'concurrent', 'multiprocessing', 'unittest', 'importlib', 'json', 'logging'])

// Function names of decorator and module-call wrappers in torch or library code.
const WRAPPER_NAMES = new Set(['_call_impl', '_wrapped_call_impl', 'wrapper', 'decorate_context', '_use_grad', 'inner', '_fn', 'wrapped', 'decorator'])

function pythonKind(f: FrameLike): FrameKind {
  const file = f.filename.replaceAll('\\', '/')
  let kind: FrameKind = 'user'
  if (/^<eval_with_key>/.test(file)) kind = 'torch'
  else if (/^<frozen /.test(file)) kind = 'library'
  else {
    const pkgs = /(?:^|\/)(?:site|dist)-packages\/(.*)$/.exec(file)
    const rel = pkgs ? pkgs[1]! : file.replace(/^\.\//, '')
    const top = rel.split('/')[0]!
    if (top === 'torch' || /(?:^|\/)torch\/(?:nn|optim|autograd|utils|_tensor|_ops|functional|cuda|_dynamo|_inductor|amp|distributed|fx)\b/.test(file))
      kind = 'torch'
    else if (pkgs) kind = 'library'
    else if (/(?:^|\/)lib\/python3(?:\.\d+)?\//.test(file)) kind = 'library'
    else if (!rel.includes('/') ? STDLIB_FILES.has(rel) : STDLIB_DIRS.has(top)) kind = 'library'
    else if (LIBRARY_PACKAGES.has(top) && rel.includes('/')) kind = 'library'
  }
  if (kind !== 'user' && WRAPPER_NAMES.has(f.name)) return 'wrapper'
  return kind
}

const INTERPRETER_LIB = /(?:^|\/)(?:python3(?:\.\d+)?|libpython3[^/]*\.so[^/]*|python)$/

function cppKind(f: FrameLike): FrameKind {
  const name = f.name
  const file = f.filename
  if (/unwind::unwind|CapturedTraceback|gather_with_cpp|torch::unwind/.test(name)) return 'unwinder'
  if (name === '_start' || /__libc_start|^start_thread$|^clone3?$|^__clone|execute_native_thread_routine|^std::thread|^std::__invoke/.test(name)) return 'libc'
  if (/(?:^|\/)lib(?:c|pthread|stdc\+\+|gcc_s)[.-]/.test(file) || /(?:^|\/)ld-linux/.test(file)) return 'libc'
  if (/^_?Py|^_PyEval|^_PyObject|^_PyFunction|^PyEval_|^PyObject_|^PyVectorcall|^cfunction_|^method_vectorcall|^slot_tp_|^vectorcall|^pymain|^Py_/.test(name))
    return 'interpreter'
  if (/pythonrun\.c|Modules\/main\.c|Objects\/call\.c|Objects\/methodobject\.c|pycore_ceval\.h|ceval\.c|cpython\/abstract\.h/.test(file)) return 'interpreter'
  if (INTERPRETER_LIB.test(file)) return 'interpreter'
  if (
    /^pybind11::|^torch::PythonArgParser|^torch::autograd::THPVariable_|^THPVariable_|^torch::autograd::utils::wrap|^torch::utils::|^torch::jit::invokeOperatorFromPython|^torch::jit::runAndInsertCall|^torch::autograd::TypeError_to_NotImplemented_|PyObject/.test(
      name,
    )
  )
    return 'interpreter'
  if (
    /CUDACachingAllocator|c10::cuda::|c10::Allocator|c10::StorageImpl|c10::TensorImpl|CachingHostAllocator|^at::detail::empty|^at::native::empty|^at::native::resize_|^at::empty|^at::native::\w*resize_bytes|^at::TensorBase::|^at::native::_?like|^at::cuda::detail::empty|^c10::intrusive_ptr|^at::native::zeros_like|^at::native::new_empty|^at::TensorIteratorBase::(?:allocate|set_output|build|fast_set_up|compute)|^at::meta::structured_|^at::native::structured_.*::set_output|set_output_raw_strided|::set_output_strided/.test(
      name,
    )
  )
    return 'allocator'
  if (/(?:^|\/)libc10_cuda\.so/.test(file) && (name === '??' || name === '')) return 'allocator'
  if (
    /^at::_ops::|^c10::Dispatcher|^c10::impl::|^c10::BoxedKernel|^c10::KernelFunction|^c10::OperatorHandle|^torch::autograd::VariableType::|^torch::ADInplaceOrView::|^torch::autograd::impl::|wrapper_(?:CUDA|CPU|CompositeImplicitAutograd|CompositeExplicitAutograd|Meta|Autograd)|^at::\(anonymous namespace\)::|^at::compositeexplicitautograd::|^at::compositeimplicitautograd::|^at::cuda::(?!detail)|^at::functionalization::|^torch::TraceType::|^at::autocast::|^c10::callUnboxedKernelFunction|^c10::impl::wrap_kernel_functor|^at::_ops/.test(
      name,
    )
  )
    return 'dispatcher'
  if (/core\/boxing|\/Register|\/Redispatch|RegisterCUDA|RegisterCompositeImplicitAutograd|VariableType_\d*\.cpp|ADInplaceOrView/.test(file))
    return 'dispatcher'
  if (
    /^torch::autograd::(?:Engine|python::PythonEngine|Node::operator|call_function|validate_outputs|evaluate_function|ReadyQueue|GraphTask|InputBuffer|CopySlices|AccumulateGrad::apply|run_backward|THPEngine|Graph)|^THPEngine|^torch::autograd::\(anonymous namespace\)|^std::_Function_handler|^std::function/.test(
      name,
    )
  )
    return 'autograd'
  if (name === '??' || name === '' || file === '??') return 'unknown'
  return 'cpp'
}

/** The kind of one frame (see the rules above). */
export function classifyFrame(f: FrameLike): FrameKind {
  return isPythonFrame(f) ? pythonKind(f) : cppKind(f)
}

/** A C++ name without its argument list or template arguments: at::native::layer_norm_cuda. */
export function shortName(name: string): string {
  let depth = 0
  let out = ''
  for (const c of name) {
    if (c === '<' || c === '(') {
      if (depth === 0 && c === '(' && out.length > 0 && out !== 'operator') break
      depth++
    } else if (c === '>' || c === ')') depth = Math.max(0, depth - 1)
    else if (depth === 0) out += c
  }
  return out.trim() || name
}

/** One frame on one line, as every view shows it: "train.py:42 step", "at::native::mm_out (libtorch_cuda.so)". */
export function frameLabel(f: FrameLike): string {
  if (isPythonFrame(f)) return `${f.filename}:${f.line} ${f.name}`
  const lib = f.filename.split('/').at(-1) ?? f.filename
  const name = shortName(f.name)
  return lib && lib !== '??' ? `${name} (${lib})` : name
}

/** A frame as the filtered stack shows it: where in the frames table, its kind, and how often it repeats. */
export interface ShownFrame {
  /** Index in the frames table (or in the stack's own array for frameStack). */
  frame: number
  kind: FrameKind
  /** This frame and the `span - 1` frames after it repeat this many times in a row (recursion); 1: once. */
  repeats: number
  span: number
}

export interface FilteredStack {
  /** The meaningful frames, innermost first, repeats collapsed. */
  shown: ShownFrame[]
  /** The frame that names the stack (frame table index), or -1 for an empty stack. */
  headline: number
  headlineKind: FrameKind | null
  /** Frames in the whole stack. */
  total: number
  /** Frames of the stack filtered out (repeats collapsed do not count). */
  hidden: number
}

/** Collapses runs of a repeated sequence of up to `maxSpan` frames (recursion) into one with a count. */
export function collapseRepeats(frames: readonly number[], kinds: readonly FrameKind[], maxSpan = 4): ShownFrame[] {
  const out: ShownFrame[] = []
  let i = 0
  while (i < frames.length) {
    let best = { span: 1, repeats: 1 }
    for (let span = 1; span <= maxSpan && i + 2 * span <= frames.length; span++) {
      let repeats = 1
      while (i + (repeats + 1) * span <= frames.length && sameRun(frames, i, i + repeats * span, span)) repeats++
      if (repeats > 1 && repeats * span > best.repeats * best.span) best = { span, repeats }
    }
    for (let k = 0; k < best.span; k++)
      out.push({ frame: frames[i + k]!, kind: kinds[i + k]!, repeats: k === 0 ? best.repeats : 1, span: k === 0 ? best.span : 1 })
    i += best.span * best.repeats
  }
  return out
}

function sameRun(frames: readonly number[], a: number, b: number, span: number): boolean {
  for (let k = 0; k < span; k++) if (frames[a + k] !== frames[b + k]) return false
  return true
}

// Lower ranks win the headline; among equals the innermost frame. The hidden kinds rank only for a
// stack with no shown frame (a gradient accumulated by the autograd engine names InputBuffer::add).
const HEADLINE_RANK: Record<FrameKind, number> = {
  user: 0,
  library: 1,
  torch: 2,
  cpp: 3,
  autograd: 4,
  dispatcher: 5,
  wrapper: 6,
  allocator: 7,
  interpreter: 8,
  unwinder: 9,
  libc: 9,
  unknown: 10,
}

const BACKWARD_NODE = /Backward\d*::apply\b/

/**
 * Filters stacks over one frames table: each frame is classified once, each stack filtered once
 * (tables are shared by thousands of allocations).
 */
export class StackFilter {
  private readonly kinds: (FrameKind | undefined)[]
  private readonly stacks = new Map<number, FilteredStack>()

  constructor(private readonly frames: readonly FrameLike[]) {
    this.kinds = new Array<FrameKind | undefined>(frames.length)
  }

  kindOf(frame: number): FrameKind {
    let k = this.kinds[frame]
    if (k === undefined) {
      const f = this.frames[frame]
      k = f ? classifyFrame(f) : 'unknown'
      this.kinds[frame] = k
    }
    return k
  }

  /** Filters a stack given as frame indices, innermost first; `id` caches it (a stacks-table index). */
  filter(stack: ArrayLike<number>, id?: number): FilteredStack {
    if (id !== undefined) {
      const hit = this.stacks.get(id)
      if (hit) return hit
    }
    const all = Array.from(stack)
    const kinds = all.map((f) => this.kindOf(f))
    const python = kinds.some((k) => k === 'user' || k === 'library' || k === 'torch')
    const keep: number[] = []
    const keepKinds: FrameKind[] = []
    kinds.forEach((k, i) => {
      if (python ? k === 'user' || k === 'library' || k === 'torch' : k === 'cpp') {
        keep.push(all[i]!)
        keepKinds.push(k)
      }
    })
    let headline = -1
    let headlineKind: FrameKind | null = null
    let rank = Number.POSITIVE_INFINITY
    kinds.forEach((k, i) => {
      // In a stack of the autograd engine's thread, the node names the step (MmBackward0: the
      // gradient of a matmul) better than the kernel under it.
      const r = k === 'cpp' && BACKWARD_NODE.test(this.frames[all[i]!]?.name ?? '') ? HEADLINE_RANK.cpp - 0.5 : HEADLINE_RANK[k]
      if (r < rank) {
        rank = r
        headline = all[i]!
        headlineKind = k
      }
    })
    // A stack with nothing meaningful shows its headline, so it is never blank.
    if (keep.length === 0 && headlineKind !== null) {
      keep.push(headline)
      keepKinds.push(headlineKind)
    }
    const filtered = { shown: collapseRepeats(keep, keepKinds), headline, headlineKind, total: all.length, hidden: all.length - keep.length }
    if (id !== undefined) this.stacks.set(id, filtered)
    return filtered
  }

  /** The headline frame's one-line label, or null for an empty stack. */
  label(stack: ArrayLike<number>, id?: number): string | null {
    const h = this.filter(stack, id).headline
    const f = h >= 0 ? this.frames[h] : undefined
    return f ? frameLabel(f) : null
  }
}

/** Filters a stack given as frame objects (a stack of its own, no shared table). */
export function filterFrames(frames: readonly FrameLike[]): { shown: FrameLike[]; headline: FrameLike | null; total: number } {
  const filter = new StackFilter(frames)
  const r = filter.filter(frames.map((_, i) => i))
  return { shown: r.shown.map((s) => frames[s.frame]!), headline: r.headline >= 0 ? frames[r.headline]! : null, total: r.total }
}

/** The one-line label of a stack given as frame objects ("train.py:42 step"), or null when it is empty. */
export function stackLabel(frames: readonly FrameLike[]): string | null {
  const h = filterFrames(frames).headline
  return h ? frameLabel(h) : null
}
