"""torch.jit.save / torch.jit.load in oar: one archive holding an exported model.

torch.jit.save(m, f) writes a zip archive (f: a path or a binary file object) of three members:
- model.json and model.safetensors: the program and its weights in oar's exported-model format
  (docs/model-format.md), exactly what oar.jit.save, `oar infer` and the C predictor read;
- jit.json: {"format": "oar.jit", "version": 1, "name", "inputs", "outputs"}, the nesting of the
  inputs and outputs (tuples, lists, dicts of tensors) so the loaded module returns what the
  traced one did.
torch.jit.load(f) extracts it and runs it with the C predictor: no model code, no tracing. It
also loads a two-file export (path.json + path.safetensors) directly."""
import io
import json
import os
import tempfile
import zipfile

from . import _C
from ._jit_compiled import _Unsupported, count_tensors, flatten, rebuild, spec_from_json, spec_to_json
from ._jit_modules import RecursiveScriptModule, ScriptFunction, ScriptModule
from .nn.modules.module import Module

_FORMAT, _VERSION = "oar.jit", 1
_MEMBERS = ("model.json", "model.safetensors", "jit.json")


def _export(call, base):
    """Writes call's latest program as base.json + base.safetensors, with the batch (dim 0 of
    every input) left dynamic when the program gives the Python function's results at another
    batch size, else at the traced shapes (the predictor then refuses other shapes)."""
    from . import no_grad
    from .jit import InputSpec, StaticFunction

    if call.eager_reason is not None:
        raise RuntimeError(f"torch.jit.save: {call.name} cannot be saved as a program: {call.eager_reason}, so it "
                           "runs eagerly (branch with torch.cond to make it one program)")
    if call.last is None:
        raise RuntimeError(f"torch.jit.save: {call.name} has no program yet: call it once (with no gradient "
                           "wanted) before saving")
    sig, shapes, spec = call.last
    examples = call.last_inputs
    call.in_spec = spec
    for dynamic in (True, False):
        if dynamic and not all(len(s) for s, _ in shapes):
            continue
        specs = [InputSpec([-1 if (dynamic and d == 0) else n for d, n in enumerate(s)], dt, f"input{i}")
                 for i, (s, dt) in enumerate(shapes)]
        sf = StaticFunction(call._flat_fn, specs, call.modules, on_fallback=call._fell_back)
        try:
            with no_grad():
                sf(sig, *examples)
            sf.save(base)
            if not dynamic or _serves_another_batch(call, base, examples, spec):
                return
        except RuntimeError as exc:
            if not dynamic:
                raise RuntimeError(f"torch.jit.save: {call.name}: {exc}") from None


def _serves_another_batch(call, base, examples, spec):
    """Whether the saved program, at batch 2B+1 (the example rows repeated: valid data, token ids
    included), gives what the Python function gives. The export's own checks catch sizes in shape
    attributes; this also catches a size read at tracing and used as a number (x * x.shape[0])."""
    from . import allclose, cat, no_grad

    bigger = [cat([t, t, t[:1]]) for t in examples]
    try:
        got = _C.Predictor(base, 0).run(tuple(bigger))
        with no_grad():
            want = []
            flatten(call.fn(*rebuild(spec, bigger)), want, True, "output")
    except RuntimeError:
        return False
    want = [w for w in want if hasattr(w, "shape")]
    return len(got) == len(want) and all(
        tuple(g.shape) == tuple(w.shape) and allclose(g.double(), w.double(), rtol=1e-3, atol=1e-4, equal_nan=True)
        for g, w in zip(got, want))


