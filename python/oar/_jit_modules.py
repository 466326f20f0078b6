"""torch.jit.trace, trace_module, script, freeze and optimize_for_inference over oar's tracer,
with torch's classes: ScriptModule (TracedModule, TopLevelTracedModule, RecursiveScriptModule)
and ScriptFunction. How calls run: _jit_compiled.py; files: _jit_files.py."""
import copy
import warnings

from ._jit_compiled import CompiledCall, TracerWarning, flatten, user_stacklevel
from .nn.modules.module import Module


class _Graph:
    """What .graph returns: the program as text (oar's IR, printed as its dump)."""

    def __init__(self, text):
        self._text = text

    def __str__(self):
        return self._text

    __repr__ = __str__


class ScriptFunction:
    """A function compiled by torch.jit.trace or torch.jit.script."""

    def __init__(self, call):
        self._call = call
        self.__name__ = self.name = call.name
        self.__doc__ = getattr(call.fn, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = _bind(self._call.fn, args, kwargs)
        return self._call(*args)

    @property
    def code(self):
        return self._call.program()

    @property
    def graph(self):
        return _Graph(self._call.program())

    inlined_graph = graph

    def save(self, f, **kwargs):
        from ._jit_files import save

        save(self, f, **kwargs)


def _bind(fn, args, kwargs):
    """Keyword arguments as positional ones, in fn's order (the program takes them by position)."""
    import inspect

    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{getattr(fn, '__name__', fn)}: keyword-only arguments are not supported by oar's compiled "
                        f"functions, got {sorted(bound.kwargs)}")
    return bound.args


class ScriptModule(Module):
    """torch.jit.ScriptModule: the base of every compiled module. Subclassed directly (torch's
    older API), it is an ordinary module whose methods decorated with @torch.jit.script_method
    run compiled (by the rules of torch.jit.script)."""

    def __init__(self):
        super().__init__()
        self.__dict__["_calls"] = {}

    def _forward_call(self):
        call = self._calls.get("forward")
        if call is None:
            method = getattr(type(self), "forward", None)
            if not isinstance(method, _ScriptMethod):
                raise RuntimeError(f"{type(self).__name__}.forward is not compiled: it runs as Python (decorate it "
                                   "with @torch.jit.script_method)")
            call = method.__get__(self)._call
        return call

    def __deepcopy__(self, memo):
        """A copy of the module; its programs are traced anew at their first call."""
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        for k, v in self.__dict__.items():
            twin.__dict__[k] = {} if k == "_calls" else copy.deepcopy(v, memo)
        return twin

    @property
    def code(self):
        return self._forward_call().program()

    @property
    def graph(self):
        return _Graph(self.code)

    inlined_graph = graph

    def save(self, f, **kwargs):
        from ._jit_files import save

        save(self, f, **kwargs)


class _ScriptMethod:
    """What @torch.jit.script_method makes of a method of a ScriptModule subclass: per instance, the
    method compiled as torch.jit.script compiles functions."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        calls = obj.__dict__["_calls"]
        call = calls.get(self.name)
        if call is None:
            call = calls[self.name] = CompiledCall(self.fn.__get__(obj), (obj,), "script",
                                                   f"{type(obj).__name__}.{self.name}")
        return ScriptFunction(call)


def script_method(fn):
    """torch.jit.script_method (for ScriptModule subclasses)."""
    return _ScriptMethod(fn)


class _Compiled(ScriptModule):
    """A compiled view of a module (what trace, script and freeze return). It shares the
    parameters, buffers and submodules of the module it was made from (as torch's traced modules
    do), so training or loading a state_dict into either is seen by both."""

    def __init__(self, original, calls):
        super().__init__()
        d = self.__dict__
        d["_original"] = original
        for k in ("_parameters", "_buffers", "_non_persistent_buffers_set", "_modules"):
            d[k] = original.__dict__[k]  # the same dicts: never stale
        d["training"] = original.training
        d["original_name"] = type(original).__name__
        d["_calls"] = calls
        for name, call in calls.items():
            if name != "forward":
                d[name] = ScriptFunction(call)

    def forward(self, *args, **kwargs):
        call = self._calls["forward"]
        if kwargs:
            args = _bind(type(self._original).forward.__get__(self._original), args, kwargs)
        return call(*args)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if "_original" not in self.__dict__:
                raise
            return getattr(self.__dict__["_original"], name)  # plain attributes and Python methods

    def train(self, mode=True):
        # the original follows, so the programs' signatures (which hold every submodule's mode) see it
        self._original.training = mode
        return super().train(mode)

    def __deepcopy__(self, memo):
        """A copy over a deep copy of the original module, its programs traced anew at their first call."""
        original = copy.deepcopy(self._original, memo)
        calls = {}
        for name, old in self._calls.items():
            fn = original if old.fn is self._original else getattr(original, name)
            calls[name] = CompiledCall(fn, (original,), old.mode, old.name, old.strict)
        twin = type(self)(original, calls)
        for k, v in self.__dict__.items():
            if k not in twin.__dict__:
                twin.__dict__[k] = copy.deepcopy(v, memo)
        twin.__dict__["original_name"] = self.original_name
        return twin

    def _get_name(self):
        return self.original_name

    def extra_repr(self):
        return f"original_name={self.original_name}"


class RecursiveScriptModule(_Compiled):
    """torch.jit.script's modules (and freeze's, and torch.jit.load's in torch)."""


