"""vramscope's PyTorch recorder: `vramscope record --pytorch -- python train.py ...` puts this
folder first on PYTHONPATH, so every Python process of the program imports this file at start-up
(Python's `site` imports any `sitecustomize` on the path). It changes nothing until the program
imports torch and torch initialises CUDA; then, in that process only (a launcher such as torchrun
that never touches CUDA records nothing), it

- calls torch.cuda.memory._record_memory_history() with PyTorch's own defaults (every event,
  Python and C++ stacks; max_entries only where --max-entries gave one),
- attaches an out-of-memory observer that writes the snapshot at that moment (NAME.oom.pickle, the
  first out-of-memory of the process), before PyTorch raises,
- writes the snapshot again every VRAMSCOPE_PYTORCH_EVERY_S seconds, on SIGTERM and at exit
  (NAME.pickle), each time to a temporary file renamed over the last, so a program killed at any
  moment leaves the last whole snapshot,
- writes beside each snapshot NAME.stats.json: torch.cuda.memory_stats() at the same moment, the
  allocator settings (PYTORCH_ALLOC_CONF), the device, the limit and the out-of-memory seen.

NAME is rank<RANK> under torchrun (RANK set), `snapshot` for the program vramscope started, else
pid<PID>; a second process that starts recording under a NAME already claimed (NAME.claim) adds
-pid<PID> to it. It also names the interposer's log for this process (NAME.calls.log), so the driver's
calls of every rank are recorded beside its snapshot. Any sitecustomize this one hides on the path
is run after it. Nothing here may break the program: every failure is a warning on stderr.

The settings come from the environment vramscope sets: VRAMSCOPE_PYTORCH_DIR (the output folder;
unset: this file does nothing), VRAMSCOPE_PYTORCH_MAX_ENTRIES, VRAMSCOPE_PYTORCH_EVERY_S (0: no
periodic snapshot) and VRAMSCOPE_PYTORCH_PARENT_PID (the recorder's pid).
"""

import os
import sys


