"""The op table, read from the C core at import: every op becomes a function in oar.ops
(inputs positional, attributes by name; those with a default in the table may be left out).
The torch-named API in _functions and nn.functional is written over these and takes its
default values from the table (default(op, attr))."""
from types import SimpleNamespace

from . import _C

TABLE = _C.op_table()
ID = {row["name"]: i for i, row in enumerate(TABLE)}
SCHEMA = {row["name"]: row for row in TABLE}
KIND_NAMES = {1: "int", 2: "float", 3: "ints", 4: "str", 5: "dtype"}
FLAG_NONDIFF = 1 << 4
FLAG_CONTROL = 1 << 10
_call = _C.call


def _from_text(kind, text):
    """A default as the table writes it (attribute text, src/ops/attr_text.c) -> a Python value."""
    if kind == 1:
        return {"true": True, "false": False}[text] if text in ("true", "false") else int(text)
    if kind == 2:
        return float(text)
    if kind == 3:
        return tuple(int(v) for v in text.split(",")) if text else ()
    return text  # str, dtype name


DEFAULTS = {row["name"]: {a: _from_text(k, row["defaults"][a]) for a, k in row["attrs"] if a in row["defaults"]}
            for row in TABLE}


def default(op, attr):
    """The table's default of attribute attr of op (torch's value for the ops that mirror torch)."""
    try:
        return DEFAULTS[op][attr]
    except KeyError:
        raise KeyError(f"the op table gives no default for {op}.{attr}") from None


def _make(name, row):
    op = ID[name]
    attrs = ", ".join(f"{a}: {KIND_NAMES[k]}" + (f" = {DEFAULTS[name][a]!r}" if a in DEFAULTS[name] else "")
                      for a, k in row["attrs"])
    n_in = row["n_inputs"]

    def f(*inputs, **attrs_given):
        return _call(op, inputs, attrs_given)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"oar op '{name}': {'any number of' if n_in < 0 else n_in} tensor input(s)"
                 f"{'; attributes ' + attrs if attrs else ''}. Generated from the op table.")
    return f


class _OpNamespace(SimpleNamespace):
    """oar.ops.<op> for every op of the table. Under the torch switch it also stands for
    torch.ops: torchvision's library is served by oar's ops (torch.ops.torchvision.nms); other
    extension libraries are compiled against libtorch and cannot load into oar, so their op
    namespaces say so when an op is called (_compat/extensions.py)."""

    def load_library(self, path):
        import os
        if os.path.basename(os.path.dirname(str(path))) == "torchvision" and \
                os.path.basename(str(path)).split(".")[0] == "_C":
            # torchvision's op library: oar serves the ops it has (torch.ops.torchvision.nms, ...)
            from ._vision import TorchvisionOps
            self.torchvision = TorchvisionOps()
            return
        from ._compat.extensions import load_extension_library

        load_extension_library(self, path)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"oar.ops has no op '{name}' (torch.ops.{name}: PyTorch C++ extension ops do not "
                             "run on oar; oar.ops lists the ops of oar's table)")


ops = _OpNamespace(**{row["name"]: _make(row["name"], row) for row in TABLE if not row["flags"] & FLAG_CONTROL})


def call(name, inputs, attrs=None):
    return _call(ID[name], inputs, attrs)