def save(m, f, _extra_files=None):
    """torch.jit.save(m, f): m traced or scripted (its forward, as last called with no gradient
    wanted); f a path or a binary file object. The archive is written whole or not at all."""
    if isinstance(m, ScriptModule):
        if m.training and not isinstance(m, LoadedModule):
            raise RuntimeError("torch.jit.save: oar saves inference programs: call .eval() on the module, run it "
                               "once, then save (a training-mode program updates state, which a loaded model cannot)")
        call = None if isinstance(m, LoadedModule) else m._forward_call()
        name = m._get_name()
    elif isinstance(m, ScriptFunction):
        call, name = m._call, m.name
    else:
        raise TypeError(f"torch.jit.save: expected a ScriptModule or ScriptFunction (torch.jit.trace or "
                        f"torch.jit.script of it), got {type(m).__name__}")
    with tempfile.TemporaryDirectory(prefix="oar_jit_") as tmp:
        base = os.path.join(tmp, "model")
        if call is None:
            m._write_members(base)
            meta = m._meta
        else:
            _export(call, base)
            sig = call.last[0]
            meta = {"format": _FORMAT, "version": _VERSION, "name": name,
                    "inputs": spec_to_json(call.last[2]), "outputs": spec_to_json(call.out_specs[sig])}
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            z.write(base + ".json", "model.json")
            z.write(base + ".safetensors", "model.safetensors")
            z.writestr("jit.json", json.dumps(meta, indent=1))
            for k, v in (_extra_files or {}).items():
                z.writestr("extra/" + k, v)
    data = buf.getvalue()
    if isinstance(f, (str, os.PathLike)):
        _write_atomic(os.fspath(f), data)
    else:
        f.write(data)


def _write_atomic(path, data):
    """A temporary file beside path, flushed to disk, renamed over it: readers see the old file
    or the new one, never part of one."""
    fd, tmp = tempfile.mkstemp(prefix=".oar_jit_", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _device_of(map_location):
    """oar_device's number for map_location, validated as torch does."""
    from ._tensor import device

    if isinstance(map_location, str):
        map_location = device(map_location)
    elif not (map_location is None or isinstance(map_location, device)):
        raise ValueError("map_location should be either None, string or torch.device, but got type: "
                         + str(type(map_location)))
    if map_location is None or map_location.type == "cpu":
        return 0
    if map_location.type == "cuda":
        from ._device import cuda

        if not cuda.is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but torch.cuda.is_available() "
                               "is False. If you are running on a CPU-only machine, please use torch.jit.load with "
                               "map_location=torch.device('cpu') to map your storages to the CPU.")
        return 1
    raise ValueError(f"torch.jit.load: map_location {map_location} is not a device oar runs models on (cpu, cuda)")


def _not_a_model(where, why):
    return RuntimeError(f"torch.jit.load: {where} is not a model saved by torch.jit.save ({why}); expected a zip "
                        "archive holding model.json, model.safetensors and jit.json, or the model.json of an "
                        "oar export")


def load(f, map_location=None, _extra_files=None):
    """torch.jit.load: the module torch.jit.save wrote (f a path or a binary file object), run
    by oar's predictor. map_location: None or "cpu", or "cuda" (the predictor runs on the GPU)."""
    dev = _device_of(map_location)
    where = repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else "the file object"
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        stem = path[:-5] if path.endswith(".json") else path
        if not os.path.exists(path) and os.path.exists(stem + ".json"):
            return LoadedModule(_C.Predictor(stem, dev), None, stem + ".json", os.path.basename(stem))
        if not os.path.exists(path):
            raise ValueError(f"The provided filename {path} does not exist")
        if os.path.isdir(path):
            raise ValueError(f"The provided filename {path} is a directory")
        if path.endswith(".json") and not zipfile.is_zipfile(path):
            return LoadedModule(_C.Predictor(stem, dev), None, path, os.path.basename(stem))
        with open(path, "rb") as fh:
            data = fh.read()
    else:
        data = f.read()
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise _not_a_model(where, f"not a zip archive: {exc}") from None
    with z:
        names = set(z.namelist())
        if not set(_MEMBERS) <= names:
            if any(n.endswith("constants.pkl") or "/code/" in n for n in names):
                raise RuntimeError(f"torch.jit.load: {where} is a TorchScript archive written by PyTorch; oar does "
                                   "not run TorchScript: load the weights into an oar module (torch.load of a "
                                   "state_dict), or save the model again with oar's torch.jit.save")
            missing = ", ".join(m for m in _MEMBERS if m not in names)
            raise _not_a_model(where, f"a zip archive without {missing}")
        try:
            meta = json.loads(z.read("jit.json"))
            if meta.get("format") != _FORMAT:
                raise ValueError(f"format {meta.get('format')!r}, expected {_FORMAT!r}")
            if meta.get("version") != _VERSION:
                raise ValueError(f"version {meta.get('version')!r}; this oar reads version {_VERSION} (a newer "
                                 "version needs a newer oar)")
            spec_from_json(meta["inputs"]), spec_from_json(meta["outputs"])
        except (ValueError, KeyError, TypeError) as exc:
            raise _not_a_model(where, f"its jit.json is not valid: {exc}") from None
        if _extra_files is not None:
            for k in _extra_files:  # as torch: the saved bytes, b"" for a name not saved
                _extra_files[k] = z.read("extra/" + k) if "extra/" + k in names else b""
        with tempfile.TemporaryDirectory(prefix="oar_jit_") as tmp:
            for m in _MEMBERS[:2]:
                with open(os.path.join(tmp, m), "wb") as out:
                    out.write(z.read(m))
            try:
                predictor = _C.Predictor(os.path.join(tmp, "model"), dev)
            except RuntimeError as exc:
                raise RuntimeError(f"torch.jit.load: {where}: {exc}") from None
            program = z.read("model.json").decode()
            weights = z.read("model.safetensors")
    return LoadedModule(predictor, meta, program, meta.get("name", "model"), weights)


