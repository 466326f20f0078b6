"""The API the last torchvision models (mvit_v2_s, raft, RetinaNet / FCOS / SSD, Mask and Keypoint
R-CNN) and torchaudio's model files needed, each beside torch 1.13: views of non-contiguous tensors, assignment into tensors
autograd records (`attn[:, :, 1:, 1:] += rel_pos`), div's rounding modes and the integer
divisions, unique (also along a dim), cat/stack of more than 64 tensors, F.unfold / F.fold, interpolate's bicubic
and fractional nearest modes, flatten of empty tensors; PReLU, GLU, 1-d pools, ConvTranspose1d, the RNN
cells, weight_norm, window functions, finfo/iinfo, Tensor.new, lazy modules."""
import numpy as np
import pytest

import oar
import oar.nn.functional as OF

from test_torch_behaviours import close

R = np.random.RandomState(14)


def f32(*shape):
    return R.randn(*shape).astype(np.float32)


# ---------------------------------------------------------------- views
def test_view_of_a_non_contiguous_tensor_is_a_view_when_strides_allow(torch):
    x = f32(2, 3, 4, 5)
    o, t = oar.tensor(x).transpose(0, 1), torch.tensor(x).transpose(0, 1)
    v = o.view(3, 2, 20)  # dims 2 and 3 are one contiguous run: merging them needs no copy
    close(v, t.view(3, 2, 20))
    assert not v.is_contiguous()
    for a in (o, t):
        a.view(3, 2, 20)[1, 0, 7] = 42.0
        a.reshape(3, 2, 20)[2, 1, 0] = -1.0  # reshape returns the same view
    assert float(o[1, 0, 1, 2]) == 42.0 and float(o[2, 1, 0, 0]) == -1.0  # shares the storage, as torch's
    close(o, t)
    for lib, a in ((oar, o), (torch, t)):
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            a.view(6, 20)
    close(o.reshape(6, 20), t.reshape(6, 20))  # a copy where no view exists


def test_flatten_of_an_empty_tensor(torch):
    for shape, a, b in (((0, 1, 4), 1, -1), ((3, 0, 2), 0, 1), ((0,), 0, -1)):
        assert tuple(oar.zeros(*shape).flatten(a, b).shape) == tuple(torch.zeros(*shape).flatten(a, b).shape)


# ---------------------------------------------------------------- assignment autograd records
def test_assignment_into_a_recorded_tensor_keeps_gradients(torch):
    x, r, s = f32(2, 3, 4, 4), f32(2, 3, 3, 3), f32(2, 3)
    out = []
    for lib in (oar, torch):
        a, b, c = (lib.tensor(v, requires_grad=True) for v in (x, r, s))
        h = a * 2
        h[:, :, 1:, 1:] += b                     # mvit's relative positions
        z = lib.zeros(2, 5)
        z[:, 1:4] = c                            # a value autograd records into a plain tensor
        z[0, 0] = 7.0
        h[0, 1, lib.tensor([0, 2])] = h[1, 2, :2] * 3  # an integer-tensor index
        ((h.sin() * 1.5).sum() + (z * z).sum()).backward()
        out.append((h, z, a.grad, b.grad, c.grad))
    for p, q, n in zip(out[0], out[1], ("h", "z", "a.grad", "b.grad", "c.grad")):
        close(p, q, what=n)


def test_assignment_into_a_recorded_tensor_compiles():
    import warnings

    w = oar.tensor(f32(3, 4), requires_grad=True)

    def step(x):
        h = x @ w
        h[:, 1:] += 1.5 * x[:, :3]
        z = oar.zeros(2, 6)
        z[:, 1:5] = h
        loss = (z * z).sum()
        loss.backward()
        return loss

    x = oar.tensor(f32(2, 3))
    want = step(x)
    want_grad = w.grad.clone()
    w.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager would warn
        compiled = oar.jit.to_static(step)
        for _ in range(2):  # the trace, then the program
            w.grad = None
            got = compiled(x)
    close(got, want, rtol=1e-6)
    close(w.grad, want_grad, rtol=1e-6)


