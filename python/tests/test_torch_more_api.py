"""torch's remaining everyday names (oar/_torch_more.py) and printing with torch's print options
(oar/_format.py), beside torch 1.13: the same values, gradients where the function has them, dtypes,
printed strings and errors."""
import warnings

import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(41)
A = R.standard_normal((4, 5)).astype(np.float32)
B = R.standard_normal((4, 5)).astype(np.float32)
SQ = R.standard_normal((3, 4, 4)).astype(np.float32)


def both(torch, fn, *arrays, grad=True):
    """fn(lib, *tensors) in oar and torch: values equal, and the gradients of sum(out * w) too."""
    outs, grads = [], []
    for lib in (oar, torch):
        ts = [lib.from_numpy(a.copy()) for a in arrays]
        if grad:
            for t in ts:
                t.requires_grad_()
        out = fn(lib, *ts)
        if isinstance(out, (tuple, list)):
            out = out[0]
        outs.append(out.detach().numpy())
        if grad:
            w = np.random.default_rng(5).standard_normal(out.shape).astype(np.float32)
            (out * lib.from_numpy(w)).sum().backward()
            grads.append([t.grad.numpy() if t.grad is not None else None for t in ts])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    for go, gt in zip(*grads) if grad else ():
        np.testing.assert_allclose(go, gt, rtol=1e-5, atol=1e-5)


