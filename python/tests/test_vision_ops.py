"""grid_sample / affine_grid (torch.nn.functional) and roi_align / nms / batched_nms
(torchvision.ops) on oar's op table, against torch 1.13 and torchvision 0.14 in the same
interpreter: outputs, and the gradients of input and grid (roi_align: input). Also the op
table's attribute defaults: functions called with their arguments left out give torch's
results, and their signatures show torch's default values."""
import inspect

import numpy as np
import pytest

import oar
import oar.nn.functional as OF

R = np.random.RandomState(11)


def close(a, b, rtol=1e-4, atol=1e-5, what=""):
    np.testing.assert_allclose(a.detach().numpy() if hasattr(a, "detach") else a,
                               b.detach().numpy() if hasattr(b, "detach") else b, rtol=rtol, atol=atol, err_msg=what)


@pytest.fixture
def tv(torch):
    tv = pytest.importorskip("torchvision", reason="torchvision is absent (apt-get install python3-torchvision)")
    if "oar" in (getattr(torch, "__file__", None) or "oar"):
        pytest.skip("torch resolves to oar in this interpreter: no oracle")
    return tv


# ------------------------------------------------------------------ grid_sample / affine_grid
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grid_sample_matches_torch(torch, mode, padding_mode, align_corners, dtype):
    x = R.randn(2, 3, 5, 7).astype(dtype)
    g = R.uniform(-1.4, 1.4, size=(2, 4, 6, 2)).astype(dtype)  # some samples fall outside
    gy = R.randn(2, 3, 4, 6).astype(dtype)
    res = []
    for lib, F in ((oar, OF), (torch, torch.nn.functional)):
        xi, gi = lib.tensor(x, requires_grad=True), lib.tensor(g, requires_grad=True)
        y = F.grid_sample(xi, gi, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        (y * lib.tensor(gy)).sum().backward()
        res.append((y, xi.grad, gi.grad))
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-10, atol=1e-12)
    close(res[0][0], res[1][0], what="output", **tol)
    close(res[0][1], res[1][1], what="input's gradient", **tol)
    close(res[0][2], res[1][2], what="grid's gradient", **tol)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_5d_matches_torch(torch, mode, padding_mode, align_corners):
    """volumetric sampling: input [N, C, D, H, W], grid [N, Do, Ho, Wo, 3] of (x, y, z)"""
    x = R.randn(2, 3, 4, 5, 6).astype(np.float32)
    g = R.uniform(-1.4, 1.4, size=(2, 3, 2, 4, 3)).astype(np.float32)
    gy = R.randn(2, 3, 3, 2, 4).astype(np.float32)
    res = []
    for lib, F in ((oar, OF), (torch, torch.nn.functional)):
        xi, gi = lib.tensor(x, requires_grad=True), lib.tensor(g, requires_grad=True)
        y = F.grid_sample(xi, gi, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        (y * lib.tensor(gy)).sum().backward()
        res.append((y, xi.grad, gi.grad))
    close(res[0][0], res[1][0], what="output")
    close(res[0][1], res[1][1], what="input's gradient")
    close(res[0][2], res[1][2], what="grid's gradient")


def test_grid_sample_bicubic_threaded_size(torch):
    """a size the fast kernels split over threads (forward blocks, backward channels and points)"""
    x = R.randn(2, 16, 30, 40).astype(np.float32)
    g = R.uniform(-1.2, 1.2, size=(2, 24, 20, 2)).astype(np.float32)
    res = []
    for lib, F in ((oar, OF), (torch, torch.nn.functional)):
        xi, gi = lib.tensor(x, requires_grad=True), lib.tensor(g, requires_grad=True)
        y = F.grid_sample(xi, gi, mode="bicubic", padding_mode="reflection", align_corners=False)
        (y * y).sum().backward()
        res.append((y, xi.grad, gi.grad))
    for k, what in enumerate(["output", "input's gradient"]):
        close(res[0][k], res[1][k], rtol=1e-4, atol=1e-4, what=what)
    # the grid's gradient cancels heavily (16 taps of values near 500): torch's own f32 result is
    # 1.2e-3 of its scale from its f64 one, so the bound is at that scale
    scale = float(np.abs(res[1][2].detach().numpy()).max())
    close(res[0][2], res[1][2], rtol=1e-4, atol=3e-3 * scale, what="grid's gradient")


def test_grid_sample_defaults_and_errors(torch):
    x = R.randn(1, 2, 4, 4).astype(np.float32)
    g = R.uniform(-1, 1, size=(1, 3, 3, 2)).astype(np.float32)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about align_corners left out
        want = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(g))
    close(OF.grid_sample(oar.tensor(x), oar.tensor(g)), want, what="all defaults")
    with pytest.raises(ValueError, match="expected mode 'bilinear', 'nearest' or 'bicubic', got 'area'"):
        OF.grid_sample(oar.tensor(x), oar.tensor(g), mode="area")
    with pytest.raises(RuntimeError, match=r"expected a grid \[N, H_out, W_out, 2\] for a 4-d input"):
        OF.grid_sample(oar.tensor(x), oar.zeros(1, 3, 3, 3))
    with pytest.raises(RuntimeError, match="bicubic interpolation needs a 4-d input"):  # torch: RuntimeError too
        OF.grid_sample(oar.zeros(1, 1, 2, 3, 4), oar.zeros(1, 2, 2, 2, 3), mode="bicubic")
    with pytest.raises(RuntimeError, match=r"expected a grid \[N, D_out, H_out, W_out, 3\] for a 5-d input"):
        OF.grid_sample(oar.zeros(1, 1, 2, 3, 4), oar.zeros(1, 2, 2, 2))
    with pytest.raises(ValueError, match="Expected a batch of 3D affine matrices of shape Nx3x4"):
        OF.affine_grid(oar.zeros(1, 2, 3), (1, 1, 2, 3, 4), align_corners=False)
    with pytest.raises(NotImplementedError, match="affine_grid only supports 4D and 5D sizes"):
        OF.affine_grid(oar.zeros(1, 3, 4), (1, 1, 2, 3, 4, 5), align_corners=False)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_and_spatial_transformer(torch, align_corners):
    theta = (np.array([[1, 0, 0], [0, 1, 0]], np.float32) + 0.3 * R.randn(2, 2, 3)).astype(np.float32)
    x = R.randn(2, 3, 6, 5).astype(np.float32)
    res = []
    for lib, F in ((oar, OF), (torch, torch.nn.functional)):
        th, xi = lib.tensor(theta, requires_grad=True), lib.tensor(x, requires_grad=True)
        grid = F.affine_grid(th, [2, 3, 4, 7], align_corners=align_corners)
        y = F.grid_sample(xi, grid, align_corners=align_corners)
        (y * y).sum().backward()
        res.append((grid, y, th.grad, xi.grad))
    for k, what in enumerate(["grid", "output", "theta's gradient", "input's gradient"]):
        close(res[0][k], res[1][k], rtol=1e-4, atol=1e-4, what=what)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_5d_volumetric_transformer(torch, align_corners):
    theta = (np.eye(3, 4, dtype=np.float32) + 0.3 * R.randn(2, 3, 4)).astype(np.float32)
    x = R.randn(2, 2, 4, 6, 5).astype(np.float32)
    res = []
    for lib, F in ((oar, OF), (torch, torch.nn.functional)):
        th, xi = lib.tensor(theta, requires_grad=True), lib.tensor(x, requires_grad=True)
        grid = F.affine_grid(th, [2, 2, 3, 4, 7], align_corners=align_corners)
        y = F.grid_sample(xi, grid, align_corners=align_corners)
        (y * y).sum().backward()
        res.append((grid, y, th.grad, xi.grad))
    for k, what in enumerate(["grid", "output", "theta's gradient", "input's gradient"]):
        close(res[0][k], res[1][k], rtol=1e-4, atol=1e-4, what=what)


