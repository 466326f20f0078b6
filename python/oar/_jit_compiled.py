"""The engine behind torch.jit.trace and torch.jit.script in oar: a Python callable compiled by
oar's tracer (a jit.StaticFunction) with torch's calling conventions on top.

- Inputs and outputs may be (nested) tuples, lists and dicts of tensors: they are flattened to
  the tensors the program takes and returns, and rebuilt around it.
- The program runs when no gradient is wanted (under no_grad, or when neither the inputs nor
  the modules' parameters require grad): a compiled program's outputs are not part of an
  autograd graph, so a call that needs one runs the Python function eagerly, with the same
  results.
- Each input signature (shapes, dtypes, nesting, every submodule's train/eval mode) has its
  program, traced at its first call, so other shapes are never run on a program traced for
  different ones.
- A function whose Python code reads a tensor's value cannot become one program: it then runs
  eagerly from that call on (torch's tracer would bake the value in and warn; oar warns and
  stays correct)."""
import threading
import warnings

from .jit import StaticFunction

_state = threading.local()  # depth: torch.jit.trace tracing runs now on this thread


def user_stacklevel():
    """The stacklevel of warnings.warn that names the first caller outside oar's package."""
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def tracing_now():
    return getattr(_state, "depth", 0) > 0


# ---- flattening: containers of tensors <-> the program's flat tensors
def _simple_constant(x):
    from ._dtype import dtype
    from ._tensor import device

    return x is None or type(x) in (bool, int, float, str) or isinstance(x, (dtype, device))


def flatten(obj, tensors, constants_ok, what):
    """Appends obj's tensors to tensors; returns a hashable description of obj's structure.
    constants_ok: non-tensor leaves (None, bool, int, float, str, dtype, device) are kept in the
    description; otherwise they raise torch's error."""
    from . import is_tensor

    if is_tensor(obj):
        tensors.append(obj)
        return ("T",)
    if isinstance(obj, tuple):
        kind = type(obj) if hasattr(obj, "_fields") else tuple  # a namedtuple is rebuilt as itself
        return ("tuple", kind, tuple(flatten(v, tensors, constants_ok, what) for v in obj))
    if isinstance(obj, list):
        return ("list", tuple(flatten(v, tensors, constants_ok, what) for v in obj))
    if isinstance(obj, dict):
        keys = tuple(obj.keys())
        return ("dict", keys, tuple(flatten(obj[k], tensors, constants_ok, what) for k in keys))
    if constants_ok and _simple_constant(obj):
        return ("C", obj)
    raise _Unsupported(obj)


class _Unsupported(Exception):
    def __init__(self, obj):
        super().__init__(type(obj).__name__)
        self.obj = obj


def rebuild(spec, tensors, pos=None):
    """The structure spec describes, with its tensors taken in order from tensors."""
    if pos is None:
        pos = [0]
    tag = spec[0]
    if tag == "T":
        pos[0] += 1
        return tensors[pos[0] - 1]
    if tag == "C":
        return spec[1]
    if tag == "tuple":
        items = [rebuild(s, tensors, pos) for s in spec[2]]
        return spec[1](*items) if spec[1] is not tuple else tuple(items)
    if tag == "list":
        return [rebuild(s, tensors, pos) for s in spec[1]]
    return {k: rebuild(s, tensors, pos) for k, s in zip(spec[1], spec[2])}


def count_tensors(spec):
    tag = spec[0]
    if tag == "T":
        return 1
    if tag == "C":
        return 0
    return sum(count_tensors(s) for s in spec[-1])


def spec_to_json(spec):
    """A structure description as JSON (saved models): namedtuples become tuples."""
    tag = spec[0]
    if tag == "T":
        return {"tensor": True}
    if tag == "C":
        return {"constant": spec[1] if type(spec[1]) in (bool, int, float, str) or spec[1] is None else str(spec[1])}
    if tag == "tuple":
        return {"tuple": [spec_to_json(s) for s in spec[2]]}
    if tag == "list":
        return {"list": [spec_to_json(s) for s in spec[1]]}
    return {"dict": [[str(k), spec_to_json(s)] for k, s in zip(spec[1], spec[2])]}


