"""PyTorch behaviours users hit beyond the op table, each beside torch 1.13: assigning .grad,
class weights and label smoothing in the losses, hardtanh's gradient at its bounds, DataLoader
worker processes (fork safety of the extension and of the C thread pool), MultiheadAttention and
TransformerEncoder(Layer), and the functions torchvision's models call (diff, meshgrid,
interpolate, instance_norm)."""
import numpy as np
import pytest

import oar

R = np.random.RandomState(7)


def both(torch, *arrays, grad=True):
    o = [oar.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    t = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    return o, t


def close(a, b, rtol=1e-4, atol=1e-5, what=""):
    np.testing.assert_allclose(a.detach().numpy() if hasattr(a, "detach") else a,
                               b.detach().numpy() if hasattr(b, "detach") else b, rtol=rtol, atol=atol, err_msg=what)


# ---------------------------------------------------------------- .grad assignment
def test_assigning_grad_then_backward_accumulates_into_it(torch):
    w = R.randn(3, 4).astype(np.float32)
    g0 = R.randn(3, 4).astype(np.float32)
    x = R.randn(2, 3).astype(np.float32)
    results = []
    for lib in (oar, torch):
        p = lib.tensor(w, requires_grad=True)
        given = lib.tensor(g0)
        p.grad = given
        (lib.tensor(x) @ p).pow(2).sum().backward()
        results.append((p.grad, given))
    close(results[0][0], results[1][0], what="grad after backward")
    close(results[0][1], results[1][1], what="the assigned tensor (accumulated in place, as in torch)")


def test_assigned_grads_drive_the_optimizer(torch):
    w = R.randn(5).astype(np.float32)
    g = R.randn(5).astype(np.float32)
    ps = []
    for lib in (oar, torch):
        p = lib.nn.Parameter(lib.tensor(w))
        opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
        for _ in range(3):
            p.grad = lib.tensor(g)
            opt.step()
        ps.append(p)
    close(ps[0], ps[1])


def test_param_groups_without_params_are_accepted(torch):
    """torch accepts an empty group (a ZeroRedundancyOptimizer shard may leave one empty); the others
    step, schedule and save as without it."""
    w = R.randn(4).astype(np.float32)
    g = R.randn(4).astype(np.float32)
    ps, states = [], []
    for lib in (oar, torch):
        p = lib.nn.Parameter(lib.tensor(w))
        opt = lib.optim.Adam([{"params": []}, {"params": [p], "lr": 0.05}], lr=0.1)
        opt.add_param_group({"params": [], "lr": 0.3})
        for k in range(3):
            p.grad = lib.tensor(g * (k + 1))
            opt.param_groups[1]["lr"] *= 0.5
            opt.step()
        ps.append(p)
        sd = opt.state_dict()
        states.append(sd["state"]["0.exp_avg"] if lib is oar else sd["state"][0]["exp_avg"])
        assert len(opt.param_groups) == 3
    close(ps[0], ps[1], what="parameters")
    close(states[0], states[1], what="state")
    empty = oar.optim.SGD([{"params": []}], lr=0.1)
    empty.step()
    assert empty.state_dict()["state"] == {}
    with pytest.raises(ValueError, match="expected no state"):
        empty.load_state_dict({"state": {"0.momentum_buffer": oar.zeros(1)}, "param_groups": [{}]})


def test_assigning_a_bad_grad_says_what_is_wrong():
    p = oar.zeros(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"different size: expected \[2, 3\].*got \[3, 2\]"):
        p.grad = oar.zeros(3, 2)
    with pytest.raises(TypeError, match="different type: expected f32.*got f64"):
        p.grad = oar.zeros(2, 3, dtype=oar.float64)
    with pytest.raises(TypeError, match="Tensor.grad"):
        p.grad = [[0.0] * 3] * 2
    p.grad = oar.ones(2, 3).t().t()
    p.grad = None
    assert p.grad is None


# ---------------------------------------------------------------- weighted, smoothed losses
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("spatial", [False, True])
def test_cross_entropy_class_weights_and_smoothing(torch, reduction, smoothing, spatial):
    shape = (4, 5, 3, 2) if spatial else (6, 5)
    logits = R.randn(*shape).astype(np.float32)
    target = R.randint(0, 5, (shape[0],) + shape[2:]).astype(np.int64)
    target.flat[1] = -100  # ignored
    weight = R.rand(5).astype(np.float32) + 0.5
    gy = R.randn(*target.shape).astype(np.float32) if reduction == "none" else None
    outs = []
    for lib in (oar, torch):
        x = lib.tensor(logits, requires_grad=True)
        loss = lib.nn.CrossEntropyLoss(weight=lib.tensor(weight), reduction=reduction, label_smoothing=smoothing)(
            x, lib.tensor(target))
        (loss * lib.tensor(gy)).sum().backward() if gy is not None else loss.backward()
        outs.append((loss, x.grad))
    close(outs[0][0], outs[1][0], what="loss")
    close(outs[0][1], outs[1][1], what="grad")


def test_nll_loss_class_weights(torch):
    logp = np.log(R.dirichlet(np.ones(4), 7)).astype(np.float32)
    target = R.randint(0, 4, 7).astype(np.int64)
    weight = R.rand(4).astype(np.float32)
    (xo, wo), (xt, wt) = both(torch, logp, weight, grad=True)
    lo = oar.nn.functional.nll_loss(xo, oar.tensor(target), weight=wo.detach(), ignore_index=target[0])
    lt = torch.nn.functional.nll_loss(xt, torch.tensor(target), weight=wt.detach(), ignore_index=int(target[0]))
    lo.backward()
    lt.backward()
    close(lo, lt)
    close(xo.grad, xt.grad)
    with pytest.raises(ValueError, match=r"cross_entropy: expected a weight of shape \[4\]"):
        oar.nn.functional.cross_entropy(xo, oar.tensor(target), weight=oar.ones(3))


def test_hardtanh_and_relu6_gradient_is_zero_at_the_bounds(torch):
    x = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 6.0, 7.0], np.float32)
    for name, args in (("relu6", ()), ("hardtanh", ())):
        (xo,), (xt,) = both(torch, x)
        getattr(oar.nn.functional, name)(xo, *args).sum().backward()
        getattr(torch.nn.functional, name)(xt, *args).sum().backward()
        close(xo.grad, xt.grad, what=name)