# ------------------------------------------------------------------ roi_align
def _boxes(k, h, w, scale):
    x1, y1 = R.uniform(-2, w / scale - 2, k), R.uniform(-2, h / scale - 2, k)
    bw, bh = R.uniform(0.3, w / scale, k), R.uniform(0.3, h / scale, k)
    return np.stack([x1, y1, x1 + bw, y1 + bh], 1).astype(np.float32)


@pytest.mark.parametrize("sampling_ratio", [-1, 2])
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.5])
def test_roi_align_matches_torchvision(torch, tv, sampling_ratio, aligned, spatial_scale):
    x = R.randn(2, 3, 9, 11).astype(np.float32)
    per_image = [_boxes(3, 9, 11, spatial_scale), _boxes(2, 9, 11, spatial_scale)]
    rois = np.concatenate([np.concatenate([np.full((len(b), 1), i, np.float32), b], 1)
                           for i, b in enumerate(per_image)])
    gy = R.randn(5, 3, 3, 4).astype(np.float32)
    res = []
    for lib, roi_align in ((oar, oar.ops.roi_align), (torch, tv.ops.roi_align)):
        for boxes in (lib.tensor(rois), [lib.tensor(b) for b in per_image]):
            xi = lib.tensor(x, requires_grad=True)
            y = roi_align(xi, boxes, (3, 4), spatial_scale=spatial_scale, sampling_ratio=sampling_ratio,
                          aligned=aligned)
            (y * lib.tensor(gy)).sum().backward()
            res.append((y, xi.grad))
    for k in range(2):  # [K, 5] tensor, then the list of [L, 4]
        close(res[k][0], res[2 + k][0], what="output")
        close(res[k][1], res[2 + k][1], what="input's gradient")


