"""The interchange integer dtypes: oar.int16 (torch.int16 / torch.short, checked against torch 1.13)
and oar.uint16 / uint32 / uint64 (torch 2.x's names; torch 1.13 lacks them, so NumPy is the
oracle): creation, .to(), numpy() / from_numpy, tolist / item, printing and the ops that take them."""
import numpy as np
import pytest

import oar

U64_BIG = [2 ** 63, 1, 2 ** 64 - 1, 0, 3 * 2 ** 62, 5]


def test_names():
    assert oar.int16 is oar.short and oar.int16.itemsize == 2 and oar.int16.is_signed
    for d, size in ((oar.uint16, 2), (oar.uint32, 4), (oar.uint64, 8)):
        assert d.itemsize == size and not d.is_signed and not d.is_floating_point
    assert oar.iinfo(oar.uint64).max == 2 ** 64 - 1 and oar.iinfo(oar.int16).min == -32768


def test_int16_like_torch(torch):
    vals = [[32767, -32768, 5], [-1, 0, 300]]
    a, t = oar.tensor(vals, dtype=oar.int16), torch.tensor(vals, dtype=torch.int16)
    assert a.dtype is oar.int16 and a.tolist() == t.tolist()
    one, tone = oar.ones(2, 3, dtype=oar.short), torch.ones(2, 3, dtype=torch.short)
    for f in (lambda x, o: x + o, lambda x, o: x - o, lambda x, o: x * o, lambda x, o: -x, lambda x, o: abs(x),
              lambda x, o: x // (o + 1), lambda x, o: x & 7, lambda x, o: x >> 1, lambda x, o: x.max(),
              lambda x, o: x.amin(1), lambda x, o: x.argmax(), lambda x, o: x.sum(), lambda x, o: x < o,
              lambda x, o: x.flip(0), lambda x, o: x.T.contiguous(), lambda x, o: oar.where(x > 0, x, o)
              if isinstance(x, oar.Tensor) else torch.where(x > 0, x, o)):
        got, want = f(a, one), f(t, tone)
        assert got.tolist() == want.tolist(), (got, want)
        assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    f = [3.7, -3.7, 40000.0, -40000.0]
    assert oar.tensor(f).to(oar.int16).tolist()[:2] == torch.tensor(f).to(torch.int16).tolist()[:2]
    assert oar.tensor(f).to(oar.int16).tolist()[2:] == [32767, -32768]  # oar clamps; torch leaves it undefined
    assert a.to(oar.float32).tolist() == t.to(torch.float32).tolist()
    assert a.to(oar.int8).tolist() == t.to(torch.int8).tolist()  # wraps, as torch and NumPy
    v, i = a.topk(2, dim=1)
    tv, ti = t.topk(2, dim=1)
    assert v.tolist() == tv.tolist() and i.tolist() == ti.tolist()
    assert repr(a) == repr(t).replace("torch.", "oar.")


def test_unsigned_against_numpy():
    for d, nd in ((oar.uint16, np.uint16), (oar.uint32, np.uint32), (oar.uint64, np.uint64)):
        x = np.array([0, 1, 7, np.iinfo(nd).max, np.iinfo(nd).max // 2 + 1], dtype=nd)
        y = np.array([3, 2, 7, 1, np.iinfo(nd).max], dtype=nd)
        a, b = oar.from_numpy(x.copy()), oar.from_numpy(y.copy())
        assert a.dtype is d and a.numpy().dtype == nd
        with np.errstate(over="ignore"):
            pairs = [(a + b, x + y), (a - b, x - y), (a * b, x * y), (a // b, x // y), (a & b, x & y),
                     (a ^ b, x ^ y), (a < b, x < y), (a >= b, x >= y), (oar.maximum(a, b), np.maximum(x, y)),
                     (oar.minimum(a, b), np.minimum(x, y)), (a.neg(), np.negative(x)),
                     (a.max(), x.max()), (a.min(), x.min()), (a.argmax(), x.argmax()), (a.sum(), x.sum(dtype=np.uint64)),
                     (a.to(oar.float64), x.astype(np.float64)), (a.to(oar.int64), x.astype(np.int64)),
                     (a.to(oar.uint8), x.astype(np.uint8)), (a >> 1, x >> nd(1))]
        for got, want in pairs:
            assert got.numpy().tolist() == np.asarray(want).tolist(), (d, got, want)
        s = a.sort(descending=True).values if hasattr(a, "sort") else a.topk(5).values
        assert s.numpy().tolist() == sorted(x.tolist(), reverse=True)


def test_uint64_above_two_to_63():
    a = oar.tensor(U64_BIG, dtype=oar.uint64)
    assert a.tolist() == U64_BIG and a[2].item() == 2 ** 64 - 1
    assert a.numpy().dtype == np.uint64 and a.numpy().tolist() == U64_BIG
    assert oar.from_numpy(np.array(U64_BIG, np.uint64)).tolist() == U64_BIG
    assert "18446744073709551615" in repr(a) and "dtype=oar.uint64" in repr(a)
    assert a.max().item() == 2 ** 64 - 1 and a.argmin().item() == 3
    assert (a > 2 ** 62).tolist() == [v > 2 ** 62 for v in U64_BIG]
    assert (a // 3).tolist() == [v // 3 for v in U64_BIG]
    assert a.topk(3).values.tolist() == sorted(U64_BIG, reverse=True)[:3]
    assert oar.cat([a, a[:2]]).tolist() == U64_BIG + U64_BIG[:2]
    assert a.reshape(2, 3)[:, 1].tolist() == U64_BIG[1::3]


def test_refused_with_a_message():
    a = oar.ones(3, dtype=oar.uint32)
    assert a.exp().dtype is oar.float32  # as torch: a float of integers
    with pytest.raises((RuntimeError, TypeError, ValueError), match="relu: takes no u32 tensors"):
        a.relu()
    with pytest.raises((RuntimeError, TypeError, ValueError), match="matmul: no kernel for dtype u32"):
        a @ a
    with pytest.raises((RuntimeError, TypeError, ValueError), match="gcd: no kernel for dtype u32"):
        oar.gcd(a, a)
    with pytest.raises(TypeError, match="not supported"):
        a + oar.ones(3, dtype=oar.int16)  # torch 2.x refuses the promotion too
