"""Bad input from Python, one family at a time: each raises the exception torch raises (or the
closest one), carrying oar's message, and nothing crashes."""
import gc

import numpy as np
import pytest

import oar
from oar import _C

F = oar.nn.functional


@pytest.mark.parametrize("fn, exc, msg", [
    # shapes (the C core's inference, house style: op, expected, got)
    (lambda: oar.ones(2, 3) @ oar.ones(4, 5), RuntimeError, "matmul: expected"),
    (lambda: oar.ones(2, 3) + oar.ones(4), RuntimeError, "add: "),
    (lambda: oar.ones(2, 3).view(7), RuntimeError, "reshape"),
    (lambda: oar.cat([oar.ones(2, 3), oar.ones(2, 4)], 0), RuntimeError, "concat"),
    (lambda: F.conv2d(oar.ones(1, 3, 5, 5), oar.ones(4, 2, 3, 3)), RuntimeError, "conv2d: expected"),
    (lambda: F.cross_entropy(oar.ones(3, 4), oar.tensor([0, 1])), RuntimeError, "cross_entropy"),
    # dims and indices out of range
    (lambda: oar.ones(2, 3).sum(5), IndexError, "sum: expected dims in [-2, 1], got 5"),
    (lambda: oar.ones(2, 3).transpose(0, 3), IndexError, "Dimension out of range"),
    (lambda: oar.ones(2, 3)[2], IndexError, "index 2 is out of bounds for dimension 0 with size 2"),
    (lambda: oar.ones(2, 3)[0, 0, 0], IndexError, "too many indices for tensor of dimension 2"),
    (lambda: oar.ones(4)[oar.tensor([0, 7])], IndexError, "index 7 is out of bounds"),
    (lambda: oar.ones(2, 3)["a"], IndexError, "only integers, slices"),
    (lambda: oar.ones(3)[oar.tensor([0.5])], IndexError, "tensors used as indices must be long"),
    (lambda: F.embedding(oar.tensor([5]), oar.ones(3, 2)), IndexError, "embedding"),
    # dtypes
    (lambda: oar.ones(2) @ oar.ones(2, dtype=oar.int64).bool(), (TypeError, RuntimeError), "matmul"),
    (lambda: oar.tensor([1, 2]).mean(), TypeError, "mean"),
    (lambda: oar.zeros(2, dtype="quaternion"), TypeError, "expected a dtype"),
    (lambda: oar.zeros(2, dtype=oar.complex64), TypeError, "dtype of complex tensors: make one with"),
    (lambda: oar.ones(2).to(oar.bfloat16).numpy(), TypeError, "numpy has no bfloat16"),
    # wrong Python types and None
    (lambda: oar.ones(2) + "a", TypeError, "argument 'other' must be Tensor or Number, not str"),
    (lambda: oar.exp([1.0]), TypeError, "exp(): argument 'input' must be Tensor, not list"),
    (lambda: oar.ops.add(oar.ones(2), None), TypeError, "add: input 1 is None; expected a Tensor"),
    (lambda: oar.ops.add(oar.ones(2), 3), TypeError, "add: expected input 1 to be a Tensor, got int"),
    (lambda: oar.ops.sum(oar.ones(2), dims="x", keepdim=0), TypeError, "sum: expected 'dims' to be a list of ints"),
    (lambda: oar.ops.sum(oar.ones(2), keepdim=True), ValueError, "sum: missing attribute 'dims'"),
    (lambda: oar.ops.sum(oar.ones(2), dims=[0], keepdim=0, bogus=1), TypeError, "unexpected keyword argument 'bogus'"),
    (lambda: oar.ops.sum(oar.ones(2), dims=list(range(20)), keepdim=0), ValueError, "at most 16 values"),
    (lambda: oar.zeros(2, "3"), TypeError, "must be tuple of ints"),
    (lambda: oar.zeros(-1), RuntimeError, "negative dimension"),
    (lambda: oar.tensor([[1, 2], [3]]), ValueError, "ragged"),
    (lambda: oar.tensor(object()), TypeError, "could not infer dtype"),
    (lambda: oar.ones(2).register_hook(5), TypeError, "expected a callable"),
    (lambda: _C.TensorBase().numel(), RuntimeError, "holds no data"),
    (lambda: _C.TensorBase().shape, RuntimeError, "holds no data"),
    # autograd misuse
    (lambda: oar.ones(2, requires_grad=True).backward(), RuntimeError, "grad can be implicitly created only for scalar"),
    (lambda: oar.ones(1).backward(), RuntimeError, "does not require grad"),
    (lambda: oar.ones(2).register_hook(lambda g: g), RuntimeError, "doesn't require gradient"),
    (lambda: bool(oar.ones(2)), RuntimeError, "Boolean value of Tensor with more than one value is ambiguous"),
    (lambda: oar.ones(2).item(), RuntimeError, "cannot be converted to Scalar"),
    (lambda: oar.ones(2, requires_grad=True).numpy(), RuntimeError, "Can't call numpy() on Tensor that requires grad"),
    (lambda: len(oar.tensor(1.0)), TypeError, "len() of a 0-d tensor"),
    # nn and optim arguments
    (lambda: oar.nn.Linear(2, 3)(oar.ones(4, 5)), RuntimeError, "linear"),
    (lambda: oar.nn.Dropout(1.5), ValueError, "dropout probability has to be between 0 and 1"),
    (lambda: oar.nn.BatchNorm2d(3)(oar.ones(2, 3)), ValueError, "expected 4D input (got 2D input)"),
    (lambda: F.cross_entropy(oar.ones(2, 3), oar.tensor([0, 1]), reduction="avg"), ValueError,
     "avg is not a valid value for reduction"),
    (lambda: oar.optim.SGD([], lr=0.1), ValueError, "optimizer got an empty parameter list"),
    (lambda: oar.optim.SGD([oar.ones(2, requires_grad=True)]), ValueError, "a learning rate (lr) is required"),
    (lambda: oar.optim.Adam([oar.ones(2, requires_grad=True)], betas=(1.5, 0.9)), ValueError, "Invalid beta"),
    (lambda: oar.optim.SGD([oar.ones(2, requires_grad=True)], lr=-1), ValueError, "Invalid learning rate"),
    (lambda: oar.nn.Module().register_parameter("w", oar.ones(2)), TypeError, "nn.Parameter or None required"),
    # files
    (lambda: oar.load(__file__), ValueError, "safetensors"),
    (lambda: oar.load("/nonexistent/model.safetensors"), OSError, "No such file"),
    (lambda: oar.save({"a": 1}, "/tmp/x.safetensors"), TypeError, "expected a tensor or a (nested) dict of tensors"),
    # interop
    (lambda: oar.from_numpy([1, 2]), TypeError, "expected np.ndarray"),
    (lambda: oar.from_numpy(np.ones((3, 3))[:, ::2]), TypeError, "not C-contiguous"),
    (lambda: oar.from_numpy(np.ones(2, dtype=np.complex64)), TypeError, "unsupported element type"),
    (lambda: oar.from_dlpack(5), TypeError, "expected an object with __dlpack__"),
])
def test_bad_input_raises(fn, exc, msg):
    with pytest.raises(exc) as info:
        fn()
    assert msg in str(info.value), f"message was: {info.value}"