def test_roi_align_defaults_and_errors(torch, tv):
    x = R.randn(1, 2, 6, 6).astype(np.float32)
    rois = np.array([[0, 0.5, 1.0, 4.2, 5.5]], np.float32)
    close(oar.ops.roi_align(oar.tensor(x), oar.tensor(rois), 2),
          tv.ops.roi_align(torch.tensor(x), torch.tensor(rois), 2), what="defaults")
    sig = inspect.signature(oar.ops.roi_align).parameters
    tsig = inspect.signature(tv.ops.roi_align).parameters
    for name in ("spatial_scale", "sampling_ratio", "aligned"):
        assert sig[name].default == tsig[name].default, name
    with pytest.raises(AssertionError, match=r"Tensor\[K, 5\]"):
        oar.ops.roi_align(oar.tensor(x), oar.zeros(3, 4), 2)
    with pytest.raises(IndexError, match=r"box 0 has batch index 4; expected an integer in \[0, 1\)"):
        oar.ops.roi_align(oar.tensor(x), oar.tensor([[4.0, 0, 0, 1, 1]]), 2)


# ------------------------------------------------------------------ nms / batched_nms
def _scored_boxes(n, ties=False):
    xy = R.uniform(0, 40, (n, 2))
    wh = R.uniform(2, 15, (n, 2))
    boxes = np.concatenate([xy, xy + wh], 1).astype(np.float32)
    scores = (R.randint(0, 5, n) / 4.0 if ties else R.uniform(0, 1, n)).astype(np.float32)
    return boxes, scores


@pytest.mark.parametrize("thr", [0.0, 0.3, 0.5, 0.7, 1.0])
@pytest.mark.parametrize("ties", [False, True])
def test_nms_matches_torchvision(torch, tv, thr, ties):
    boxes, scores = _scored_boxes(120, ties)
    got = oar.ops.nms(oar.tensor(boxes), oar.tensor(scores), thr)
    want = tv.ops.nms(torch.tensor(boxes), torch.tensor(scores), thr)
    assert got.dtype == oar.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_batched_nms_matches_torchvision(torch, tv):
    boxes, scores = _scored_boxes(150)
    idxs = R.randint(0, 4, 150).astype(np.int64)
    got = oar.ops.batched_nms(oar.tensor(boxes), oar.tensor(scores), oar.tensor(idxs), 0.4)
    want = tv.ops.batched_nms(torch.tensor(boxes), torch.tensor(scores), torch.tensor(idxs), 0.4)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    empty = oar.ops.batched_nms(oar.zeros(0, 4), oar.zeros(0), oar.zeros(0, dtype=oar.int64), 0.5)
    assert tuple(empty.shape) == (0,) and empty.dtype == oar.int64
    assert tuple(oar.ops.nms(oar.zeros(0, 4), oar.zeros(0), 0.5).shape) == (0,)


def test_nms_errors():
    with pytest.raises(RuntimeError, match=r"nms: expected boxes \[N, 4\]"):
        oar.ops.nms(oar.zeros(3, 5), oar.zeros(3), 0.5)
    with pytest.raises(RuntimeError, match=r"nms: expected scores \[3\], one per box, got 1-d with 2 elements"):
        oar.ops.nms(oar.zeros(3, 4), oar.zeros(2), 0.5)
    with pytest.raises(TypeError, match="nms: expected boxes to have a floating dtype"):
        oar.ops.nms(oar.zeros(3, 4, dtype=oar.int64), oar.zeros(3), 0.5)