def spec_from_json(j):
    if not isinstance(j, dict) or len(j) != 1:
        raise ValueError(f"expected a structure entry with one key, got {j!r}")
    (tag, v), = j.items()
    if tag == "tensor":
        return ("T",)
    if tag == "constant":
        return ("C", v)
    if tag == "tuple":
        return ("tuple", tuple, tuple(spec_from_json(s) for s in v))
    if tag == "list":
        return ("list", tuple(spec_from_json(s) for s in v))
    if tag == "dict":
        return ("dict", tuple(k for k, _ in v), tuple(spec_from_json(s) for _, s in v))
    raise ValueError(f"unknown structure entry {tag!r}")


def _type_name(obj):
    """torch's name of a Python value's type in its tracer messages (Tuple[int], List[str])."""
    if isinstance(obj, tuple):
        return "Tuple[" + ", ".join(_type_name(v) for v in obj) + "]"
    if isinstance(obj, list):
        return "List[" + (_type_name(obj[0]) if obj else "Any") + "]"
    if isinstance(obj, dict):
        return "Dict[str, Any]"
    from . import is_tensor

    return "Tensor" if is_tensor(obj) else type(obj).__name__


# ---- what a symbolic read was, in torch's words
_CONVERSIONS = {"__bool__": "boolean", "item": "number", "__float__": "float", "__int__": "integer",
                "__index__": "index", "tolist": "list", "numpy": "NumPy array", "__array__": "NumPy array"}


def conversion_kind(exc):
    import traceback

    kind = "number"
    for fr in traceback.extract_tb(exc.__traceback__):
        kind = _CONVERSIONS.get(fr.name, kind)
    return kind


def module_state(modules):
    """What a program depends on in its modules, walked once per call: every submodule's mode,
    the identity of every parameter and buffer (the program binds those tensors: a replaced one,
    after .to(dtype) or an assignment, needs a new trace), and whether a parameter requires grad."""
    mods = []
    for top in modules:
        _walk(top, mods)
    params = [p for m in mods for p in m._parameters.values() if p is not None]
    ids = [id(p) for p in params]
    ids += [id(b) for m in mods for b in m._buffers.values() if b is not None]
    return tuple([m.training for m in mods]), tuple(ids), any([p.requires_grad for p in params])


def _walk(m, out):
    """m and its submodules, depth first (Module.modules() without its names and memo: this runs per call)."""
    out.append(m)
    for c in m._modules.values():
        if c is not None:
            _walk(c, out)