def test_status_mapping():
    assert _C.status_exception(1, "sum: expected dim in [-1, 0] for a 1-d input, got 3") is IndexError
    assert _C.status_exception(1, "linear: bad option") is ValueError
    assert _C.status_exception(1, "add: expected all inputs on one device, got input 0 on cuda and input 1 on cpu") \
        is RuntimeError
    assert _C.status_exception(2, "matmul: expected ...") is RuntimeError
    assert _C.status_exception(3, "x") is TypeError
    assert _C.status_exception(4, "x") is MemoryError
    assert _C.status_exception(5, "x") is OSError
    assert _C.status_exception(8, "x") is RuntimeError


def test_errors_do_not_poison_later_calls():
    for _ in range(3):
        with pytest.raises(RuntimeError):
            oar.ones(2, 3) @ oar.ones(4, 5)
        assert (oar.ones(2) + 1).tolist() == [2.0, 2.0]
    gc.collect()


def test_every_op_survives_random_arguments():
    """Every op of the table called with random tensors (any rank, empty dims, mixed dtypes,
    missing optional inputs) and random attributes of the right kinds: each call returns or
    raises a Python exception, never crashes (the sanitizer build runs this too)."""
    import random

    from oar._ops import TABLE, call  # the table's ops themselves (oar.ops.nms/roi_align are torchvision's wrappers)

    rnd = random.Random(0)
    kinds = {1: lambda: rnd.choice([0, 1, -1, 2, 3, 7]), 2: lambda: rnd.choice([0.0, 0.5, -1.0, 2.0]),
             3: lambda: [rnd.choice([0, 1, 2, -1, 3]) for _ in range(rnd.choice([0, 1, 2, 3]))],
             4: lambda: rnd.choice(["ij,jk->ik", "", "bad", "i->i"]), 5: lambda: rnd.choice([0, 1, 7, 8])}

    def tensor():
        shape = tuple(rnd.choice([0, 1, 2, 3]) for _ in range(rnd.choice([0, 1, 2, 3, 4])))
        dt = rnd.choice([oar.float32, oar.float64, oar.int64, oar.bool, oar.float16])
        return oar.randn(*shape).to(dt) if dt.is_floating_point else oar.randint(0, 3, shape).to(dt)

    calls = 0
    for row in TABLE:
        if row["flags"] & (1 << 10):
            continue  # control flow is made by oar_cond / oar_while, not called by name
        for _ in range(20):
            n = row["n_inputs"] if row["n_inputs"] >= 0 else rnd.choice([1, 2, 3])
            ins = [None if (row["optional_inputs"] >> i) & 1 and rnd.random() < 0.3 else tensor() for i in range(n)]
            try:
                call(row["name"], ins, {a: kinds[k]() for a, k in row["attrs"]})
            except (ValueError, TypeError, RuntimeError, IndexError, MemoryError, OverflowError):
                pass
            calls += 1
    assert calls > 2000