def test_assignment_under_autograd_refuses_repeated_indices_and_leaves():
    h = oar.ones(4, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="names an element twice"):
        h[oar.tensor([1, 1])] = oar.tensor([2.0, 3.0], requires_grad=True)
    leaf = oar.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf[0] = 2.0


# ---------------------------------------------------------------- integer division
@pytest.mark.parametrize("mode", [None, "floor", "trunc"])
def test_div_rounding_modes(torch, mode):
    a = np.array([7, -7, 9, -9, 0, 5, 2 ** 40 + 1, -(2 ** 40) - 1], np.int64)
    b = np.array([2, 2, -4, -4, 3, -5, 3, 7], np.int64)
    x, y = f32(50) * 10, f32(50) + 0.1
    for p, q in ((a, b), (x, y), (a, 3), (x, -2.5), (a, y[:8])):
        to = lambda lib, v: lib.tensor(v) if isinstance(v, np.ndarray) else v
        ro, rt = oar.div(to(oar, p), to(oar, q), rounding_mode=mode), torch.div(to(torch, p), to(torch, q),
                                                                                  rounding_mode=mode)
        assert str(ro.dtype).split(".")[1] == str(rt.dtype).split(".")[1], (ro.dtype, rt.dtype)
        close(ro, rt, rtol=1e-6, atol=0, what=f"div {mode} {p.dtype}")
    with pytest.raises(ValueError, match="rounding_mode"):
        oar.div(oar.tensor(a), 2, rounding_mode="round")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        oar.div(oar.tensor(a), oar.tensor(np.zeros(8, np.int64)), rounding_mode="floor")


