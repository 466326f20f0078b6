"""Compilation from Python: ``oar.jit.to_static`` (Paddle's style) and ``oar.nn.Graph``
(OneFlow's), over the C tracer.

The first call with a given input signature runs the function once with symbolic tensors: every
op it calls, ``loss.backward()`` and ``optimizer.step()`` included, becomes one program that oar's
passes optimize and its executor runs at later calls. Parameters, buffers and optimizer state
are bound by reference, so a compiled training step trains the same tensors eager code would.

A function whose Python control flow reads tensor values (``if loss > 0:``, ``.item()``) cannot be
traced into one program. It is never compiled wrongly: the first such call warns once, naming the
line, and the function runs eagerly from then on, with the results eager code gives. Branch on
tensors with ``oar.cond`` / ``oar.while_loop`` to keep such code compiled."""
import functools
import traceback
import warnings

from . import _C

_MAX_OUT = 16
_traces = []  # the StaticFunctions tracing now (innermost last)


class InputSpec:
    """The signature of an input: shape with None or -1 for dims of any size, dtype, name."""

    def __init__(self, shape, dtype=None, name=None):
        from . import float32

        self.shape = tuple(-1 if d is None else int(d) for d in shape)
        self.dtype = dtype if dtype is not None else float32
        self.name = name

    def __repr__(self):
        return f"InputSpec(shape={list(self.shape)}, dtype={self.dtype}, name={self.name!r})"


def _note_optimizer(opt):
    """Called by Optimizer.step: a compiled step must refresh this optimizer's hyper-parameters
    (lr schedules) before every run, since its Python step() runs only at tracing."""
    if _traces:
        _traces[-1]._optimizers.append(opt)


def _find_modules(fn, extra):
    from .nn.modules.module import Module

    found = list(extra)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, Module):
        found.append(owner)
    code = getattr(fn, "__code__", None)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, Module):
            found.append(value)
    glob = getattr(fn, "__globals__", {})
    for name in code.co_names if code else ():
        if isinstance(glob.get(name), Module):
            found.append(glob[name])
    unique = []
    for m in found:
        if all(m is not u for u in unique):
            unique.append(m)
    return unique


def _symbolic_read(exc):
    """Whether exc is the tracer refusing a read of a traced value, or an in-place write a program
    cannot make (into a view, a tensor with views, an argument, state made outside): running the
    function eagerly gives the right result then."""
    msg = str(exc)
    return isinstance(exc, RuntimeError) and ("is symbolic" in msg or "being traced by oar_jit_to_static" in msg)


def _is_write(exc):
    return "writing" in str(exc)


def _user_line(exc):
    """The innermost frame of exc outside oar's package: where the user's code read a value."""
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        if not os.path.abspath(fr.filename).startswith(here):
            return f"{fr.filename}:{fr.lineno} ({(fr.line or '').strip()})"
    return "an unknown line"


def _autocast_key():
    from .amp.autocast_mode import _state_key

    return _state_key()


