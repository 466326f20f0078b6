"""dtypes with torch's names (oar.float32, oar.long, ...), mapped to oar's dtype codes."""
import builtins

from . import _C


class dtype:
    """A tensor element type; compares by identity like torch.dtype."""

    __slots__ = ("name", "code", "itemsize", "is_floating_point", "is_signed")

    def __init__(self, name, code, itemsize, is_float, signed):
        self.name, self.code, self.itemsize = name, code, itemsize
        self.is_floating_point, self.is_signed = is_float, signed

    def __repr__(self):
        return "oar." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


_info = _C.dtype_info()  # (oar name, size, is_float) by code
_codes = {n: i for i, (n, _, _) in enumerate(_info)}


def _make(name, oar_name, signed=True):
    code = _codes[oar_name]
    return dtype(name, code, _info[code][1], _info[code][2], signed)


float32 = _make("float32", "f32")
float64 = _make("float64", "f64")
float16 = _make("float16", "f16")
bfloat16 = _make("bfloat16", "bf16")
int8 = _make("int8", "i8")
uint8 = _make("uint8", "u8", signed=False)
int32 = _make("int32", "i32")
int64 = _make("int64", "i64")
bool_ = _make("bool", "bool", signed=False)
# torch.int16 and torch 2.x's uint16/uint32/uint64: casts, copies, shape and index ops, arithmetic,
# comparisons and bitwise ops, sum/amax/amin/argmax/topk take them; other ops refuse them
int16 = _make("int16", "i16")
uint16 = _make("uint16", "u16", signed=False)
uint32 = _make("uint32", "u32", signed=False)
uint64 = _make("uint64", "u64", signed=False)
# the low-bit storage types (ONNX's float8/float4/int4/int2), torch 2.x's names; one element per
# byte; casts, copies, shape and index ops take them, arithmetic refuses them (docs/dtypes.md).
# float4_e2m1fn is ml_dtypes' name (torch's float4_e2m1fn_x2 is a packed pair).
float8_e4m3fn = _make("float8_e4m3fn", "f8e4m3fn")
float8_e4m3fnuz = _make("float8_e4m3fnuz", "f8e4m3fnuz")
float8_e5m2 = _make("float8_e5m2", "f8e5m2")
float8_e5m2fnuz = _make("float8_e5m2fnuz", "f8e5m2fnuz")
float8_e8m0fnu = _make("float8_e8m0fnu", "f8e8m0", signed=False)
float4_e2m1fn = _make("float4_e2m1fn", "f4e2m1")
int4 = _make("int4", "i4")
uint4 = _make("uint4", "u4", signed=False)
int2 = _make("int2", "i2")
uint2 = _make("uint2", "u2", signed=False)
LOWBIT = (float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu, float4_e2m1fn, int4, uint4,
          int2, uint2)

BY_CODE = [None] * len(_info)
for _d in (float32, float64, float16, bfloat16, int8, uint8, int32, int64, bool_, int16, uint16, uint32, uint64) + LOWBIT:
    BY_CODE[_d.code] = _d

ALIASES = {
    "float32": float32, "float": float32, "float64": float64, "double": float64, "float16": float16,
    "half": float16, "bfloat16": bfloat16, "int8": int8, "uint8": uint8, "int32": int32, "int": int32,
    "int64": int64, "long": int64, "bool": bool_, "int16": int16, "short": int16, "uint16": uint16,
    "uint32": uint32, "uint64": uint64,
    **{d.name: d for d in LOWBIT},
}  # and the quantized (_qtensor) and complex (_complex) dtypes, which add themselves


def _by_name(name):
    return ALIASES[name]


_NUMPY = {"float32": float32, "float64": float64, "float16": float16, "int8": int8, "uint8": uint8,
          "int32": int32, "int64": int64, "bool": bool_, "int16": int16, "uint16": uint16, "uint32": uint32,
          "uint64": uint64}


def to_dtype(d, what="dtype"):
    """A dtype from an oar dtype, a torch dtype (by name), a numpy dtype or a Python type."""
    if isinstance(d, dtype):
        return d
    if d is builtins.float:
        return float32
    if d is builtins.int:
        return int64
    if d is builtins.bool:
        return bool_
    name = getattr(d, "name", None) or str(d)
    name = name.replace("torch.", "").replace("oar.", "")
    if name in ALIASES:
        return ALIASES[name]
    raise TypeError(f"{what}: expected a dtype such as oar.float32, got {d!r}")


def promote(a, b):
    """torch's result type of two dtypes: floats beat integers beat bool, wider beats narrower."""
    if a is b:
        return a
    rank = lambda d: (2 if d.is_floating_point else 0 if d is bool_ else 1)
    ra, rb = rank(a), rank(b)
    if ra != rb:
        return a if ra > rb else b
    if {a, b} == {float16, bfloat16}:
        return float32
    if ra == 1 and a.is_signed != b.is_signed:
        u, s = (a, b) if b.is_signed else (b, a)
        if u is not uint8:  # torch 2.x: "Promotion for uint16, uint32, uint64 types is not supported"
            raise TypeError(f"promotion of {u.name} with {s.name} is not supported (as in torch 2.x); cast one "
                            "of them first")
        return s if s.itemsize > 1 else int16  # uint8 with int8 gives int16, as in torch
    return a if a.itemsize >= b.itemsize else b


class finfo:
    """torch.finfo: the limits of a floating dtype (IEEE binary16/32/64 and bfloat16)."""

    # (bits, mantissa bits stored, exponent bits, decimal resolution digits)
    _FORMATS = {"float16": (16, 10, 5, 3), "bfloat16": (16, 7, 8, 2), "float32": (32, 23, 8, 6),
                "float64": (64, 52, 11, 15)}

    def __init__(self, type=None):
        from . import get_default_dtype

        d = get_default_dtype() if type is None else to_dtype(type, "finfo")
        if d.name not in self._FORMATS:
            raise TypeError(f"torch.finfo() requires a floating point input type, got {d.name}. Use torch.iinfo "
                            "to handle integer types")
        self.dtype = d.name
        self.bits, man, exp, digits = self._FORMATS[d.name]
        bias = (1 << (exp - 1)) - 1
        self.eps = 2.0 ** -man
        self.max = (2.0 - 2.0 ** -man) * 2.0 ** bias
        self.min = -self.max
        self.tiny = self.smallest_normal = 2.0 ** (1 - bias)
        self.resolution = 10.0 ** -digits

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """torch.iinfo: the limits of an integer dtype."""

    def __init__(self, type):
        d = to_dtype(type, "iinfo")
        if d.is_floating_point or d is bool_:
            raise TypeError(f"torch.iinfo() requires an integer input type, got {d.name}. Use torch.finfo to handle "
                            "floating types")
        self.dtype, self.bits = d.name, 8 * d.itemsize
        self.min = -(1 << (self.bits - 1)) if d.is_signed else 0
        self.max = (1 << (self.bits - 1)) - 1 if d.is_signed else (1 << self.bits) - 1

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