def test_floor_divide_remainder_fmod_trunc(torch):
    a, b = np.array([7, -7, 9, -9, 0, 5], np.int64), np.array([2, 2, -4, -4, 3, -5], np.int64)
    x = f32(40) * 10
    for fn in ("floor_divide", "remainder", "fmod"):
        close(getattr(oar, fn)(oar.tensor(a), oar.tensor(b)), getattr(torch, fn)(torch.tensor(a), torch.tensor(b)),
              atol=0, what=fn)
        close(getattr(oar, fn)(oar.tensor(x), 3.0), getattr(torch, fn)(torch.tensor(x), 3.0), atol=2e-6, what=fn)
    close(oar.tensor(a) // 3, torch.tensor(a) // 3, atol=0)
    close(oar.tensor(a) % 3, torch.tensor(a) % 3, atol=0)
    close(17 // oar.tensor(b), 17 // torch.tensor(b), atol=0)
    close(oar.trunc(oar.tensor(x)), torch.trunc(torch.tensor(x)), atol=0)
    close(oar.tensor(x).fix(), torch.tensor(x).fix(), atol=0)


# ---------------------------------------------------------------- unique
def test_unique_matches_torch(torch):
    for v in (R.randint(0, 6, size=(4, 7)), R.randint(-3, 3, size=(50,)).astype(np.float32), np.array([5]),
              np.zeros((0,), np.int64)):
        ro = oar.unique(oar.tensor(v), return_inverse=True, return_counts=True)
        rt = torch.unique(torch.tensor(v), return_inverse=True, return_counts=True)
        for p, q, n in zip(ro, rt, ("values", "inverse", "counts")):
            assert tuple(p.shape) == tuple(q.shape), n
            close(p, q, atol=0, what=n)
        close(oar.tensor(v).unique(), torch.tensor(v).unique(), atol=0)


def test_unique_along_a_dim_matches_torch(torch):
    """the distinct slices along dim, in torch's lexicographic order, with inverse and counts"""
    rows = R.randint(0, 2, size=(9, 3)).astype(np.float32)
    rows[4] = rows[1]
    cases = [(rows, 0), (rows, 1), (R.randint(-2, 2, size=(4, 5, 2)), 1), (R.randint(0, 3, size=(3, 4, 6)), -1),
             (np.zeros((0, 3), np.int64), 0), (R.randint(0, 4, size=(7,)), 0)]
    for v, dim in cases:
        ro = oar.unique(oar.tensor(v), dim=dim, return_inverse=True, return_counts=True)
        rt = torch.unique(torch.tensor(v), dim=dim, return_inverse=True, return_counts=True)
        for p, q, n in zip(ro, rt, ("values", "inverse", "counts")):
            assert tuple(p.shape) == tuple(q.shape), f"{n} along {dim} of {v.shape}"
            close(p, q, atol=0, what=f"{n} along {dim} of {v.shape}")
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        oar.unique(oar.zeros(5, 0), dim=0)


# ---------------------------------------------------------------- more than 64 inputs
def test_cat_and_stack_of_many_tensors(torch):
    parts = [f32(2, 3) for _ in range(150)]
    for dim in (0, 1, -1):
        o = [oar.tensor(p, requires_grad=True) for p in parts]
        t = [torch.tensor(p, requires_grad=True) for p in parts]
        for fn in ("cat", "stack"):
            yo, yt = getattr(oar, fn)(o, dim), getattr(torch, fn)(t, dim)
            close(yo, yt, atol=0, what=f"{fn} {dim}")
            g = f32(*yt.shape)
            (yo * oar.tensor(g)).sum().backward()
            (yt * torch.tensor(g)).sum().backward()
        close(o[77].grad, t[77].grad, atol=0, what="grad")


# ---------------------------------------------------------------- unfold / fold
GEOMETRIES = [dict(kernel_size=3, padding=1), dict(kernel_size=(2, 3), dilation=(1, 2), padding=(0, 1), stride=(2, 1)),
              dict(kernel_size=2, stride=2), dict(kernel_size=3, dilation=2, padding=2, stride=3)]


@pytest.mark.parametrize("geo", GEOMETRIES, ids=["k3p1", "k23d12p01s21", "k2s2", "k3d2p2s3"])
def test_unfold_and_fold_match_torch(torch, geo):
    x = f32(2, 3, 9, 10)
    xo, xt = oar.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = OF.unfold(xo, **geo), torch.nn.functional.unfold(xt, **geo)
    close(yo, yt, atol=0, what="unfold")
    g = f32(*yt.shape)
    yo.backward(oar.tensor(g))
    yt.backward(torch.tensor(g))
    close(xo.grad, xt.grad, what="unfold grad")
    co, ct = oar.tensor(g, requires_grad=True), torch.tensor(g, requires_grad=True)
    fo, ft = oar.nn.Fold((9, 10), **geo)(co), torch.nn.Fold((9, 10), **geo)(ct)
    close(fo, ft, what="fold")
    gf = f32(*ft.shape)
    fo.backward(oar.tensor(gf))
    ft.backward(torch.tensor(gf))
    close(co.grad, ct.grad, atol=0, what="fold grad")
    close(oar.nn.Unfold(**geo)(oar.tensor(x[0])), torch.nn.Unfold(**geo)(torch.tensor(x[0])), what="unbatched")


def test_fold_refuses_wrong_shapes():
    with pytest.raises(RuntimeError, match="expected input of shape"):
        OF.fold(oar.zeros(1, 10, 4), (4, 4), 2, stride=2)
    with pytest.raises(RuntimeError, match="holds no"):
        OF.unfold(oar.zeros(1, 1, 2, 2), 3)


# ---------------------------------------------------------------- interpolate
MODES = [dict(size=(14, 5), mode="bicubic", align_corners=False), dict(size=(14, 5), mode="bicubic", align_corners=True),
         dict(scale_factor=1.7, mode="bicubic"), dict(scale_factor=0.77, mode="bicubic"),
         dict(scale_factor=0.6, mode="nearest"), dict(scale_factor=1.3, mode="nearest"),
         dict(size=(11, 23), mode="nearest"), dict(size=(10, 5), mode="nearest-exact"),
         dict(scale_factor=0.3, mode="nearest-exact"), dict(scale_factor=2, mode="nearest")]


@pytest.mark.parametrize("kw", MODES, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_interpolate_modes_match_torch(torch, kw):
    for shape in ((2, 3, 7, 9), (1, 2, 30, 31)):
        x = f32(*shape)
        xo, xt = oar.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yo, yt = OF.interpolate(xo, **kw), torch.nn.functional.interpolate(xt, **kw)
        tol = 0 if kw["mode"].startswith("nearest") else 1e-5  # nearest gathers exactly; the cubic weights round
        close(yo, yt, rtol=tol, atol=tol, what="output")
        g = f32(*yt.shape)
        yo.backward(oar.tensor(g))
        yt.backward(torch.tensor(g))
        close(xo.grad, xt.grad, rtol=10 * tol, atol=10 * tol if tol else 1e-6, what="grad")


# ---------------------------------------------------------------- what torchaudio's model files needed
def _module_pair(torch, make):
    tm, om = make(torch), make(oar)
    om.load_state_dict({k: oar.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return om, tm


@pytest.mark.parametrize("make, shape", [
    (lambda L: L.nn.PReLU(), (2, 3, 5)), (lambda L: L.nn.PReLU(3, init=0.1), (2, 3, 5)),
    (lambda L: L.nn.GLU(dim=1), (2, 6, 5)), (lambda L: L.nn.GLU(), (4, 8)),
    (lambda L: L.nn.AvgPool1d(3, 2, 1, ceil_mode=True), (2, 3, 10)),
    (lambda L: L.nn.AvgPool1d(4, ceil_mode=True, count_include_pad=False), (2, 3, 10)),
    (lambda L: L.nn.MaxPool1d(3, 2, 1, dilation=2), (2, 3, 11)),
    (lambda L: L.nn.ConvTranspose1d(4, 6, 5, stride=3, padding=2, output_padding=1, groups=2), (2, 4, 9)),
    (lambda L: L.nn.ConvTranspose1d(4, 3, 3, dilation=2, bias=False), (2, 4, 7)),
], ids=["prelu", "prelu3", "glu1", "glu", "avgpool1d", "avgpool1d_nopad", "maxpool1d", "convtr1d", "convtr1d_dil"])
def test_layers_torchaudio_needed(torch, make, shape):
    x = f32(*shape)
    om, tm = _module_pair(torch, make)
    xo, xt = oar.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    yo, yt = om(xo), tm(xt)
    close(yo, yt, what="output")
    g = f32(*yt.shape)
    yo.backward(oar.tensor(g))
    yt.backward(torch.tensor(g))
    close(xo.grad, xt.grad, what="input grad")
    for (n, a), (_, b) in zip(om.named_parameters(), tm.named_parameters()):
        close(a.grad, b.grad, what=f"grad {n}")


@pytest.mark.parametrize("cell", ["RNNCell", "LSTMCell", "GRUCell"])
def test_rnn_cells(torch, cell):
    om, tm = _module_pair(torch, lambda L: getattr(L.nn, cell)(5, 4))
    assert [k for k, _ in om.named_parameters()] == [k for k, _ in tm.named_parameters()]
    x, h = f32(3, 5), f32(3, 4)
    state = (lambda L: (L.tensor(h), L.tensor(h * 0.5))) if cell == "LSTMCell" else (lambda L: L.tensor(h))
    for hx in (None, "given"):
        yo = om(oar.tensor(x), state(oar) if hx else None)
        yt = tm(torch.tensor(x), state(torch) if hx else None)
        yo, yt = (yo if cell == "LSTMCell" else (yo,)), (yt if cell == "LSTMCell" else (yt,))
        for a, b in zip(yo, yt):
            close(a, b, what=f"{cell} {hx}")
        sum((a * (k + 1.5)).sum() for k, a in enumerate(yo)).backward()
        sum((b * (k + 1.5)).sum() for k, b in enumerate(yt)).backward()
    for (n, a), (_, b) in zip(om.named_parameters(), tm.named_parameters()):
        close(a.grad, b.grad, what=f"grad {n}")
    yo = om(oar.tensor(x[0]))  # unbatched
    assert tuple((yo[0] if cell == "LSTMCell" else yo).shape) == (4,)


def test_weight_norm(torch):
    om, tm = _module_pair(torch, lambda L: L.nn.utils.weight_norm(L.nn.Conv1d(3, 4, 3), name="weight", dim=2))
    assert set(om.state_dict()) == set(tm.state_dict()) == {"bias", "weight_g", "weight_v"}
    x = f32(2, 3, 8)
    yo, yt = om(oar.tensor(x)), tm(torch.tensor(x))
    close(yo, yt)
    (yo * yo).sum().backward()
    (yt * yt).sum().backward()
    for n in ("weight_g", "weight_v", "bias"):
        close(getattr(om, n).grad, getattr(tm, n).grad, what=n)
    oar.nn.utils.remove_weight_norm(om)
    torch.nn.utils.remove_weight_norm(tm)
    assert set(om.state_dict()) == {"weight", "bias"}
    close(om.weight, tm.weight)


def test_window_functions(torch):
    for name in ("hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window"):
        for n in (0, 1, 2, 7, 64):
            for periodic in (True, False):
                close(getattr(oar, name)(n, periodic), getattr(torch, name)(n, periodic), rtol=1e-5, atol=1e-6,
                      what=f"{name}({n}, {periodic})")
    assert oar.hann_window(4, dtype=oar.float64).dtype == oar.float64


def test_finfo_iinfo(torch):
    for d in ("float16", "bfloat16", "float32", "float64"):
        a, b = oar.finfo(getattr(oar, d)), torch.finfo(getattr(torch, d))
        assert (a.bits, a.eps, a.max, a.min, a.tiny, a.resolution) == (b.bits, b.eps, b.max, b.min, b.tiny, b.resolution)
    for d in ("int8", "uint8", "int32", "int64"):
        a, b = oar.iinfo(getattr(oar, d)), torch.iinfo(getattr(torch, d))
        assert (a.bits, a.min, a.max) == (b.bits, b.min, b.max)
    with pytest.raises(TypeError, match="iinfo"):
        oar.finfo(oar.int32)


def test_tensor_new_forms(torch):
    for lib in (oar, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64)
        c = x.new(x)
        assert c.dtype == lib.float64 and c.tolist() == [1.0, 2.0]
        assert x.new([3, 4]).tolist() == [3.0, 4.0] and x.new([3, 4]).dtype == lib.float64
        assert tuple(x.new(2, 3).shape) == (2, 3) and tuple(x.new().shape) == (0,)
        assert tuple(x.new(lib.Size([4])).shape) == (4,)


def test_lazy_module_materializes_on_first_call():
    from oar.nn.modules.lazy import LazyModuleMixin
    from oar.nn.parameter import UninitializedParameter

    class LazyScale(LazyModuleMixin, oar.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = UninitializedParameter()

        def initialize_parameters(self, x):
            self.weight.materialize(x.shape[-1:])
            with oar.no_grad():
                self.weight.fill_(2.0)

        def forward(self, x):
            return x * self.weight

    m = LazyScale()
    assert m.has_uninitialized_params()
    y = m(oar.ones(2, 3))
    assert type(m.weight) is oar.nn.Parameter and m.weight.requires_grad and tuple(m.weight.shape) == (3,)
    close(y, np.full((2, 3), 2.0, np.float32))
    assert not m.has_uninitialized_params() and not m._forward_pre_hooks


def test_libtorch_extensions_import_as_absent(tmp_path):
    """torchaudio's C++ library and pybind11 module cannot load into oar: under the switch the
    library's op namespace answers feature queries and refuses calls by name; the module imports
    with every attribute absent, saying why; a library that is not a libtorch extension is refused."""
    import sys

    from oar._compat import extensions

    lib = tmp_path / "pkg" / "lib" / "libfake.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF....libc10.so\x00libtorch_cpu.so\x00")
    plain = tmp_path / "pkg" / "lib" / "libplain.so"
    plain.write_bytes(b"\x7fELF....libm.so.6\x00")
    assert extensions.links_libtorch(lib) and not extensions.links_libtorch(plain)
    sys.path.insert(0, str(tmp_path))
    try:
        ns = type(oar.ops)()
        with pytest.warns(RuntimeWarning, match="does not run on oar"):
            extensions.load_extension_library(ns, lib)
        assert ns.pkg.is_sox_available() is False and ns.pkg.cuda_version() is None
        with pytest.raises(NotImplementedError, match="torch.ops.pkg.rnnt_loss is an op of libfake.so"):
            ns.pkg.rnnt_loss(1)
        with pytest.raises(OSError, match=r"not a PyTorch C\+\+ extension"):
            extensions.load_extension_library(ns, plain)
        ext = tmp_path / "pkg" / "_fake_ext.cpython-311-x86_64-linux-gnu.so"
        ext.write_bytes(lib.read_bytes())
        (tmp_path / "pkg" / "__init__.py").write_text("")
        spec = extensions.finder.find_spec("pkg._fake_ext", [str(tmp_path / "pkg")])
        assert spec is not None
        import importlib.util

        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        with pytest.raises(AttributeError, match=r"PyTorch C\+\+ extension module"):
            mod.some_function
    finally:
        sys.path.remove(str(tmp_path))


# ---------------------------------------------------------------- packed sequences (torchaudio's Tacotron2)
@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("sort, batch_first", [(False, False), (True, True)], ids=["unsorted", "sorted_batch_first"])
def test_packed_sequences_through_recurrent_layers(torch, cls, sort, batch_first):
    x = f32(4, 6, 3) if batch_first else f32(6, 4, 3)
    lens = [6, 5, 4, 2] if sort else [4, 6, 2, 5]
    om, tm = _module_pair(torch, lambda L: getattr(L.nn, cls)(3, 5, num_layers=2, bidirectional=True,
                                                             batch_first=batch_first))
    res = []
    for lib, m in ((oar, om), (torch, tm)):
        xi = lib.tensor(x, requires_grad=True)
        p = lib.nn.utils.rnn.pack_padded_sequence(xi, lib.tensor(lens), batch_first=batch_first,
                                                  enforce_sorted=sort)
        y, h = m(p)
        assert isinstance(y, lib.nn.utils.rnn.PackedSequence)
        pad, ln = lib.nn.utils.rnn.pad_packed_sequence(y, batch_first=batch_first, total_length=7)
        hs = h if isinstance(h, tuple) else (h,)
        loss = (pad * pad).sum() + sum((s * s * (k + 2)).sum() for k, s in enumerate(hs))
        loss.backward()
        res.append([p.data, p.batch_sizes, pad, ln, *hs, xi.grad] + [q.grad for q in m.parameters()])
    for k, (a, b) in enumerate(zip(*res)):
        close(a, b, atol=1e-5, what=f"{cls} item {k}")


def test_packed_sequences_compile_with_known_lengths():
    """lengths known when tracing (a list): one program, eager's result; lengths in a tensor argument are
    values the trace would read: the function runs eagerly, with the one-time warning, the same result"""
    lstm = oar.nn.LSTM(3, 5, bidirectional=True)
    x = oar.tensor(f32(6, 4, 3))

    def run(x, lens):
        p = oar.nn.utils.rnn.pack_padded_sequence(x, lens, enforce_sorted=False)
        y, _ = oar.nn.utils.rnn.pad_packed_sequence(lstm(p)[0])
        return (y * y).sum()

    want = run(x, [4, 6, 2, 5]).item()
    compiled = oar.jit.to_static(lambda x: run(x, [4, 6, 2, 5]))
    assert compiled(x).item() == pytest.approx(want, rel=1e-6) and not compiled.fell_back
    by_tensor = oar.jit.to_static(run)
    with pytest.warns(UserWarning, match="reads a tensor's value"):
        got = by_tensor(x, oar.tensor([4, 6, 2, 5]))
    assert got.item() == pytest.approx(want, rel=1e-6) and by_tensor.fell_back


def test_pad_and_pack_sequence_helpers(torch):
    seqs = [f32(n, 2) for n in (3, 5, 1)]
    for lib in (oar, torch):
        ts = [lib.tensor(s) for s in seqs]
        padded = lib.nn.utils.rnn.pad_sequence(ts, batch_first=True, padding_value=-1.0)
        assert tuple(padded.shape) == (3, 5, 2) and float(padded[2, 1, 0]) == -1.0
        packed = lib.nn.utils.rnn.pack_sequence(ts, enforce_sorted=False)
        assert packed.batch_sizes.tolist() == [3, 2, 2, 1, 1]
        back = lib.nn.utils.rnn.unpack_sequence(packed)
        for a, b in zip(back, seqs):
            close(a, b, atol=0)
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        oar.nn.utils.rnn.pack_padded_sequence(oar.zeros(5, 2, 1), [2, 5])
    with pytest.raises(RuntimeError, match="greater than 0"):
        oar.nn.utils.rnn.pack_padded_sequence(oar.zeros(5, 2, 1), [5, 0])
