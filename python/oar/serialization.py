"""oar.save / oar.load in the safetensors format: an 8-byte little-endian header length, a JSON
header naming each tensor's dtype, shape and byte range, then the raw data. Files written by the
`safetensors` package (from torch or numpy) load here, and the reverse."""
import json
import struct
from collections import OrderedDict

from . import _dtype as D
from . import _saved_entries as E

_ST = {"float32": "F32", "float64": "F64", "float16": "F16", "bfloat16": "BF16", "int8": "I8", "uint8": "U8",
       "int32": "I32", "int64": "I64", "bool": "BOOL", "int16": "I16", "uint16": "U16", "uint32": "U32",
       "uint64": "U64"}
_FROM_ST = {v: k for k, v in _ST.items()}


def _flatten(obj, prefix, out, entries, order):
    """out: key -> plain tensor; entries: key -> description of a structured entry; order: the keys as given"""
    from ._C import TensorBase

    if isinstance(obj, TensorBase):
        out[prefix] = obj
        order.append(prefix)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out, entries, order)
    elif E.is_entry(obj):  # a converted model's quantized weights, (weight, bias) pairs, ...
        entries[prefix] = E.encode(prefix, obj, out)
        order.append(prefix)
    else:
        raise TypeError(f"oar.save: expected a tensor or a (nested) dict of tensors, got {type(obj).__name__} at "
                        f"'{prefix}' (safetensors files hold tensors only)")


def save(obj, f, metadata=None):
    """Writes a tensor or a dict of tensors (state_dict) to f (a path or a binary file)."""
    import numpy as np

    tensors, entries, order = OrderedDict(), {}, []
    _flatten(obj if isinstance(obj, dict) else {"tensor": obj}, "", tensors, entries, order)
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        if t.dtype is D.bfloat16:
            raw = t.view(-1).float().numpy().view(np.uint32) >> 16  # bf16 = the top half of an f32
            data = raw.astype(np.uint16).tobytes()
        else:
            data = np.ascontiguousarray(t.numpy()).tobytes()
        header[name] = {"dtype": _ST[t.dtype.name], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if entries:
        meta[E.KEY] = E.metadata(order, entries)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    fh = open(f, "wb") if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__") else f
    try:
        fh.write(struct.pack("<Q", len(h)))
        fh.write(h)
        for b in blobs:
            fh.write(b)
    finally:
        if fh is not f:
            fh.close()


def load(f, map_location=None, weights_only=None):
    """Reads a safetensors file into an OrderedDict of tensors (a single saved tensor comes back as is)."""
    import numpy as np

    from ._creation import from_numpy

    fh = open(f, "rb") if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__") else f
    try:
        raw = fh.read()
    finally:
        if fh is not f:
            fh.close()
    if len(raw) < 8:
        raise ValueError("oar.load: expected a safetensors file (8-byte header length first), got a file of "
                         f"{len(raw)} bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise ValueError(f"oar.load: header length {n} exceeds the file ({len(raw)} bytes): not a safetensors file "
                         "(oar reads safetensors, not pickled torch.save files)")
    try:
        header = json.loads(raw[8:8 + n])
    except ValueError as e:
        raise ValueError(f"oar.load: malformed safetensors header: {e}") from None
    body = memoryview(raw)[8 + n:]
    out = OrderedDict()
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = _FROM_ST.get(info.get("dtype"))
        if dt is None:
            raise ValueError(f"oar.load: tensor '{name}' has dtype {info.get('dtype')}, which oar does not hold")
        a, b = info["data_offsets"]
        if not 0 <= a <= b <= len(body):
            raise ValueError(f"oar.load: tensor '{name}' has data offsets [{a}, {b}] outside the data "
                             f"({len(body)} bytes)")
        shape = tuple(info["shape"])
        if dt == "bfloat16":
            u = np.frombuffer(body[a:b], dtype=np.uint16).astype(np.uint32) << 16
            t = from_numpy(u.view(np.float32).reshape(shape).copy()).to(D.bfloat16)
        else:
            npdt = {"bool": np.bool_}.get(dt, dt)
            arr = np.frombuffer(body[a:b], dtype=npdt)
            count = 1
            for s in shape:
                count *= s
            if arr.size != count:
                raise ValueError(f"oar.load: tensor '{name}' has {arr.size} elements for shape {list(shape)}")
            t = from_numpy(arr.reshape(shape).copy())
        out[name] = t
    entries = header.get("__metadata__", {}).get(E.KEY) if isinstance(header.get("__metadata__"), dict) else None
    if entries is not None:
        out = OrderedDict(E.restore(entries, out))
    if list(out) == ["tensor"]:
        return out["tensor"]
    return out