class TracedModule(_Compiled):
    pass


class TopLevelTracedModule(TracedModule):
    """What torch.jit.trace returns for a module."""


def _as_tuple(example_inputs):
    return example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)


def _compare(call, fn, inputs, tolerance, what):
    """check_trace: the program's outputs against the Python function's, as torch's checker words it."""
    from . import allclose, is_tensor, no_grad

    with no_grad():
        got = call(*inputs)
        want = fn(*inputs)
    got_flat, want_flat = [], []
    flatten(got, got_flat, True, "output")
    flatten(want, want_flat, True, "output")
    for i, (g, w) in enumerate(zip(got_flat, want_flat)):
        if not (is_tensor(g) and is_tensor(w)):
            continue
        atol = 1e-7 if str(w.dtype) == "oar.float64" else 1e-5
        if tuple(g.shape) != tuple(w.shape) or not allclose(g.double(), w.double(), rtol=tolerance, atol=atol,
                                                            equal_nan=True):
            diff = (g.double() - w.double()).abs().max().item() if tuple(g.shape) == tuple(w.shape) else None
            detail = (f"shapes differ: {tuple(g.shape)} and {tuple(w.shape)}" if diff is None else
                      f"Tensor-likes are not close! Greatest absolute difference: {diff} (up to {atol} allowed)")
            warnings.warn(f"Output nr {i + 1}. of the traced function does not match the corresponding output of "
                          f"the {what}. Detailed error:\n{detail}", TracerWarning, stacklevel=user_stacklevel())


def _first_run(call, fn, inputs, check_trace, check_inputs, tolerance):
    """Traces now (torch traces at trace() time), then checks the program as torch does."""
    from . import no_grad

    flat, spec = call.flat_inputs(inputs)
    with no_grad():
        call.run_compiled(flat, spec)
    if check_trace and call.eager_reason is None:
        for example in (check_inputs or [inputs]):
            _compare(call, fn, _as_tuple(example), tolerance, "Python function")


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
          example_kwarg_inputs=None, _store_inputs=True):
    """torch.jit.trace: func (a function or a Module) compiled by oar's tracer from example_inputs.
    The result runs the program when no gradient is wanted and traces again for inputs of
    other shapes; see _jit_compiled.py for the rules."""
    if optimize is not None:
        warnings.warn("`optimize` is deprecated and has no effect. Use `with torch.jit.optimized_execution() instead")
    if isinstance(func, ScriptModule):
        warnings.warn("The input to trace is already a ScriptModule, tracing it is a no-op. Returning the object "
                      "as is.")
        return func
    if example_kwarg_inputs is not None:
        raise RuntimeError("torch.jit.trace: example_kwarg_inputs is not supported by oar: pass the inputs "
                           "positionally in example_inputs")
    if example_inputs is None:
        raise RuntimeError("torch.jit.trace: expected example_inputs (a tensor or a tuple of tensors), got None")
    if isinstance(func, Module):
        return trace_module(func, {"forward": example_inputs}, None, check_trace,
                            [{"forward": c} for c in check_inputs] if check_inputs else None, check_tolerance, strict)
    if not callable(func):
        raise TypeError(f"torch.jit.trace: expected a function or a Module, got {type(func).__name__}")
    name = getattr(func, "__name__", "traced function")
    call = CompiledCall(func, (), "trace", name, strict)
    example = _as_tuple(example_inputs)
    _first_run(call, func, example, check_trace, check_inputs, check_tolerance)
    return ScriptFunction(call)


def trace_module(mod, inputs, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
                 strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None,
                 example_inputs_is_kwarg=False, _store_inputs=True):
    """torch.jit.trace_module: each method named in inputs ({"forward": example_inputs, ...})
    traced from its examples; returns a TopLevelTracedModule sharing mod's state."""
    if optimize is not None:
        warnings.warn("`optimize` is deprecated and has no effect. Use `with torch.jit.optimized_execution() instead")
    if not isinstance(mod, Module):
        raise AttributeError("expected torch.nn.Module as the first argument")
    if not isinstance(inputs, dict):
        raise AttributeError("expected a dictionary of (method_name, input) pairs")
    calls = {}
    for method_name, example in inputs.items():
        method = getattr(mod, method_name, None)
        if not callable(method):
            raise AttributeError(f"'{type(mod).__name__}' object has no method '{method_name}' to trace")
        fn = mod if method_name == "forward" else method  # forward through __call__: hooks run as torch traces them
        name = f"{type(mod).__name__}.{method_name}"
        calls[method_name] = CompiledCall(fn, (mod,), "trace", name, strict)
        checks = None
        if check_inputs:
            checks = [c[method_name] if isinstance(c, dict) else c for c in check_inputs]
        _first_run(calls[method_name], fn, _as_tuple(example), check_trace, checks, check_tolerance)
    return TopLevelTracedModule(mod, calls)