# ------------------------------------------------------------------ defaults from the op table
DEFAULTED = [  # (function name, its arguments; the rest are left to the defaults)
    ("layer_norm", lambda lib: (lib.tensor(R.randn(2, 3, 4).astype(np.float32)), (4,))),
    ("group_norm", lambda lib: (lib.tensor(R.randn(2, 4, 3).astype(np.float32)), 2)),
    ("leaky_relu", lambda lib: (lib.tensor(R.randn(5).astype(np.float32)),)),
    ("elu", lambda lib: (lib.tensor(R.randn(5).astype(np.float32)),)),
    ("softplus", lambda lib: (lib.tensor((R.randn(6) * 15).astype(np.float32)),)),
    ("conv2d", lambda lib: (lib.tensor(R.randn(1, 2, 5, 5).astype(np.float32)),
                            lib.tensor(R.randn(3, 2, 3, 3).astype(np.float32)))),
    ("conv1d", lambda lib: (lib.tensor(R.randn(1, 2, 7).astype(np.float32)),
                            lib.tensor(R.randn(3, 2, 3).astype(np.float32)))),
    ("max_pool2d", lambda lib: (lib.tensor(R.randn(1, 2, 6, 6).astype(np.float32)), 2)),
    ("avg_pool2d", lambda lib: (lib.tensor(R.randn(1, 2, 6, 6).astype(np.float32)), 3, 2)),
    ("batch_norm", lambda lib: (lib.tensor(R.randn(4, 3).astype(np.float32)), lib.tensor(R.randn(3).astype(np.float32)),
                                lib.tensor(R.uniform(0.5, 2, 3).astype(np.float32)))),
    ("cross_entropy", lambda lib: (lib.tensor(R.randn(4, 5).astype(np.float32)), lib.tensor(np.array([0, 4, -100, 2])))),
    ("nll_loss", lambda lib: (lib.tensor(R.randn(4, 5).astype(np.float32)), lib.tensor(np.array([1, -100, 3, 2])))),
    ("smooth_l1_loss", lambda lib: (lib.tensor(R.randn(6).astype(np.float32)), lib.tensor(R.randn(6).astype(np.float32)))),
]