CASES = {
    "broadcast_to": lambda L, a: L.broadcast_to(a[:1], (3, 5)) + a[:1].broadcast_to((2, 5)).sum(),
    "roll method": lambda L, a: a.roll(2, 1) * a.roll((1, -1), (0, 1)),
    "addmm method": lambda L, a, b: a[:, :4].addmm(a, b.t(), beta=0.5, alpha=2.0),
    "dist": lambda L, a, b: a.dist(b) + a.dist(b, 1) + a.dist(b, 3),
    "slice_scatter": lambda L, a, b: L.slice_scatter(a, b[:, 1:5:2], dim=1, start=1, end=5, step=2),
    "select_scatter": lambda L, a, b: L.select_scatter(a, b[2], 0, 2) * a.select_scatter(b[:, 0], 1, -1),
    "diagonal_scatter": lambda L, a, b: L.diagonal_scatter(a, b.diagonal(1), 1) + a.diagonal_scatter(
        b.diagonal(-1), -1),
    "diagonal_scatter dims": lambda L, s: L.diagonal_scatter(s, s.diagonal(0, 1, 2) * 3, 0, 1, 2),
    "put": lambda L, a, b: L.put(a, L.tensor([0, 7, -1, 12]), b[0, :4]),
    "put accumulate": lambda L, a, b: a.put(L.tensor([1, 1, 19]), b[1, :3], accumulate=True),
    "index_reduce prod": lambda L, a, b: a.index_reduce(0, L.tensor([0, 2, 0]), b[:3], "prod"),
    "index_reduce amax": lambda L, a, b: a.index_reduce(1, L.tensor([4, 0, 4, 1, 1]), b, "amax", include_self=False),
    "index_reduce mean": lambda L, a, b: a.index_reduce(0, L.tensor([3, 3, 1, 0]), b, "mean"),
    "constant_pad_nd": lambda L, a: L.constant_pad_nd(a, (1, 2, 0, 1), 0.5),
    "frobenius_norm": lambda L, a: L.frobenius_norm(a, (0, 1)),
    "nuclear_norm": lambda L, s: L.nuclear_norm(s[0]) + L.nuclear_norm(s, (1, 2)).sum(),
    "split_with_sizes": lambda L, a: L.cat([t * (i + 1) for i, t in enumerate(a.split_with_sizes([2, 3], 1))], 1),
    "unsafe_split": lambda L, a: L.unsafe_split(a, 2, 1)[1] + a.unsafe_chunk(2, 1)[0][:, :1],
    "matrix_power": lambda L, s: L.matrix_power(s, 3) + s.matrix_power(2),
    "mvlgamma": lambda L, a: L.mvlgamma(a.abs() + 2, 3) + (a.abs() + 2).mvlgamma(2),
    "adjoint mH": lambda L, s: s.adjoint() + s.mH,
    "H": lambda L, a: a.H * 2,
    "prelu method": lambda L, a: a.prelu(L.tensor([0.25])),
    "hardshrink method": lambda L, a: a.hardshrink(0.3),
    "conv_tbc": lambda L, a: L.conv_tbc(a.reshape(5, 2, 2), L.ones(3, 2, 4) * 0.5, L.arange(4.0), 1),
    "convolution": lambda L, a: L.convolution(a.reshape(1, 2, 10), a.reshape(4, 1, 5)[:, :, :3], None, [1], [1],
                                              [1], False, [0], 2),
    "convolution transposed": lambda L, a: L.convolution(a.reshape(1, 4, 5), a[:, :3].reshape(4, 1, 3), None,
                                                         [2], [1], [1], True, [1], 1),
    "embedding": lambda L, a: L.embedding(a, L.tensor([[0, 3], [2, 2]]), 2),
    "_copy views": lambda L, s: L.permute_copy(s, (2, 0, 1)).sum(1) + L.t_copy(s[0]) + L.diagonal_copy(s[0])
    + L.select_copy(s, 0, 1) + L.slice_copy(s[0], 1, 0, 4, 2).sum() + L.unsqueeze_copy(s[0], 0)[0]
    + L.expand_copy(s[0, :1], (4, 4)) + L.view_copy(s[1], (16,)).reshape(4, 4) + L.squeeze_copy(s[:1])
    + L.transpose_copy(s[2], 0, 1) + L.alias_copy(s[0]) + L.unbind_copy(s)[1] + L.split_copy(s, 2)[1][0],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    torch = torch_or_skip()
    fn = CASES[name]
    nargs = fn.__code__.co_argcount - 1
    arrays = {"a": A, "b": B, "s": SQ}
    args = [arrays[v] for v in fn.__code__.co_varnames[1:1 + nargs]]
    both(torch, fn, *args)


def test_in_place_forms_and_comparisons():
    torch = torch_or_skip()
    for name, args in (("cumsum_", (1,)), ("tril_", (-1,)), ("triu_", (1,)), ("eq_", (0.5,)), ("lt_", (0.0,)),
                       ("greater_equal_", (0.1,)), ("not_equal_", (0.0,)), ("le_", (B,)), ("addmm_", (A, B.T)),
                       ("index_reduce_", (0, np.array([1, 0]), B[:2], "amin"))):
        res = []
        for lib in (oar, torch):
            base = A[:, :4].copy() if name == "addmm_" else A.copy()
            t = lib.from_numpy(base)
            conv = [lib.from_numpy(x.copy()) if isinstance(x, np.ndarray) else x for x in args]
            r = getattr(t, name)(*conv)
            assert r is t, name
            res.append(t.numpy())
        np.testing.assert_allclose(res[0], res[1], rtol=1e-5, atol=1e-5, err_msg=name)
        assert res[0].dtype == res[1].dtype, name


def test_histogram_matches_torch():
    torch = torch_or_skip()
    x = R.standard_normal(200).astype(np.float32)
    w = R.random(200).astype(np.float32)
    for kwargs in (dict(bins=7), dict(bins=5, range=(-1.0, 2.0)), dict(bins=6, density=True),
                   dict(bins=4, weight=w)):
        ko = {k: oar.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        kt = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
        ho, eo = oar.histogram(oar.from_numpy(x), **ko)
        ht, et = torch.histogram(torch.from_numpy(x), **kt)
        np.testing.assert_allclose(eo.numpy(), et.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ho.numpy(), ht.numpy(), rtol=1e-5, atol=1e-6, err_msg=str(kwargs))
    edges = np.array([-3.0, -0.5, 0.0, 0.25, 3.0], dtype=np.float32)
    ho = oar.from_numpy(x).histogram(oar.from_numpy(edges)).hist
    ht = torch.from_numpy(x).histogram(torch.from_numpy(edges)).hist
    np.testing.assert_array_equal(ho.numpy(), ht.numpy())


def test_dtype_queries_match_torch():
    torch = torch_or_skip()
    names = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool"]
    for a in names:
        for b in names:
            to, tt = getattr(oar, a), getattr(torch, b)
            assert oar.can_cast(getattr(oar, a), getattr(oar, b)) == torch.can_cast(getattr(torch, a), tt), (a, b)
            assert oar.promote_types(to, getattr(oar, b)).name == str(torch.promote_types(
                getattr(torch, a), tt)).split(".")[-1], (a, b)
    for x, y in ((np.ones(3, np.int32), 2.5), (np.ones(3, np.int64), True), (np.ones(3, np.float16), 2.0),
                 (np.ones(3, np.uint8), np.array(5, np.int64)), (np.array(1.0), np.ones(3, np.int32)),
                 (np.ones(2, np.int32), np.ones(2, np.int64)), (np.array(True), 3)):
        conv = lambda lib, v: lib.from_numpy(v) if isinstance(v, np.ndarray) else v
        ro = oar.result_type(conv(oar, x), conv(oar, y))
        rt = torch.result_type(conv(torch, x), conv(torch, y))
        assert ro.name == str(rt).split(".")[-1], (x.dtype, y, ro, rt)


def test_creation_functions():
    torch = torch_or_skip()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = oar.range(1, 4, 0.5)
    assert any("torch.range is deprecated" in str(m.message) for m in w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(r.numpy(), torch.range(1, 4, 0.5).numpy())
        assert oar.range(5).dtype == oar.float32 and oar.range(5).numpy().tolist() == [0, 1, 2, 3, 4, 5]
    buf = bytearray(np.arange(6, dtype=np.float32).tobytes())
    t = oar.frombuffer(buf, dtype=oar.float32, count=3, offset=8)
    assert t.numpy().tolist() == torch.frombuffer(bytearray(buf), dtype=torch.float32, count=3, offset=8).tolist()
    t[0] = 9.0   # shares the buffer's memory
    assert np.frombuffer(buf, np.float32)[2] == 9.0
    with pytest.raises(ValueError, match="multiple of element size"):
        oar.frombuffer(bytearray(7), dtype=oar.float32)
    a = np.arange(4.0, dtype=np.float32)
    shared = oar.asarray(a)
    a[0] = 5.0
    assert shared[0].item() == 5.0 and oar.asarray(a, copy=True) is not None
    assert oar.asarray([1, 2]).dtype == oar.int64 and oar.asarray(shared, dtype=oar.float64).dtype == oar.float64
    with pytest.raises(ValueError, match="copy=False"):
        oar.asarray([1.0], copy=False)
    ri = oar.randint_like(oar.zeros(50, dtype=oar.int32), 3, 6)
    assert ri.dtype == oar.int32 and ri.min().item() >= 3 and ri.max().item() < 6
    assert oar.fill(oar.zeros(2, 2), 1.5).numpy().tolist() == [[1.5, 1.5], [1.5, 1.5]]


def test_switches_and_properties():
    torch = torch_or_skip()
    assert not oar.are_deterministic_algorithms_enabled()
    oar.use_deterministic_algorithms(True, warn_only=True)
    assert oar.are_deterministic_algorithms_enabled() and oar.is_deterministic_algorithms_warn_only_enabled()
    assert oar.get_deterministic_debug_mode() == 1
    oar.set_deterministic_debug_mode("error")
    assert oar.get_deterministic_debug_mode() == 2 and not oar.is_deterministic_algorithms_warn_only_enabled()
    oar.set_deterministic_debug_mode(0)
    assert not oar.are_deterministic_algorithms_enabled()
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        oar.set_deterministic_debug_mode("loud")
    oar.set_float32_matmul_precision("high")
    assert oar.get_float32_matmul_precision() == "high"
    oar.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError, match="Invalid precision"):
        oar.set_float32_matmul_precision("low")
    t = oar.ones(2, 3)
    assert t.is_cpu and not t.is_sparse and not t.is_complex() and not t.is_conj() and t.conj() is t
    assert t.char().dtype == oar.int8 and t.resolve_conj() is t
    with pytest.raises(RuntimeError, match="tensor.H is only supported on matrices"):
        oar.ones(2, 2, 2).H
    with pytest.raises(RuntimeError, match="split_sizes to sum exactly to 5"):
        oar.ones(2, 5).split_with_sizes([2, 2], 1)
    with pytest.raises(RuntimeError, match="Expected reduce to be one of"):
        oar.ones(2).index_reduce(0, oar.tensor([0]), oar.ones(1), "sum")
    assert torch.ones(2).is_cpu   # the oracle agrees on the basics


PRINT_CASES = [np.arange(40.0) * 1.5, np.arange(60).reshape(2, 30), np.array([1.0, 2000.0]), np.array([1.5, 1e-5]),
               np.array([1.0, np.inf, np.nan]), np.array([1e9, 1.0]), np.arange(2000.0).reshape(2, 1000),
               R.standard_normal((3, 4, 5)), R.standard_normal(1200), np.array(3.25), np.zeros((0, 3)),
               np.array([True, False]), R.standard_normal((20, 30)) * 100, np.array([-0.0, 0.0]),
               np.arange(10 ** 4).reshape(10, 10, 100), np.array([1e-5, 2e-5]), np.array([123456.789]),
               np.array([1.0, -2.0, 3.0]), np.array([0.0, 0.0]), R.standard_normal((2, 3)).astype(np.float32)]
PRINT_OPTIONS = [dict(), dict(precision=2, linewidth=50), dict(sci_mode=True), dict(sci_mode=False),
                 dict(threshold=5, edgeitems=1), dict(profile="short"), dict(profile="full", linewidth=120)]


@pytest.mark.parametrize("k", range(len(PRINT_OPTIONS)))
def test_printing_matches_torch(k):
    """The same strings as torch's (the dtype named oar.* instead of torch.*) for each print option."""
    torch = torch_or_skip()
    try:
        torch.set_printoptions(**PRINT_OPTIONS[k])
        oar.set_printoptions(**PRINT_OPTIONS[k])
        for a in PRINT_CASES:
            want = repr(torch.from_numpy(np.ascontiguousarray(a))).replace("torch.", "oar.")
            got = repr(oar.from_numpy(np.ascontiguousarray(a)))
            if "dtype" in want and want.replace(",\n       dtype", ", dtype") == got.replace(",\n       dtype",
                                                                                               ", dtype"):
                continue   # where the dtype's line breaks may differ: "oar." is two characters shorter
            assert got == want, f"{PRINT_OPTIONS[k]} {a.shape}:\n{got}\n!=\n{want}"
    finally:
        torch.set_printoptions(profile="default")
        oar.set_printoptions(profile="default")
    with pytest.raises(ValueError, match="expected profile"):
        oar.set_printoptions(profile="long")


@pytest.mark.parametrize("kwargs", [dict(padding_idx=2), dict(padding_idx=-1), dict(scale_grad_by_freq=True),
                                    dict(padding_idx=0, scale_grad_by_freq=True), dict(max_norm=1.0),
                                    dict(max_norm=0.5, norm_type=1.0, padding_idx=1)])
def test_embedding_options_match_torch(kwargs):
    """padding_idx keeps its row's gradient zero, scale_grad_by_freq divides by the lookups, max_norm
    renormalizes the rows looked up in place: the module, its output, the weight after, the gradient."""
    torch = torch_or_skip()
    w = (R.standard_normal((6, 4)) * 2).astype(np.float32)
    idx = np.array([[0, 2, 2, 5], [1, 2, 0, 0]])
    res = []
    for lib in (oar, torch):
        m = lib.nn.Embedding.from_pretrained(lib.from_numpy(w.copy()), freeze=False, **kwargs)
        out = m(lib.from_numpy(idx))
        (out * lib.arange(4.0)).sum().backward()
        res.append((out.detach().numpy(), m.weight.detach().numpy(), m.weight.grad.numpy(), repr(m)))
    for o, t in zip(res[0][:3], res[1][:3]):
        np.testing.assert_allclose(o, t, rtol=1e-6, atol=1e-6)
    assert res[0][3] == res[1][3]
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        oar.nn.Embedding(3, 2, padding_idx=3)


def test_in_place_view_ops_and_resize():
    torch = torch_or_skip()
    for name, args in (("t_", ()), ("transpose_", (0, 1)), ("swapaxes_", (1, 0)), ("swapdims_", (0, 1)),
                       ("resize_", (2, 10)), ("resize_", ((3, 3),)), ("resize_", (25,))):
        res = []
        for lib in (oar, torch):
            t = lib.from_numpy(A.copy()).clone()   # (torch cannot grow a NumPy array's storage)
            r = getattr(t, name)(*args)
            assert r is t
            res.append((tuple(t.shape), t.numpy().ravel()[:20].copy()))
        assert res[0][0] == res[1][0], name
        np.testing.assert_array_equal(res[0][1], res[1][1])   # (growing: the first 20 are the old ones)
    t = oar.from_numpy(A.copy())
    t.resize_as_(oar.ones(5, 4))
    assert tuple(t.shape) == (5, 4) and t.nbytes == 80 and t.itemsize == 4
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        oar.ones(3, requires_grad=True).resize_(2)


def test_python_elementwise_methods():
    torch = torch_or_skip()
    res = []
    for lib in (oar, torch):
        t = lib.arange(6.0).reshape(2, 3)
        r = t.apply_(lambda v: v * v - 1)
        assert r is t
        t.map_(lib.tensor([1.0, 2.0, 3.0]), lambda a, b: a + 10 * b)
        t.map2_(lib.ones(2, 3), lib.full((2, 1), 2.0), lambda a, b, c: a * c - b)
        res.append(t.numpy().copy())
    np.testing.assert_array_equal(res[0], res[1])
    with pytest.raises(RuntimeError, match="requires grad"):
        oar.ones(2, requires_grad=True).apply_(lambda v: v)


@pytest.mark.parametrize("kwargs", [dict(), dict(spacing=2.0), dict(edge_order=2), dict(dim=1),
                                    dict(spacing=[0.5, 3.0]), dict(dim=0, edge_order=2, spacing=1.5),
                                    dict(coords=True), dict(coords=True, edge_order=2)])
def test_gradient_matches_torch(kwargs):
    torch = torch_or_skip()
    f = (R.standard_normal((5, 6)) * 3).astype(np.float64)
    cx, cy = np.cumsum(R.random(5) + 0.2), np.cumsum(R.random(6) + 0.2)
    res = []
    for lib in (oar, torch):
        kw = dict(kwargs)
        if kw.pop("coords", False):
            kw["spacing"] = (lib.from_numpy(cx.copy()), lib.from_numpy(cy.copy()))
        x = lib.from_numpy(f.copy()).requires_grad_()
        gs = lib.gradient(x, **kw)
        sum(((g * g).sum() for g in gs), lib.zeros(())).backward()
        res.append(([g.detach().numpy() for g in gs], x.grad.numpy()))
    for a, b in zip(res[0][0], res[1][0]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-10, atol=1e-10)


def test_small_top_level_functions():
    torch = torch_or_skip()
    a = np.array([1.0, 0.0, -2.5], np.float32)
    np.testing.assert_array_equal(oar.nextafter(oar.from_numpy(a), oar.ones(3)).numpy(),
                                  torch.nextafter(torch.from_numpy(a), torch.ones(3)).numpy())
    e = oar.empty_strided((2, 3), (1, 2))
    assert tuple(e.shape) == (2, 3) and tuple(e.stride()) == (1, 2)
    t = oar.zeros(3)
    assert oar.fill_(t, 2.0) is t and t.numpy().tolist() == [2.0, 2.0, 2.0]
    assert oar.clamp_(t, max=1.0) is t and t.numpy().tolist() == [1.0, 1.0, 1.0]
    assert oar.get_device(t) == torch.get_device(torch.zeros(3)) and not oar.is_inference(t)
    oar.set_default_tensor_type(oar.FloatTensor)
    oar.set_default_tensor_type("torch.FloatTensor")
    with pytest.raises(NotImplementedError, match="default tensor type"):
        oar.set_default_tensor_type("torch.DoubleTensor")


def test_tensor_flags_and_small_methods_match_torch():
    torch = torch_or_skip()
    res = []
    for lib in (oar, torch):
        t = lib.from_numpy(A.copy())
        flags = [t.is_meta, t.is_mps, t.is_nested, t.is_sparse_csr, t.is_inference(), t.is_shared(),
                 t.is_pinned(), t.has_names(), t.names, t.real is t, str(t.layout).split(".")[-1]]
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes"):
            t.imag
        vals = [t.narrow_copy(1, 1, 3).numpy(), t.to_dense().numpy(), t.new_empty_strided((2, 3), (3, 1)).shape,
                [s.numpy() for s in t.unsafe_split_with_sizes([1, 3], 0)]]
        res.append((flags, vals, str(t.cfloat().dtype).split(".")[-1]))
    assert res[0][0] == res[1][0] and res[0][2] == res[1][2]
    np.testing.assert_array_equal(res[0][1][0], res[1][1][0])
    assert tuple(res[0][1][2]) == tuple(res[1][1][2])
    x = R.standard_normal(300).astype(np.float32)
    so = oar.from_numpy(x).stft(64, window=oar.hann_window(64), return_complex=True)
    st = torch.from_numpy(x).stft(64, window=torch.hann_window(64), return_complex=True)
    np.testing.assert_allclose(so.real.numpy(), st.real.numpy(), rtol=1e-4, atol=1e-4)


def test_jit_typing_helpers_and_fork():
    torch = torch_or_skip()
    for lib in (oar, torch):
        assert lib.jit.annotate(list, [1]) == [1] and lib.jit.Attribute(3, int).value == 3
        fut = lib.jit.fork(lambda a, b: a + b, lib.ones(2), b=lib.ones(2))
        assert lib.jit.wait(fut).tolist() == [2.0, 2.0]
        class Iface:
            def forward(self, x: int) -> int:
                pass

        assert lib.jit.interface(Iface) is not None and lib.jit.script_if_tracing(len)([1, 2]) == 2