class StaticFunction:
    """A function compiled per input signature (see the module's doc)."""

    def __init__(self, fn, input_spec=None, modules=(), output_names=None, on_fallback=None):
        self._fn = fn
        self._on_fallback = on_fallback  # called with the exception instead of the warning below
        self._spec = list(input_spec) if input_spec is not None else None
        self._output_names = output_names  # for exported files (onnx.export)
        self._modules = _find_modules(fn, modules)
        self._jits = {}        # key (non-tensor args, training flags) -> (_C.Jit, n_out, is_tuple)
        self._optimizers = []
        self._keep = []        # branches of traced cond/while_loop nodes
        self._eager = False    # fell back after a data-dependent trace
        self._last = None
        self._ddps = None      # the DistributedDataParallel wrappers in self._modules (found once)
        functools.update_wrapper(self, fn, updated=())

    def __get__(self, obj, objtype=None):  # decorating a method: bind per instance
        if obj is None:
            return self
        bound = self._fn.__get__(obj, objtype)
        cache = obj.__dict__.setdefault("_oar_static", {})
        if self not in cache:
            cache[self] = StaticFunction(bound, self._spec)
        return cache[self]

    def _names(self):
        pairs = []
        for i, m in enumerate(self._modules):
            prefix = "" if len(self._modules) == 1 else f"m{i}."
            pairs += [(prefix + n, p) for n, p in m.named_parameters()]
            pairs += [(prefix + n, b) for n, b in m.named_buffers() if b is not None]
        return pairs

    def _specs(self):
        if self._spec is None:
            return None
        return [(s.dtype.code, list(s.shape), s.name) for s in self._spec]

    def __call__(self, *args):
        if self._eager:
            return self._fn(*args)
        from . import is_tensor

        tensors = tuple(a for a in args if is_tensor(a))
        others = tuple((i, a) for i, a in enumerate(args) if not is_tensor(a))
        # the autocast state decides which casts a trace records, so each state has its program
        key = (repr(others), tuple(m.training for m in self._modules), _autocast_key())
        entry = self._jits.get(key)
        if entry is None:
            entry = self._jits[key] = self._new_entry(args)
        for opt in self._optimizers:
            opt._sync_groups()
        ddps = self._ddp_modules(args)
        for d in ddps:  # their forward's eager collectives (buffer broadcast, join), before every call
            d._pre_forward()
            d._pre_forward_done = True
        _traces.append(self)
        try:
            out = entry["jit"].call(tensors, entry["n_out"])
            if out[0] is None:  # the first trace found how many tensors the function returns
                entry["n_out"] = out[1]
                out = entry["jit"].call(tensors, entry["n_out"])
        except RuntimeError as exc:
            if not _symbolic_read(exc):
                raise
            if self._on_fallback is not None:
                self._on_fallback(exc)
            else:
                what = "writes into a tensor in place" if _is_write(exc) else "reads a tensor's value"
                warnings.warn(f"to_static: {getattr(self._fn, '__qualname__', self._fn)} {what} at "
                          f"{_user_line(exc)}, so it cannot become one program; it runs eagerly from now on "
                              f"(branch with oar.cond or oar.while_loop to keep it compiled)", stacklevel=2)
            self._eager = True
            return self._fn(*args)
        finally:
            _traces.pop()
            for d in ddps:
                d._pre_forward_done = False
        if out[0] is None:
            raise RuntimeError("to_static: the function returns a different number of tensors from call to call")
        self._last = entry["jit"]
        return out if entry["tuple"] else out[0]

    def _ddp_modules(self, args):
        """The DistributedDataParallel wrappers the function reaches: in its modules or its arguments."""
        from .nn.modules.module import Module
        from .nn.parallel.distributed import DistributedDataParallel

        if self._ddps is None:
            self._ddps = self._find_ddps(self._modules, DistributedDataParallel)
        extra = [a for a in args if isinstance(a, Module)]
        return self._ddps + self._find_ddps(extra, DistributedDataParallel) if extra else self._ddps

    @staticmethod
    def _find_ddps(tops, kind):
        found = []
        for top in tops:
            for m in top.modules():
                if isinstance(m, kind) and all(m is not f for f in found):
                    found.append(m)
        return found

    def _new_entry(self, args):
        """A compiled function for this key: the tensors of args become its symbolic inputs, the
        other arguments stay as they are (a new value compiles anew)."""
        from . import is_tensor

        positions = [i for i, a in enumerate(args) if is_tensor(a)]
        entry = {"n_out": 1, "tuple": False}

        def traced(*sym):
            full = list(args)
            for p, t in zip(positions, sym):
                full[p] = t
            r = self._fn(*full)
            entry["tuple"] = isinstance(r, (tuple, list))
            return r

        entry["jit"] = _C.Jit(traced, self._names, self._specs(), self._output_names)
        return entry

    # ---- the cache, for tests and users who want to see it
    def num_traces(self):
        return sum(e["jit"].num_traces() for e in self._jits.values())

    def program(self, i=0):
        """Program i of the latest signature's cache, as text."""
        if self._last is None:
            raise RuntimeError("to_static: no program yet: call the function first")
        return self._last.dump(i)

    def save(self, path):
        if self._last is None:
            raise RuntimeError("to_static: nothing compiled to save: call the function once first")
        self._last.save(str(path))

    @property
    def fell_back(self):
        """Whether a data-dependent trace made the function run eagerly."""
        return self._eager