class CompiledCall:
    """fn compiled per signature (see the module's doc). mode "trace" follows torch.jit.trace
    (tensor inputs only, TracerWarning when it must run eagerly), "script" torch.jit.script
    (constant arguments are part of the signature; running eagerly is silent)."""

    def __init__(self, fn, modules, mode, name, strict=True):
        self.fn = fn
        self.mode = mode
        self.name = name
        self.strict = strict
        self.in_spec = None      # of the call in progress: flat_fn rebuilds the arguments from it
        self.out_specs = {}      # key (structure, modes, state) -> output structure (one for every shape)
        self.tokens = {}         # key -> the number StaticFunction sees
        self.lock = threading.RLock()
        self.pending_out = None  # the structure the latest trace returned
        self.last = None         # (signature, shapes and dtypes, in_spec) of the latest compiled call
        self.last_inputs = None  # and its tensors
        self.eager_reason = None  # set when fn cannot run as programs: it then runs eagerly
        from .jit import _find_modules

        # the modules fn uses (its own, a bound method's, in its closure or globals): they name the
        # program's tensors, and their parameters decide whether a call wants gradients
        self.modules = _find_modules(fn, modules)
        self.static = StaticFunction(self._flat_fn, None, self.modules, on_fallback=self._fell_back)

    # runs under the C tracer only: the program's function of flat tensors
    def _flat_fn(self, key, *flat):
        from . import _C

        args = rebuild(self.in_spec, flat)
        step = self.mode == "trace" and _C.is_tracing()  # (it also runs eagerly, at the call that falls back)
        _state.depth = getattr(_state, "depth", 0) + step
        try:
            r = self.fn(*args)
        finally:
            _state.depth -= step
        out = []
        try:
            spec = flatten(r, out, self.mode == "script", "output")
        except _Unsupported:
            raise RuntimeError("Only tensors, lists, tuples of tensors, or dictionary of tensors can be output "
                               "from traced functions") from None
        if not out:
            raise RuntimeError(f"{self.name}: expected the function to return at least one tensor, got "
                               f"{_type_name(r)} (oar compiles functions that compute tensors)")
        if self.mode == "trace" and spec[0] in ("list", "dict") and self.strict:
            warnings.warn(f"Encountering a {spec[0]} at the output of the tracer might cause the trace to be "
                          "incorrect, this is only valid if the container structure does not change based on the "
                          "module's inputs. Consider using a constant container instead (e.g. for `list`, use a "
                          "`tuple` instead. for `dict`, use a `NamedTuple` instead). If you absolutely need this "
                          "and know the side effects, pass strict=False to trace() to allow this behavior.",
                          TracerWarning, stacklevel=user_stacklevel())
        self.pending_out = spec
        return tuple(out)

    def _fell_back(self, exc):
        from .jit import _is_write, _user_line

        where = _user_line(exc)
        if _is_write(exc):
            self.eager_reason = f"it writes into a tensor in place at {where} in a way a program cannot"
            if self.mode == "trace":
                reason = str(exc).split(": ", 1)[-1].split(";")[0]
                warnings.warn(f"{self.name} runs eagerly (its Python code, at every call): at {where}, {reason}",
                              TracerWarning, stacklevel=user_stacklevel())
            return
        self.eager_reason = f"it reads a tensor's value at {where}"
        if self.mode == "trace":
            kind = conversion_kind(exc)
            warnings.warn(f"Converting a tensor to a Python {kind} might cause the trace to be incorrect "
                          f"({where}). oar does not bake the value in: {self.name} runs eagerly (its Python code, "
                          "at every call) so its results stay correct for every input; branch with torch.cond to "
                          "keep it compiled", TracerWarning, stacklevel=user_stacklevel())

    def flat_inputs(self, args):
        flat = []
        try:
            spec = flatten(tuple(args), flat, self.mode == "script", "input")
        except _Unsupported:
            if self.mode == "trace":
                raise RuntimeError(f"Type '{_type_name(tuple(args))}' cannot be traced. Only Tensors and (possibly "
                                   "nested) Lists, Dicts, and Tuples of Tensors can be traced") from None
            return None, None
        return flat, spec

    def __call__(self, *args):
        from ._grad_mode import is_grad_enabled

        flat, spec = self.flat_inputs(args)
        if flat is None or self.eager_reason is not None:
            return self.fn(*args)
        modes, ids, params_grad = module_state(self.modules)
        if is_grad_enabled() and (params_grad or any(t.requires_grad for t in flat)):
            return self.fn(*args)  # a program's outputs are not part of an autograd graph
        return self.run_compiled(flat, spec, (modes, ids))

    def run_compiled(self, flat, spec, state=None):
        """Runs the program for these inputs (traced at the signature's first call). The key
        holds what is not a shape (the C tracer's cache handles shapes and devices itself)."""
        if state is None:
            state = module_state(self.modules)[:2]
        key = (spec,) + state
        from ._grad_mode import no_grad

        # (traced without gradients, which it runs without: in-place ops then become program values)
        with self.lock, no_grad():  # threads share the call's state and the program's executor: one call at a time
            return self._run_locked(flat, spec, key)

    def _run_locked(self, flat, spec, key):
        token = self.tokens.setdefault(key, len(self.tokens))  # a small int: StaticFunction keys by repr
        self.in_spec = spec
        self.pending_out = None
        out = self.static(token, *flat)
        if self.static.fell_back:  # this very call found the read and ran _flat_fn eagerly
            return rebuild(self.pending_out, out)
        if self.pending_out is not None:  # traced now
            known = self.out_specs.setdefault(key, self.pending_out)
            if known != self.pending_out:
                self.eager_reason = "its outputs' nesting changes with the inputs' shapes"
                if self.mode == "trace":
                    warnings.warn(f"{self.name} returns a different nesting of outputs for inputs of other shapes; "
                                  "it runs eagerly from now on", TracerWarning, stacklevel=user_stacklevel())
                return rebuild(self.pending_out, out)
        self.last = (key, [(tuple(t.shape), t.dtype) for t in flat], spec)
        self.last_inputs = flat  # torch.jit.save checks a program with a dynamic batch on them
        return rebuild(self.out_specs[key], out)

    def program(self):
        if self.eager_reason is not None:
            raise RuntimeError(f"{self.name} has no program: {self.eager_reason}, so it runs eagerly")
        if self.last is None:
            raise RuntimeError(f"{self.name} has no program yet: call it once (with no gradient wanted)")
        return self.static.program()


class TracerWarning(Warning):
    """torch.jit.TracerWarning: tracing met something it cannot record faithfully."""
