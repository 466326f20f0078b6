"""state_dict entries that are not plain tensors, for oar.save / oar.load: a converted model's
quantized weights, its (weight, bias) pairs, a bias of None, the packed dtype. safetensors holds
plain tensors only, so each entry is stored as plain tensors under documented keys, and the
header's metadata ("oar.entries", JSON) says how to put them back together:

    quantized tensor K    K (its integer codes: uint8, int8 or int32), and K.q_scale, K.q_zero_point
                          (0-d float32 / int32: per tensor) or K.q_per_channel_scales,
                          K.q_per_channel_zero_points (1-d: per channel; the axis is in the
                          metadata); exactly the bits the tensor holds, so it loads back bit for bit
    tuple or list K       its items under K.0, K.1, ...
    None, a dtype         no tensor; the metadata alone

Any reader of safetensors sees the codes and their scales by name."""
import json

from . import _C
from . import _dtype as D
from . import _qtensor as Q

KEY = "oar.entries"


def _kind(value):
    if isinstance(value, _C.TensorBase):
        return "tensor"
    if type(value) is Q.QTensor:
        return "qtensor"
    if isinstance(value, (tuple, list)):
        return type(value).__name__
    if value is None:
        return "none"
    if isinstance(value, D.dtype):
        return "dtype"
    return None


def is_entry(value):
    return _kind(value) not in (None, "tensor")


def _put(out, key, tensor):
    if key in out:
        raise ValueError(f"oar.save: the key '{key}' is used twice (a quantized entry's parts take the keys "
                         f"'<key>.q_scale', '<key>.0', ...); rename the entry")
    out[key] = tensor


def encode(key, value, out):
    """value's tensors into out (key -> plain tensor); returns its description for the metadata"""
    kind = _kind(value)
    if kind is None:
        raise TypeError(f"oar.save: expected tensors, quantized tensors, tuples of them or None, got "
                        f"{type(value).__name__} at '{key}' (safetensors files hold tensors only)")
    if kind == "tensor":
        _put(out, key, value)
        return {"kind": "tensor"}
    if kind == "qtensor":
        _put(out, key, value.codes)
        names = ("q_scale", "q_zero_point") if value._axis is None else ("q_per_channel_scales",
                                                                         "q_per_channel_zero_points")
        _put(out, f"{key}.{names[0]}", value._scale)
        _put(out, f"{key}.{names[1]}", value._zero_point)
        return {"kind": "qtensor", "dtype": value.dtype.name, "axis": value._axis}
    if kind in ("tuple", "list"):
        return {"kind": kind, "items": [encode(f"{key}.{i}", v, out) for i, v in enumerate(value)]}
    if kind == "dtype":
        return {"kind": "dtype", "name": value.name}
    return {"kind": "none"}


def _tensor(tensors, key):
    if key not in tensors:
        raise ValueError(f"oar.load: the metadata names the tensor '{key}', which the file does not hold")
    return tensors.pop(key)


def decode(key, desc, tensors):
    """the value described by desc, its tensors taken out of tensors (key -> plain tensor)"""
    kind = desc.get("kind") if isinstance(desc, dict) else None
    if kind == "tensor":
        return _tensor(tensors, key)
    if kind == "qtensor":
        dtype = D.ALIASES.get(desc.get("dtype"))
        if not isinstance(dtype, Q._QDtype):
            raise ValueError(f"oar.load: '{key}' is a quantized tensor of unknown dtype {desc.get('dtype')!r}")
        axis = desc.get("axis")
        names = ("q_scale", "q_zero_point") if axis is None else ("q_per_channel_scales", "q_per_channel_zero_points")
        codes = _tensor(tensors, key)
        scale, zero_point = _tensor(tensors, f"{key}.{names[0]}"), _tensor(tensors, f"{key}.{names[1]}")
        if codes.dtype is not dtype.storage:
            raise ValueError(f"oar.load: '{key}' holds {codes.dtype} codes for a torch.{dtype.name} tensor "
                             f"(expected {dtype.storage})")
        return Q.QTensor(codes, scale.to(D.float32), zero_point.to(D.int32), axis, dtype)
    if kind in ("tuple", "list"):
        items = [decode(f"{key}.{i}", d, tensors) for i, d in enumerate(desc.get("items", []))]
        return tuple(items) if kind == "tuple" else items
    if kind == "dtype":
        dtype = D.ALIASES.get(desc.get("name"))
        if dtype is None:
            raise ValueError(f"oar.load: '{key}' names the unknown dtype {desc.get('name')!r}")
        return dtype
    if kind == "none":
        return None
    raise ValueError(f"oar.load: '{key}' has the description {desc!r} in the metadata '{KEY}', which oar does not "
                     "read (a file from a newer oar?)")


def metadata(order, entries):
    return json.dumps({"order": order, "entries": entries}, separators=(",", ":"))


def restore(text, tensors):
    """the state dict in its saved order, the structured entries rebuilt from tensors"""
    try:
        info = json.loads(text)
        order, entries = info["order"], info["entries"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"oar.load: malformed '{KEY}' metadata: {e}") from None
    out = {}
    for key in order:
        out[key] = decode(key, entries[key], tensors) if key in entries else _tensor(tensors, key)
    if tensors:
        raise ValueError(f"oar.load: the file holds tensors its '{KEY}' metadata does not place: "
                         f"{sorted(tensors)[:5]}")
    return out