# ---------------------------------------------------------------- DataLoader worker processes
class Squares(oar.utils.data.Dataset):
    """Each item runs oar ops big enough to use the thread pool (in the worker process)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == 13 and getattr(self, "fail", False):
            raise ValueError("item 13 is broken")
        a = oar.full((64, 64), float(i))
        info = oar.utils.data.get_worker_info()
        return (a @ a).sum() / 64.0, i, -1 if info is None else info.id


def test_dataloader_workers_give_the_same_batches_in_order():
    oar.set_num_threads(2)
    (oar.randn(256, 256) @ oar.randn(256, 256)).sum()  # the parent's pool is running when workers fork
    ds = Squares(22)
    serial = list(oar.utils.data.DataLoader(ds, batch_size=4))
    loader = oar.utils.data.DataLoader(ds, batch_size=4, num_workers=2)
    for _ in range(2):  # twice: a second epoch starts new workers
        parallel = list(loader)
        assert len(parallel) == len(serial) == 6
        for (v0, i0, w0), (v1, i1, w1) in zip(serial, parallel):
            assert i0.tolist() == i1.tolist()
            close(v0, v1)
            assert set(w0.tolist()) == {-1} and set(w1.tolist()) <= {0, 1}
    assert {w for _, _, ws in parallel for w in ws.tolist()} == {0, 1}
    (oar.randn(256, 256) @ oar.randn(256, 256)).sum()  # the parent's pool still works


def test_dataloader_worker_errors_and_init_fn():
    ds = Squares(20)
    ds.fail = True
    with pytest.raises(RuntimeError, match="(?s)DataLoader worker .*item 13 is broken"):
        list(oar.utils.data.DataLoader(ds, batch_size=4, num_workers=2))
    seen = []

    def init(worker_id):
        raise KeyError(f"init of {worker_id}")

    with pytest.raises(RuntimeError, match="worker_init_fn in DataLoader worker"):
        list(oar.utils.data.DataLoader(Squares(4), batch_size=2, num_workers=1, worker_init_fn=init))
    assert not seen


# ---------------------------------------------------------------- attention and transformer layers
def _copy_weights(dst, src):
    dst.load_state_dict({k: oar.tensor(v.detach().numpy()) for k, v in src.state_dict().items()})


@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(torch, batch_first):
    E, H, L, S, N = 8, 2, 5, 6, 3
    tm = torch.nn.MultiheadAttention(E, H, batch_first=batch_first)
    om = oar.nn.MultiheadAttention(E, H, batch_first=batch_first)
    assert [k for k, _ in om.named_parameters()] == [k for k, _ in tm.named_parameters()]
    _copy_weights(om, tm)
    shp = (lambda n, l: (n, l, E)) if batch_first else (lambda n, l: (l, n, E))
    q, k, v = R.randn(*shp(N, L)).astype(np.float32), R.randn(*shp(N, S)).astype(np.float32), \
        R.randn(*shp(N, S)).astype(np.float32)
    causal = np.triu(np.ones((L, S), bool), 1)
    pad = np.zeros((N, S), bool)
    pad[1, -2:] = True
    for masks in ({}, {"attn_mask": causal}, {"key_padding_mask": pad},
                  {"attn_mask": R.randn(L, S).astype(np.float32), "key_padding_mask": pad}):
        for avg in (True, False):
            (qo, ko, vo), (qt, kt, vt) = both(torch, q, k, v)
            yo, wo = om(qo, ko, vo, average_attn_weights=avg, **{n: oar.tensor(m) for n, m in masks.items()})
            yt, wt = tm(qt, kt, vt, average_attn_weights=avg, **{n: torch.tensor(m) for n, m in masks.items()})
            close(yo, yt, what=f"output {list(masks)}")
            close(wo, wt, what=f"weights {list(masks)}")
            gy = R.randn(*yt.shape).astype(np.float32)
            (yo * oar.tensor(gy)).sum().backward()
            (yt * torch.tensor(gy)).sum().backward()
            for a, b, n in ((qo, qt, "q"), (ko, kt, "k"), (vo, vt, "v")):
                close(a.grad, b.grad, what=f"grad {n} {list(masks)}")
    for (n, a), (_, b) in zip(om.named_parameters(), tm.named_parameters()):
        close(a.grad, b.grad, rtol=1e-4, atol=1e-4, what=f"parameter grad {n}")


@pytest.mark.parametrize("norm_first,activation", [(False, "relu"), (True, "gelu")])
def test_transformer_encoder_matches_torch(torch, norm_first, activation):
    E, H, L, N = 8, 2, 5, 3
    tl = torch.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, norm_first=norm_first, activation=activation,
                                          batch_first=True)
    te = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(E), enable_nested_tensor=False).eval()
    ol = oar.nn.TransformerEncoderLayer(E, H, dim_feedforward=16, norm_first=norm_first, activation=activation,
                                        batch_first=True)
    oe = oar.nn.TransformerEncoder(ol, 2, norm=oar.nn.LayerNorm(E)).eval()
    assert [k for k, _ in oe.named_parameters()] == [k for k, _ in te.named_parameters()]
    _copy_weights(oe, te)
    x = R.randn(N, L, E).astype(np.float32)
    pad = np.zeros((N, L), bool)
    pad[0, -1] = True
    (xo,), (xt,) = both(torch, x)
    yo = oe(xo, mask=oar.tensor(np.triu(np.ones((L, L), bool), 1)), src_key_padding_mask=oar.tensor(pad))
    yt = te(xt, mask=torch.tensor(np.triu(np.ones((L, L), bool), 1)), src_key_padding_mask=torch.tensor(pad))
    close(yo, yt, rtol=1e-4, atol=1e-4)
    yo.sum().backward()
    yt.sum().backward()
    close(xo.grad, xt.grad, rtol=1e-4, atol=1e-4)
    for (n, a), (_, b) in zip(oe.named_parameters(), te.named_parameters()):
        close(a.grad, b.grad, rtol=1e-3, atol=1e-4, what=n)


# ---------------------------------------------------------------- functions torchvision calls
def test_diff_roll_meshgrid_interpolate_instance_norm(torch):
    a = R.randn(4, 6).astype(np.float32)
    for n, dim in ((1, -1), (2, 0)):
        (xo,), (xt,) = both(torch, a)
        yo, yt = oar.diff(xo, n=n, dim=dim), torch.diff(xt, n=n, dim=dim)
        close(yo, yt)
        (yo * yo).sum().backward()
        (yt * yt).sum().backward()
        close(xo.grad, xt.grad)
    for shifts, dims in ((2, 1), ((1, -3), (0, 1)), (5, None)):
        (xo,), (xt,) = both(torch, a)
        yo, yt = oar.roll(xo, shifts, dims), torch.roll(xt, shifts, dims)
        close(yo, yt)
        (yo * oar.tensor(a)).sum().backward()
        (yt * torch.tensor(a)).sum().backward()
        close(xo.grad, xt.grad)
    for indexing in ("ij", "xy"):
        go = oar.meshgrid(oar.arange(3), oar.arange(4), oar.arange(2), indexing=indexing)
        gt = torch.meshgrid(torch.arange(3), torch.arange(4), torch.arange(2), indexing=indexing)
        for p, q in zip(go, gt):
            assert p.tolist() == q.tolist()
    img = R.randn(2, 3, 4, 5).astype(np.float32)
    (xo,), (xt,) = both(torch, img)
    for kw in ({"scale_factor": 2}, {"size": (8, 15)}):
        yo = oar.nn.functional.interpolate(xo, **kw)
        yt = torch.nn.functional.interpolate(xt, **kw)
        close(yo, yt)
    for kw in ({"size": (7, 3)}, {"size": (9, 11), "align_corners": True}, {"scale_factor": 1.5},
               {"scale_factor": 0.5, "align_corners": True}):
        (xo,), (xt,) = both(torch, img)
        yo = oar.nn.functional.interpolate(xo, mode="bilinear", **kw)
        yt = torch.nn.functional.interpolate(xt, mode="bilinear", **kw)
        close(yo, yt, what=f"bilinear {kw}")
        gy = R.randn(*yt.shape).astype(np.float32)
        (yo * oar.tensor(gy)).sum().backward()
        (yt * torch.tensor(gy)).sum().backward()
        close(xo.grad, xt.grad, what=f"bilinear grad {kw}")
    with pytest.raises(NotImplementedError, match="interpolate: mode 'lanczos' is not offered"):
        oar.nn.functional.interpolate(xo, scale_factor=2, mode="lanczos")
    for affine in (False, True):
        (xo,), (xt,) = both(torch, img)
        mo, mt = oar.nn.InstanceNorm2d(3, affine=affine), torch.nn.InstanceNorm2d(3, affine=affine)
        yo, yt = mo(xo), mt(xt)
        close(yo, yt, rtol=1e-4, atol=1e-4)
        (yo * oar.tensor(img)).sum().backward()
        (yt * torch.tensor(img)).sum().backward()
        close(xo.grad, xt.grad, rtol=1e-3, atol=1e-4)