def _warn(message):
    try:
        sys.stderr.write("vramscope record --pytorch: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass


class _Recorder(object):
    def __init__(self, out_dir):
        self.out_dir = out_dir
        rank = os.environ.get("RANK")
        parent = os.environ.get("VRAMSCOPE_PYTORCH_PARENT_PID")
        if rank is not None and rank.isdigit():
            self.name = "rank%s" % rank
        elif parent and parent.isdigit() and os.getppid() == int(parent):
            self.name = "snapshot"
        else:
            self.name = "pid%d" % os.getpid()
        self.rank = int(rank) if rank is not None and rank.isdigit() else None
        self.max_entries = self._number("VRAMSCOPE_PYTORCH_MAX_ENTRIES")
        every = self._number("VRAMSCOPE_PYTORCH_EVERY_S")
        self.every_s = 60 if every is None else every
        self.torch = None
        self.recording = False
        self.oom = {"happened": False, "count": 0}
        self.dumps = 0
        self.started_ns = None
        import threading

        self.lock = threading.RLock()
        self.stop = threading.Event()

    @staticmethod
    def _number(name):
        text = os.environ.get(name)
        if text is None or text == "":
            return None
        try:
            value = int(text)
        except ValueError:
            _warn("%s=%r is not a whole number; ignored" % (name, text))
            return None
        return value if value >= 0 else None

    def path(self, suffix):
        return os.path.join(self.out_dir, self.name + suffix)

    # -- start ---------------------------------------------------------------------------------
    def on_torch_imported(self, torch):
        self.torch = torch
        try:
            # Queued until CUDA is initialised (run by torch.cuda._lazy_init, whoever calls it), or
            # run at once if it already is.
            torch.cuda._lazy_call(self.start)
        except Exception as e:
            _warn("could not wait for CUDA's initialisation (%s: %s); nothing is recorded" % (type(e).__name__, e))

    def claim(self):
        # Another process that uses CUDA under the same name (a child of a rank, with its RANK)
        # records under a name of its own rather than overwrite the rank's files.
        try:
            fd = os.open(self.path(".claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
        except FileExistsError:
            self.name = "%s-pid%d" % (self.name, os.getpid())
        except OSError:
            pass

    def start(self):
        if self.recording:
            return
        torch = self.torch
        self.claim()
        try:
            kwargs = {}
            if self.max_entries:
                kwargs["max_entries"] = self.max_entries
            torch.cuda.memory._record_memory_history(**kwargs)
        except Exception as e:
            _warn("torch.cuda.memory._record_memory_history failed (%s: %s); nothing is recorded" % (type(e).__name__, e))
            return
        import time

        self.recording = True
        self.started_ns = time.time_ns()
        try:
            torch._C._cuda_attach_out_of_memory_observer(self.on_oom)
        except Exception as e:
            _warn("no out-of-memory observer (%s: %s): an out-of-memory is seen only in the snapshot at exit" % (type(e).__name__, e))
        import atexit

        atexit.register(self.at_exit)
        self.watch_signals()
        if self.every_s > 0:
            import threading

            thread = threading.Thread(target=self.periodic, name="vramscope-snapshots", daemon=True)
            thread.start()

    def watch_signals(self):
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread; the periodic snapshot stays
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is None:
                continue
            try:
                if signal.getsignal(sig) != signal.SIG_DFL:
                    continue  # the program's own handler stays
                signal.signal(sig, self.on_signal)
            except Exception:
                pass

    # -- events --------------------------------------------------------------------------------
    def on_oom(self, device, requested, limit, device_free):
        # Called by PyTorch's allocator after it has released its lock, before it raises.
        first = not self.oom["happened"]
        self.oom["happened"] = True
        self.oom["count"] += 1
        if first:
            import time

            self.oom["first"] = {
                "device": int(device),
                "requested_bytes": int(requested),
                "limit_bytes": int(limit),
                "device_free_bytes": int(device_free),
                "time_ns": time.time_ns(),
            }
            self.dump("oom", ".oom")

    def on_signal(self, signum, frame):
        import signal

        self.dump("signal %d" % signum)
        self.stop.set()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def periodic(self):
        while not self.stop.wait(self.every_s):
            self.dump("periodic")

    def at_exit(self):
        self.stop.set()
        self.dump("exit")

    # -- writing -------------------------------------------------------------------------------
    def dump(self, reason, stem=""):
        if not self.recording:
            return
        with self.lock:
            try:
                self._dump(reason, stem)
            except Exception as e:
                _warn("the %s snapshot of %s was not written (%s: %s)" % (reason, self.name, type(e).__name__, e))

    def _dump(self, reason, stem):
        import json
        import pickle
        import time

        torch = self.torch
        snapshot = torch.cuda.memory._snapshot()
        stats = self.stats(reason, stem)
        pickle_path = self.path(stem + ".pickle")
        self._write(pickle_path, lambda f: pickle.dump(snapshot, f, protocol=4))
        stats["snapshot"] = os.path.basename(pickle_path)
        stats["written_ns"] = time.time_ns()
        self._write(self.path(stem + ".stats.json"), lambda f: f.write(json.dumps(stats, indent=1, default=str).encode("utf-8")))
        self.dumps += 1

    def _write(self, path, fill):
        temporary = "%s.tmp%d" % (path, os.getpid())
        with open(temporary, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)

    def stats(self, reason, stem):
        torch = self.torch
        cuda = torch.cuda
        device = cuda.current_device()
        out = {
            "recorder": "vramscope record --pytorch",
            "reason": reason,
            "name": self.name,
            "pid": os.getpid(),
            "rank": self.rank,
            "local_rank": _int_env("LOCAL_RANK"),
            "world_size": _int_env("WORLD_SIZE"),
            "argv": list(sys.argv),
            "torch_version": getattr(torch, "__version__", None),
            "cuda_version": getattr(getattr(torch, "version", None), "cuda", None),
            "conf": os.environ.get("PYTORCH_ALLOC_CONF", os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")),
            "max_entries": self.max_entries,
            "recording_started_ns": self.started_ns,
            "device": device,
            "oom": dict(self.oom),
        }
        for key, get in (
            ("allocator_backend", lambda: cuda.get_allocator_backend()),
            ("device_name", lambda: cuda.get_device_name(device)),
            ("device_total_bytes", lambda: int(cuda.get_device_properties(device).total_memory)),
            ("memory_fraction", lambda: float(cuda.get_per_process_memory_fraction(device))),
        ):
            try:
                out[key] = get()
            except Exception:
                out[key] = None
        fraction = out.get("memory_fraction")
        total = out.get("device_total_bytes")
        out["limit_bytes"] = int(total * fraction) if total and fraction is not None and fraction < 1 else None
        if self.oom.get("first") and out["limit_bytes"] is None and self.oom["first"]["limit_bytes"] != total:
            out["limit_bytes"] = self.oom["first"]["limit_bytes"]
        out["memory_stats"] = _plain(cuda.memory_stats(device))
        others = {}
        try:
            for index in range(cuda.device_count()):
                if index == device:
                    continue
                stats = cuda.memory_stats(index)
                if stats.get("segment.all.allocated", 0) > 0:
                    others[str(index)] = _plain(stats)
        except Exception:
            pass
        if others:
            out["other_devices_memory_stats"] = others
        return out


def _int_env(name):
    text = os.environ.get(name)
    return int(text) if text is not None and text.isdigit() else None


def _plain(stats):
    return {str(k): (int(v) if isinstance(v, bool) or isinstance(v, int) else v) for k, v in dict(stats).items()}


class _TorchFinder(object):
    """A meta-path finder that lets the next finders find torch, and runs the recorder once the
    torch package has been executed."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.done = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.done:
            return None
        self.done = True
        spec = None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run = loader.exec_module
        recorder = self.recorder

        def exec_module(module):
            run(module)
            try:
                recorder.on_torch_imported(module)
            except Exception as e:
                _warn("%s: %s" % (type(e).__name__, e))
            finally:
                try:
                    del loader.exec_module  # the loader's own again
                except Exception:
                    pass

        loader.exec_module = exec_module
        return spec


def _install():
    out_dir = os.environ.get("VRAMSCOPE_PYTORCH_DIR")
    if not out_dir:
        return
    recorder = _Recorder(out_dir)
    # The interposer (LD_PRELOAD) opens its log at this process's first CUDA memory call, which
    # comes after this: each process gets its own, named as its snapshot.
    if os.environ.get("LD_PRELOAD", "").find("libvramscope_intercept") >= 0:
        os.environ["VRAMSCOPE_INTERCEPT_LOG"] = recorder.path(".calls.log")
    torch = sys.modules.get("torch")
    if torch is not None:
        recorder.on_torch_imported(torch)
    else:
        sys.meta_path.insert(0, _TorchFinder(recorder))


def _chain():
    """Runs the sitecustomize that this one hides, if any, as Python would have."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import importlib.machinery
        import importlib.util

        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as e:
        _warn("the sitecustomize after vramscope's failed (%s: %s)" % (type(e).__name__, e))


try:
    _install()
except Exception as _e:
    _warn("not recording (%s: %s)" % (type(_e).__name__, _e))
_chain()