# ---- script
_MODIFIER = "_torchscript_modifier"


def _exported_methods(mod):
    names = []
    for klass in type(mod).__mro__:
        for name, v in vars(klass).items():
            if getattr(v, _MODIFIER, None) == "export" and name not in names:
                names.append(name)
    return names


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """torch.jit.script. oar does not compile Python source: a scripted function or module runs
    compiled by oar's tracer whenever its control flow does not read tensor values (then one
    program per input signature; constant arguments are part of the signature), and eagerly,
    with eager results, when it does. Methods marked @torch.jit.export are compiled too;
    @torch.jit.ignore / @torch.jit.unused ones stay Python."""
    if optimize is not None:
        warnings.warn("`optimize` is deprecated and has no effect. Use `with torch.jit.optimized_execution() instead")
    if isinstance(obj, (ScriptModule, ScriptFunction)):
        return obj
    if isinstance(obj, Module):
        calls = {"forward": CompiledCall(obj, (obj,), "script", f"{type(obj).__name__}.forward")}
        for name in _exported_methods(obj):
            if name != "forward":
                calls[name] = CompiledCall(getattr(obj, name), (obj,), "script", f"{type(obj).__name__}.{name}")
        return RecursiveScriptModule(obj, calls)
    if isinstance(obj, type):
        raise RuntimeError(f"torch.jit.script: oar cannot compile the class {obj.__name__} (it compiles functions "
                           "and Modules, by tracing); use the class as Python")
    if not callable(obj):
        raise RuntimeError(f"torch.jit.script: expected a function or a Module, got {type(obj).__name__}")
    return ScriptFunction(CompiledCall(obj, (), "script", getattr(obj, "__name__", "scripted function")))


# ---- freeze and optimize_for_inference
def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """torch.jit.freeze: a copy of the ScriptModule (eval mode) whose weights are constants: its
    own tensors, which need no gradient, so it runs compiled in any grad mode and later
    changes to the original do not reach it."""
    if not isinstance(mod, ScriptModule):
        raise RuntimeError("Freezing expects a ScriptModule as input. "
                           "Please use torch.jit.script or torch.jit.trace to script your 'nn.Module'.")
    if mod.training:
        raise RuntimeError("Freezing is currently only implemented for modules in eval mode. "
                           "Please call .eval() on your module before freezing.")
    if getattr(mod, "_frozen", False):
        return mod
    if not isinstance(mod, _Compiled):  # a ScriptModule subclass: the copy is the module itself
        frozen = copy.deepcopy(mod)
        for p in frozen.parameters():
            p.requires_grad_(False)
        frozen.__dict__["_frozen"] = True
        return frozen
    original = copy.deepcopy(mod._original)
    for p in original.parameters():
        p.requires_grad_(False)
    calls = {}
    for name, old in mod._calls.items():
        fn = original if name == "forward" else getattr(original, name)
        calls[name] = CompiledCall(fn, (original,), old.mode, old.name, old.strict)
        if old.last is not None and old.eager_reason is None:  # compile now, as torch freezes now
            from . import no_grad

            with no_grad():
                calls[name].run_compiled(old.last_inputs, old.last[2])
    frozen = RecursiveScriptModule(original, calls)
    frozen.__dict__["_frozen"] = True
    frozen.__dict__["original_name"] = mod.original_name
    return frozen


def optimize_for_inference(mod, other_methods=None):
    """torch.jit.optimize_for_inference: freezes mod (eval mode) when it is not frozen. oar
    compiles every inference program with its inference passes (conv+batchnorm folding,
    conv+activation fusion, NHWC convolutions, elementwise fusion, ...), so freezing is what
    is left to do."""
    if not isinstance(mod, ScriptModule):
        raise RuntimeError("optimize_for_inference expects a ScriptModule as input. "
                           "Please use torch.jit.script or torch.jit.trace to script your 'nn.Module'.")
    if getattr(mod, "_frozen", False):
        return mod
    return freeze(mod.eval(), preserved_attrs=other_methods)


def is_tracing():
    """torch.jit.is_tracing: True while torch.jit.trace records a function (oar's tracer runs it)."""
    from ._jit_compiled import tracing_now

    return tracing_now()