def to_static(function=None, input_spec=None, modules=()):
    """Compiles function (or a Module's forward) per input signature; usable as a decorator,
    with or without arguments. input_spec: InputSpecs declaring dims of any size (one program
    then serves every batch size). modules: Modules whose parameters the function uses, when they
    cannot be found from the function itself (bound method, closure, globals); they only name
    the program's parameters (export files, messages)."""
    from .nn.modules.module import Module

    def wrap(fn):
        if isinstance(fn, Module):
            fn.forward = StaticFunction(fn.forward, input_spec, (fn,) + tuple(modules))
            return fn
        return StaticFunction(fn, input_spec, modules)

    return wrap(function) if function is not None else wrap


def save(layer, path, input_spec=None, _extra_files=None):
    """Exports a compiled function or a Module as oar's model files (path.json +
    path.safetensors), which `oar infer` and the C predictor run. A Module is compiled in eval
    mode from input_spec (dims of any size stay dynamic). torch.jit.save(m, f) of a traced or
    scripted m writes one archive (f a path or a binary file) that torch.jit.load runs:
    _jit_files.py."""
    from .nn.modules.module import Module
    from ._jit_modules import ScriptFunction, ScriptModule

    if isinstance(layer, (ScriptModule, ScriptFunction)):
        from ._jit_files import save as save_archive

        save_archive(layer, path, _extra_files=_extra_files)
        return

    if isinstance(layer, StaticFunction):
        layer.save(path)
        return
    if not isinstance(layer, Module):
        raise TypeError(f"jit.save: expected a ScriptModule or ScriptFunction (from torch.jit.trace or script), "
                        f"a Module with input_spec, or a to_static function, got {type(layer).__name__}")
    if not input_spec:
        raise ValueError("jit.save: a Module needs input_spec (the shapes and dtypes of its inputs)")
    from . import zeros

    forward = layer.forward if isinstance(layer.forward, StaticFunction) else StaticFunction(
        layer.forward, input_spec, (layer,))
    was_training = layer.training
    layer.eval()
    try:
        example = [zeros(*[1 if d < 0 else d for d in s.shape], dtype=s.dtype) for s in input_spec]
        forward(*example)
        forward.save(path)
    finally:
        layer.train(was_training)


__all__ = ["InputSpec", "StaticFunction", "to_static", "save", "cond", "while_loop"]


def _keep_list():
    """Where a traced cond/while_loop keeps its branches: the compiled function being traced
    (the traced backward calls them again), or a list of the thread's own otherwise."""
    return _traces[-1]._keep if _traces else _orphan_blocks


_orphan_blocks = []


def cond(pred, true_fn, false_fn, operands=()):
    """torch.cond: true_fn(*operands) if pred (a one-element tensor) else false_fn(*operands).
    Both branches must return the same number of tensors, of the same dtypes and shapes. Eagerly
    it runs the chosen branch; inside a compiled function it becomes one node holding both, so
    the program branches at run time. Gradients flow through either way."""
    operands = tuple(operands)
    if not _C.is_tracing():
        return true_fn(*operands) if bool(pred) else false_fn(*operands)
    kind = {}

    def recording(fn):  # remembers whether the branches return a tuple, as eager code would see
        def branch(*a):
            r = fn(*a)
            kind["tuple"] = isinstance(r, (tuple, list))
            return r
        return branch

    n_out = 1
    for _ in range(2):  # the first try finds how many tensors the branches return
        out = _C.cond(pred, recording(true_fn), recording(false_fn), operands, n_out, _keep_list())
        if out[0] is not None:
            break
        n_out = out[1]
    return out if kind.get("tuple") else out[0]


