"""torch.nn.ParameterList and ParameterDict: parameters held in a list or a dict, registered under
their index or key (so named_parameters and state_dict name them as torch does); a plain tensor
put in becomes a Parameter, other objects are kept as they are."""
from ... import _C
from ..parameter import Parameter
from .module import Module

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value):
    return Parameter(value) if isinstance(value, _C.TensorBase) and not isinstance(value, Parameter) else value


_TYPENAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
              "int64": "LongTensor", "int32": "IntTensor", "int8": "CharTensor", "uint8": "ByteTensor",
              "bool": "BoolTensor"}


def _describe(value, typename=False):
    """torch's one-line description of a held value (ParameterList names the dtype, ParameterDict the
    legacy tensor type)"""
    if isinstance(value, _C.TensorBase):
        size = "x".join(str(d) for d in value.shape)
        kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
        what = "torch." + _TYPENAMES.get(str(value.dtype).split(".")[-1], "Tensor") if typename else value.dtype
        return f"{kind} containing: [{what} of size {size}]"
    return f"Object of type: {type(value).__name__}"


class ParameterList(Module):
    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _get(self, idx):
        return getattr(self, str(idx))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__([self._get(i) for i in range(self._size)[idx]])
        i = idx + self._size if idx < 0 else idx
        if not 0 <= i < self._size:
            raise IndexError(f"index {idx} is out of range")
        return self._get(i)

    def __setitem__(self, idx, value):
        i = idx + self._size if idx < 0 else idx
        if not 0 <= i < self._size:
            raise IndexError(f"index {idx} is out of range")
        setattr(self, str(i), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self._get(i) for i in range(self._size))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(p)}" for k, p in enumerate(self))


class ParameterDict(Module):
    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _check_key(key):
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                            f"'{type(key).__name__}'). Open an issue on github if you need non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._check_key(key))

    def __setitem__(self, key, value):
        self._keys[self._check_key(key)] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def values(self):
        return (self[k] for k in self._keys)

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        key = next(reversed(list(self._keys)))
        return key, self.pop(key)

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def copy(self):
        return ParameterDict({k: v for k, v in self.items()})

    def fromkeys(self, keys, default=None):
        return ParameterDict({k: default for k in keys})

    def update(self, values):
        if isinstance(values, (ParameterDict, dict)) or hasattr(values, "keys"):
            pairs = values.items()
        else:
            pairs = []
            for j, p in enumerate(values):
                if not hasattr(p, "__len__") or isinstance(p, (str, bytes)):
                    raise TypeError(f"ParameterDict update sequence element #{j} should be Iterable; is "
                                    f"{type(p).__name__}")
                if len(p) != 2:
                    raise ValueError(f"ParameterDict update sequence element #{j} has length {len(p)}; 2 is "
                                     "required")
                pairs.append(p)
        for k, v in pairs:
            self[k] = v

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(p, typename=True)}" for k, p in self.items())
