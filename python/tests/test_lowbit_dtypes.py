"""The low-bit dtypes under torch 2.x's names (oar.float8_e4m3fn, ..., oar.int4); torch 1.13 has none,
so the oracle is each format's bit fields, written out here: every code's value, and rounding to the
nearest value with ties to the even code. Also the integers' wrap, the refusals and printing."""
import math
import struct

import pytest

import oar

# (exponent bits, mantissa bits, bias, special-value family)
FORMATS = {
    "float8_e4m3fn": (4, 3, 7, "fn"),
    "float8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "float8_e5m2": (5, 2, 15, "ieee"),
    "float8_e5m2fnuz": (5, 2, 16, "fnuz"),
    "float4_e2m1fn": (2, 1, 1, "none"),
}


def code_value(e, m, bias, kind, c):
    width = 1 + e + m
    sign, ex, man = c >> (width - 1), (c >> m) & ((1 << e) - 1), c & ((1 << m) - 1)
    if kind == "fnuz" and c == 1 << (width - 1):
        return math.nan
    if kind == "fn" and ex == (1 << e) - 1 and man == (1 << m) - 1:
        return math.nan
    if kind == "ieee" and ex == (1 << e) - 1:
        return math.nan if man else (-math.inf if sign else math.inf)
    v = man / 2 ** m * 2.0 ** (1 - bias) if ex == 0 else (1 + man / 2 ** m) * 2.0 ** (ex - bias)
    return -v if sign else v


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def nearest_even(e, m, bias, kind, x):
    """x rounded to the format (no overflow here): the nearest finite value, ties to the even code."""
    codes = [(code_value(e, m, bias, kind, c), c) for c in range(1 << (1 + e + m))]
    finite = [(v, c) for v, c in codes if math.isfinite(v) and (v != 0 or c == 0 or kind != "fnuz")]
    best = min(finite, key=lambda vc: (abs(vc[0] - x), vc[1] & 1, vc[1] if x >= 0 else -vc[1]))
    return best[0]


def test_names():
    for name in FORMATS:
        d = getattr(oar, name)
        assert d.itemsize == 1 and d.is_floating_point and repr(d) == "oar." + name
    assert oar.int4.is_signed and not oar.uint4.is_signed and not oar.int2.is_floating_point
    assert oar.float8_e8m0fnu.itemsize == 1


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_code_and_rounding(name):
    e, m, bias, kind = FORMATS[name]
    d = getattr(oar, name)
    width = 1 + e + m
    # every finite value of the format survives a round trip through f32
    values = [code_value(e, m, bias, kind, c) for c in range(1 << width)]
    finite = [v for v in values if math.isfinite(v)]
    assert oar.tensor(finite).to(d).to(oar.float32).tolist() == finite
    # values between them round to the nearest, ties to the even code
    top = max(finite)
    xs = sorted({f32(v) for v in finite if v >= 0})
    probes = []
    for lo, hi in zip(xs, xs[1:]):
        mid = (lo + hi) / 2
        probes += [f32(mid), f32(lo + (hi - lo) * 0.3), f32(lo + (hi - lo) * 0.7)]
    probes += [-p for p in probes]
    got = oar.tensor(probes).to(d).to(oar.float32).tolist()
    want = [nearest_even(e, m, bias, kind, p) for p in probes]
    assert got == want
    # beyond the range: NaN (fn, fnuz), inf (e5m2), the largest value (e2m1: no inf or NaN)
    big = oar.tensor([top * 4, -top * 4]).to(d).to(oar.float32).tolist()
    if kind == "ieee":
        assert big == [math.inf, -math.inf]
    elif kind == "none":
        assert big == [top, -top]
    else:
        assert all(math.isnan(v) for v in big)


def test_integers_wrap_and_refusals():
    assert oar.tensor([-9, 8, 7, -8, 16]).to(oar.int4).tolist() == [7, -8, 7, -8, 0]
    assert oar.tensor([-1.0, 2.9, 4.0]).to(oar.uint2).tolist() == [3, 2, 0]
    x = oar.tensor([1.0, 2.0, 500.0]).to(oar.float8_e5m2)
    assert x.dtype is oar.float8_e5m2 and repr(x) == "tensor([  1.,   2., 512.], dtype=oar.float8_e5m2)"
    with pytest.raises(Exception, match="f8e5m2"):
        x + x
    with pytest.raises(TypeError, match="numpy has no f8e5m2"):
        x.numpy()
    assert x.reshape(3, 1).flip(0).to(oar.float32).tolist() == [[512.0], [2.0], [1.0]]