def while_loop(cond_fn, body_fn, carried_inputs):
    """torch.while_loop: while cond_fn(*values) (a one-element tensor) is true, values =
    body_fn(*values) (same count, dtypes and shapes); returns the final values as a tuple.
    Inside a compiled function the loop is one node, run as many times as the data says."""
    values = tuple(carried_inputs)
    if not _C.is_tracing():
        while bool(cond_fn(*values)):
            r = body_fn(*values)
            values = tuple(r) if isinstance(r, (tuple, list)) else (r,)
        return values
    return _C.while_loop(cond_fn, body_fn, values, _keep_list())


# ---- torch.jit's markers. oar's script compiles by tracing, so marked code stays Python: what the
# markers change is which methods torch.jit.script compiles (export) and which it leaves alone.
def is_scripting():
    """False: oar never runs TorchScript, so code under `if not torch.jit.is_scripting():` runs."""
    return False


def _mark(fn, modifier):
    target = fn.fget if isinstance(fn, property) else fn
    target._torchscript_modifier = modifier
    return fn


def export(fn):
    """torch.jit.export: torch.jit.script compiles this method too (beside forward)."""
    return _mark(fn, "export")


def unused(fn):
    """torch.jit.unused: torch.jit.script leaves this method out of compilation (oar runs it as Python)."""
    return _mark(fn, "unused")


def ignore(drop=False, **kwargs):
    """torch.jit.ignore, as a decorator with or without (drop=...): the function stays Python."""
    if callable(drop):
        return _mark(drop, "ignore")
    if not isinstance(drop, bool):
        raise RuntimeError(f"Argument to @torch.jit.ignore must be a bool or a function but got {drop}")
    if kwargs.get("drop_on_export") or drop:
        warnings.warn("ignore(True) has been deprecated. TorchScript will now drop the function call on "
                      "compilation. Use torch.jit.unused now. {}", category=FutureWarning)
        return lambda fn: _mark(fn, "unused")
    return lambda fn: _mark(fn, "ignore")


def _identity(fn):
    return fn


_script_if_tracing = _overload_method = _overload = _identity

# torch.jit.trace / script / save / load / freeze and their classes live in _jit_modules.py and
# _jit_files.py, which need oar.nn (loaded after this module): they are looked up on first use.
_LAZY = {"trace": "_jit_modules", "trace_module": "_jit_modules", "script": "_jit_modules",
         "freeze": "_jit_modules", "optimize_for_inference": "_jit_modules", "is_tracing": "_jit_modules",
         "ScriptModule": "_jit_modules", "ScriptFunction": "_jit_modules", "TracedModule": "_jit_modules",
         "TopLevelTracedModule": "_jit_modules", "RecursiveScriptModule": "_jit_modules",
         "script_method": "_jit_modules",
         "TracerWarning": "_jit_compiled", "load": "_jit_files",
         "isinstance": "_jit_isinstance"}  # (kept out of this module, whose own code means the builtin)


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name):
    if name not in _LAZY:
        raise AttributeError(f"module 'oar.jit' has no attribute '{name}'")
    import importlib

    value = getattr(importlib.import_module("oar." + _LAZY[name]), name)
    globals()[name] = value
    return value


# ---- TorchScript's typing helpers and futures, which model files use outside scripting too
def annotate(the_type, the_value):
    """torch.jit.annotate: the value itself (the type is for the TorchScript compiler)."""
    return the_value


import collections as _collections  # noqa: E402

# torch.jit.Attribute(value, type): outside scripting a (value, type) pair, as torch's namedtuple
Attribute = _collections.namedtuple("Attribute", ["value", "type"])


def interface(obj):
    """torch.jit.interface: the class itself (an interface only matters to the TorchScript compiler)."""
    return obj


def script_if_tracing(fn):
    """torch.jit.script_if_tracing: fn runs as Python (oar does not script)."""
    return fn


def fork(func, *args, **kwargs):
    """torch.jit.fork: runs func now and returns a completed Future of its result (torch's fork runs it
    asynchronously only inside TorchScript; eager torch runs it inline too)."""
    from .futures import Future

    fut = Future()
    fut.set_result(func(*args, **kwargs))
    return fut


def wait(future):
    return future.wait()


try:
    from typing import Final  # noqa: F401,E402  (torch.jit.Final)
except ImportError:  # pragma: no cover
    Final = None
