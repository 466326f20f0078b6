"""Zero-copy exchange with NumPy (buffer protocol, from_numpy) and DLPack (NumPy >= 1.22 and
torch, both directions): writes on one side show on the other; lifetimes hold."""
import gc

import numpy as np
import pytest

import oar


def test_from_numpy_shares_memory():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = oar.from_numpy(a)
    assert t.shape == (2, 3) and t.dtype is oar.float32
    a[0, 0] = 42
    assert t[0, 0].item() == 42
    t[1, 2] = -1
    assert a[1, 2] == -1
    del a
    gc.collect()
    assert t.sum().item() == 42 + 1 + 2 + 3 + 4 - 1  # the tensor keeps the array alive
    for dt, odt in [(np.float64, oar.float64), (np.int64, oar.int64), (np.int32, oar.int32), (np.uint8, oar.uint8),
                    (np.bool_, oar.bool), (np.float16, oar.float16), (np.int8, oar.int8)]:
        assert oar.from_numpy(np.zeros(3, dtype=dt)).dtype is odt
    assert oar.from_numpy(np.zeros((0, 4), np.float32)).shape == (0, 4)
    assert oar.from_numpy(np.array(3.0, dtype=np.float32)).shape == ()


def test_numpy_shares_memory():
    t = oar.zeros(2, 3)
    a = t.numpy()
    a[1, 1] = 5
    assert t[1, 1].item() == 5
    t.add_(1)
    assert a[0, 0] == 1
    v = t[:, 1:]  # a strided view: numpy sees the strides, no copy
    av = np.asarray(v)
    assert av.strides == (12, 4) and av.shape == (2, 2)
    av[0, 0] = 9
    assert t[0, 1].item() == 9
    del t, v
    gc.collect()
    assert a[0, 1] == 9  # the array keeps the tensor alive
    mv = memoryview(oar.arange(4))
    assert mv.format == "q" and mv.tolist() == [0, 1, 2, 3]


def test_dlpack_with_numpy():
    if not hasattr(np, "from_dlpack"):
        pytest.skip("numpy < 1.22 has no from_dlpack")
    t = oar.arange(6).float().reshape(2, 3)
    a = np.from_dlpack(t)  # numpy marks it read-only; writes on oar's side show through
    t[0, 0] = 7
    assert a[0, 0] == 7 and t.__dlpack_device__() == (1, 0)
    b = np.arange(4, dtype=np.float64)
    u = oar.from_dlpack(b)
    b[3] = -3
    assert u.dtype is oar.float64 and u.tolist() == [0, 1, 2, -3]
    del b
    gc.collect()
    assert u.sum().item() == 0
    cap = oar.ones(2).__dlpack__()
    oar.from_dlpack(cap)
    with pytest.raises(TypeError, match="consumed once"):
        oar.from_dlpack(cap)
    with pytest.raises(RuntimeError, match="Can't export tensors that require gradient"):
        oar.ones(2, requires_grad=True).__dlpack__()


def test_dlpack_with_torch(torch):
    from torch.utils.dlpack import from_dlpack as torch_from_dlpack

    t = oar.arange(6).float().reshape(2, 3)
    x = torch_from_dlpack(t)
    assert x.dtype == torch.float32 and x.shape == (2, 3)
    x[1, 2] = 100
    assert t[1, 2].item() == 100
    y = torch.arange(5, dtype=torch.int64)
    u = oar.from_dlpack(y)
    y[0] = 9
    assert u.tolist() == [9, 1, 2, 3, 4] and u.dtype is oar.int64
    z = torch.ones(3, dtype=torch.bfloat16)
    assert oar.from_dlpack(z).dtype is oar.bfloat16
    with pytest.raises(RuntimeError, match="a layout that is not row-major"):
        oar.from_dlpack(torch.ones(4, 3).t())  # column-major: the caller copies with .contiguous()