TORCH_BUILTIN_DEFAULTS = {  # torch 1.13's documentation of torch.nn.functional
    "softplus": {"beta": 1, "threshold": 20},
    "conv2d": {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    "conv1d": {"stride": 1, "padding": 0, "dilation": 1, "groups": 1},
    "avg_pool2d": {"padding": 0, "ceil_mode": False, "count_include_pad": True},
}


@pytest.mark.parametrize("name,make", DEFAULTED, ids=[d[0] for d in DEFAULTED])
def test_defaults_from_the_table_are_torchs(torch, name, make):
    state = R.get_state()
    args_o = make(oar)
    R.set_state(state)
    args_t = make(torch)
    close(getattr(OF, name)(*args_o), getattr(torch.nn.functional, name)(*args_t), what=name)
    ours = inspect.signature(getattr(OF, name)).parameters
    try:
        theirs = {p: v.default for p, v in inspect.signature(getattr(torch.nn.functional, name)).parameters.items()
                  if v.default is not inspect.Parameter.empty}
    except ValueError:  # torch's C builtins carry no signature: their documented defaults
        theirs = TORCH_BUILTIN_DEFAULTS[name]
    for p, v in ours.items():  # every default the table gives equals torch's (1 == (1, 1) for pairs)
        if p in theirs and v.default is not None:
            t = theirs[p]
            if isinstance(v.default, tuple) and not isinstance(t, tuple):
                t = (t,) * len(v.default)
            assert v.default == t, f"{name}({p}): oar's default {v.default!r}, torch's {t!r}"


def test_table_defaults_reach_oar_ops():
    from oar import _ops
    assert _ops.default("layer_norm", "eps") == 1e-5 and _ops.default("conv2d", "stride") == (1, 1)
    assert _ops.default("grid_sample", "align_corners") is False
    with pytest.raises(KeyError, match="no default for nms.iou_threshold"):
        _ops.default("nms", "iou_threshold")
    x = oar.randn(2, 3)
    close(oar.ops.layer_norm(x, None, None, normalized_ndim=1),
          oar.ops.layer_norm(x, None, None, normalized_ndim=1, eps=1e-5), what="eps left out")
    assert "eps: float = 1e-05" in oar.ops.layer_norm.__doc__


MODULES = ["LayerNorm", "GroupNorm", "BatchNorm2d", "InstanceNorm2d", "Dropout", "LeakyReLU", "ELU", "SmoothL1Loss",
           "NLLLoss", "CrossEntropyLoss"]


@pytest.mark.parametrize("name", MODULES)
def test_module_defaults_from_the_table_are_torchs(torch, name):
    ours = inspect.signature(getattr(oar.nn, name)).parameters
    theirs = inspect.signature(getattr(torch.nn, name)).parameters
    compared = 0
    for p, v in ours.items():
        if p in theirs and theirs[p].default is not inspect.Parameter.empty:
            assert v.default == theirs[p].default, f"{name}({p}): oar {v.default!r}, torch {theirs[p].default!r}"
            compared += 1
    if not compared:  # the activations take (*args, **kwargs): compare what a default instance holds
        args = {"LeakyReLU": ["negative_slope"], "ELU": ["alpha"]}[name]
        for p in args:
            assert getattr(getattr(oar.nn, name)(), p) == getattr(getattr(torch.nn, name)(), p), f"{name}.{p}"


def test_reduction_defaults_from_the_table_are_torchs(torch):
    x = R.randn(3, 4).astype(np.float32)
    for name in ("sum", "mean", "amax", "var", "std", "logsumexp"):
        close(getattr(oar, name)(oar.tensor(x), 1), getattr(torch, name)(torch.tensor(x), 1), what=name)
    close(oar.var(oar.tensor(x)), torch.var(torch.tensor(x)), what="var over all (unbiased)")
    close(oar.norm(oar.tensor(x)), torch.norm(torch.tensor(x)), what="norm")
    assert inspect.signature(oar.var).parameters["unbiased"].default is True
    assert inspect.signature(oar.sum).parameters["keepdim"].default is False


def test_what_torchvision_detection_calls(torch):
    """torchvision's MultiScaleRoIAlign and detection transforms call these."""
    x = R.uniform(0.1, 40, 7).astype(np.float32)
    close(oar.tensor(x).log2(), torch.tensor(x).log2(), what="log2")
    close(oar.log10(oar.tensor(x)), torch.log10(torch.tensor(x)), what="log10")
    assert float(oar.tensor(0.25).log2().round()) == -2.0
    b = oar.ones(3, 4)
    y = oar.full_like(b[:, :1], 2, dtype=oar.float32, layout=oar.strided)
    assert tuple(y.shape) == (3, 1) and float(y.sum()) == 6.0 and repr(oar.strided) == "torch.strided"
    with pytest.raises(NotImplementedError, match="only the strided layout"):
        oar.full_like(b, 1, layout=oar.layout("sparse_coo"))


def test_fast_kernels_do_not_depend_on_the_thread_count():
    """grid_sample / roi_align forward and backward and nms give the same bits at 1 and 2 threads
    (backward scatter-adds are split by channel, never by point or box)"""
    x = R.randn(2, 16, 20, 24).astype(np.float32)
    g = R.uniform(-1.3, 1.3, size=(2, 18, 22, 2)).astype(np.float32)
    boxes = np.concatenate([R.randint(0, 2, (64, 1)), _boxes(64, 20, 24, 1.0)], 1).astype(np.float32)
    nb, ns = _boxes(500, 40, 40, 1.0), R.rand(500).astype(np.float32)
    runs = []
    before = oar.get_num_threads()
    try:
        for nt in (1, 2):
            oar.set_num_threads(nt)
            got = []
            for mode in ("bilinear", "bicubic"):
                xi, gi = oar.tensor(x, requires_grad=True), oar.tensor(g, requires_grad=True)
                y = OF.grid_sample(xi, gi, mode=mode, padding_mode="border", align_corners=False)
                (y * y).sum().backward()
                got += [y.detach().numpy().copy(), xi.grad.numpy().copy(), gi.grad.numpy().copy()]
            xi = oar.tensor(x, requires_grad=True)
            y = oar.ops.roi_align(xi, oar.tensor(boxes), (5, 4), 0.7, -1, True)
            (y * y).sum().backward()
            got += [y.detach().numpy().copy(), xi.grad.numpy().copy()]
            got.append(oar.ops.nms(oar.tensor(nb), oar.tensor(ns), 0.3).numpy().copy())
            runs.append(got)
    finally:
        oar.set_num_threads(before)
    for k, (a, b) in enumerate(zip(*runs)):
        assert np.array_equal(a, b), f"result {k} differs between 1 and 2 threads"