class LoadedModule(RecursiveScriptModule):
    """A module torch.jit.load made: the saved program, run by oar's predictor (inference only:
    its outputs do not require grad, and it refuses training mode)."""

    def __init__(self, predictor, meta, program, name, weights=None):
        Module.__init__(self)
        d = self.__dict__
        d["_predictor"] = predictor
        n_in, n_out = len(predictor.input_names()), len(predictor.output_names())
        if meta is None:  # a two-file export: flat inputs, a tensor or a tuple out
            meta = {"format": _FORMAT, "version": _VERSION, "name": name,
                    "inputs": {"tuple": [{"tensor": True}] * n_in},
                    "outputs": {"tensor": True} if n_out == 1 else {"tuple": [{"tensor": True}] * n_out}}
            if os.path.exists(program):
                with open(program) as fh:
                    program = fh.read()
        d["_meta"] = meta
        d["_in_spec"] = spec_from_json(meta["inputs"])
        d["_out_spec"] = spec_from_json(meta["outputs"])
        if count_tensors(d["_in_spec"]) != n_in or count_tensors(d["_out_spec"]) != n_out:
            raise RuntimeError(f"torch.jit.load: jit.json describes {count_tensors(d['_in_spec'])} inputs and "
                               f"{count_tensors(d['_out_spec'])} outputs, the program has {n_in} and {n_out}")
        d["_program"] = program
        d["_weights"] = weights
        d["original_name"] = name
        d["training"] = False
        d["_calls"] = {}

    def forward(self, *args):
        if self.training:
            raise RuntimeError(f"{self.original_name}: a loaded model runs its saved inference program only; call "
                               ".eval() on it (it was saved in eval mode)")
        flat = []
        try:  # compared as saved (namedtuples as tuples; constant arguments must be the saved ones)
            spec = spec_from_json(spec_to_json(flatten(tuple(args), flat, True, "input")))
        except _Unsupported:
            spec = None
        if spec != self._in_spec:
            raise RuntimeError(f"{self.original_name}: expected inputs shaped as {self._meta['inputs']} (the traced "
                               f"call's), got {len(flat)} tensor(s) in another structure")
        return rebuild(self._out_spec, self._predictor.run(tuple(flat)))

    def __getattr__(self, name):
        return Module.__getattr__(self, name)

    def __deepcopy__(self, memo):
        """A copy with a predictor of its own (a clone: the read-only weights shared, its own buffers)."""
        twin = LoadedModule(self._predictor.clone(), self._meta, self._program, self.original_name, self._weights)
        twin.__dict__["training"] = self.training
        return twin

    def train(self, mode=True):
        return Module.train(self, mode)

    @property
    def code(self):
        return self._program

    def _write_members(self, base):
        if self._weights is None:
            raise RuntimeError("torch.jit.save: this loaded export has no archive to save again; copy its files")
        with open(base + ".json", "w") as out:
            out.write(self._program)
        with open(base + ".safetensors", "wb") as out:
            out.write(self._weights)
