"""oar.optim.LBFGS (no line search and strong Wolfe) on a quadratic and on a small MLP, and
oar.optim.swa_utils (AveragedModel, SWALR, update_bn), against torch 1.13; SparseAdam's refusal."""
import numpy as np
import pytest

import oar
import oar.nn as nn

F = nn.functional


def copy_params(src, dst):
    dst.load_state_dict({k: oar.from_numpy(v.detach().numpy().copy()) for k, v in src.state_dict().items()})


# ---------------------------------------------------------------- LBFGS
def quadratic(lib, x, a, b):
    return 0.5 * (x * (lib.tensor(a) @ x)).sum() - (lib.tensor(b) * x).sum()


LBFGS_OPTS = [
    dict(),
    dict(history_size=3, max_iter=30),  # the history drops its oldest pairs
    dict(line_search_fn="strong_wolfe"),
    dict(line_search_fn="strong_wolfe", history_size=2, lr=0.5, max_iter=8),
]


@pytest.mark.parametrize("opts", LBFGS_OPTS, ids=[str(i) for i in range(len(LBFGS_OPTS))])
def test_lbfgs_quadratic_matches_torch(opts, torch):
    rng = np.random.RandomState(0)
    m = rng.randn(6, 6)
    # f64: the stopping tests (tolerance_change 1e-9 on the loss) sit near f32's rounding, where
    # the last iteration's evaluation count followed the CPU's summation order, not the algorithm
    a = m @ m.T + 0.5 * np.eye(6)  # condition number ~ 100
    b = rng.randn(6)
    x0 = rng.randn(6)
    xs = {}
    for name, lib in (("torch", torch), ("oar", oar)):
        x = lib.tensor(x0.copy(), requires_grad=True)
        opt = lib.optim.LBFGS([x], **opts)

        def closure():
            opt.zero_grad()
            loss = quadratic(lib, x, a, b)
            loss.backward()
            return loss

        losses = [float(opt.step(closure)) for _ in range(3)]
        st = opt.state_dict()["state"][0]
        xs[name] = (x.detach().numpy().copy(), losses, st["func_evals"], st["n_iter"])
    (xt, lt, et, it), (xo, lo, eo, io) = xs["torch"], xs["oar"]
    assert (eo, io) == (et, it)  # the same iterations and evaluations
    np.testing.assert_allclose(lo, lt, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xo, xt, rtol=1e-4, atol=1e-5)
    if opts.get("line_search_fn") and "max_iter" not in opts:  # converged: the solution itself
        np.testing.assert_allclose(xo, np.linalg.solve(a, b), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
def test_lbfgs_mlp_matches_torch(line_search, torch):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    om = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    copy_params(tm, om)
    rng = np.random.RandomState(1)
    x = rng.randn(32, 3).astype(np.float32)
    y = np.sin(x.sum(1, keepdims=True)).astype(np.float32)
    topt = torch.optim.LBFGS(tm.parameters(), max_iter=5, history_size=4, line_search_fn=line_search)
    oopt = oar.optim.LBFGS(om.parameters(), max_iter=5, history_size=4, line_search_fn=line_search)

    def tclosure():
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(tm(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        return loss

    def oclosure():
        oopt.zero_grad()
        loss = F.mse_loss(om(oar.tensor(x)), oar.tensor(y))
        loss.backward()
        return loss

    for _ in range(3):
        lt, lo = float(topt.step(tclosure)), float(oopt.step(oclosure))
        assert abs(lt - lo) <= 1e-5 * max(1.0, abs(lt))
    assert oopt.state_dict()["state"][0]["func_evals"] == topt.state_dict()["state"][0]["func_evals"]
    for (n, pt), (_, po) in zip(tm.named_parameters(), om.named_parameters()):
        np.testing.assert_allclose(po.detach().numpy(), pt.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=n)


def test_lbfgs_refuses_what_torch_refuses():
    p = oar.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        oar.optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        oar.optim.LBFGS([{"params": [p]}, {"params": [oar.ones(2, requires_grad=True)]}])


# ---------------------------------------------------------------- swa_utils
def mlp_bn(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 6), lib.nn.BatchNorm1d(6), lib.nn.ReLU(), lib.nn.Linear(6, 2))


@pytest.mark.parametrize("kind", ["mean", "ema", "ema_buffers"])
def test_averaged_model_matches_torch(kind, torch):
    torch.manual_seed(0)
    tm, om = mlp_bn(torch), mlp_bn(oar)
    copy_params(tm, om)
    ema = None if kind == "mean" else (lambda avg, cur, n: 0.9 * avg + 0.1 * cur)
    use_buffers = kind == "ema_buffers"
    tavg = torch.optim.swa_utils.AveragedModel(tm, avg_fn=ema, use_buffers=use_buffers)
    oavg = oar.optim.swa_utils.AveragedModel(om, avg_fn=ema, use_buffers=use_buffers)
    topt, oopt = torch.optim.SGD(tm.parameters(), lr=0.1), oar.optim.SGD(om.parameters(), lr=0.1)
    rng = np.random.RandomState(2)
    for _ in range(4):
        x, y = rng.randn(8, 4).astype(np.float32), rng.randint(0, 2, 8)
        topt.zero_grad(), oopt.zero_grad()
        torch.nn.functional.cross_entropy(tm(torch.tensor(x)), torch.tensor(y)).backward()
        F.cross_entropy(om(oar.tensor(x)), oar.tensor(y)).backward()
        topt.step(), oopt.step()
        tavg.update_parameters(tm)
        oavg.update_parameters(om)
    tsd, osd = tavg.state_dict(), oavg.state_dict()
    assert list(osd) == list(tsd)  # n_averaged, then module.<name>
    for k in tsd:
        np.testing.assert_allclose(osd[k].numpy(), tsd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    x = rng.randn(5, 4).astype(np.float32)
    tavg.eval(), oavg.eval()
    np.testing.assert_allclose(oavg(oar.tensor(x)).detach().numpy(), tavg(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strategy, epochs", [("cos", 3), ("linear", 3), ("cos", 0), ("linear", 1)])
def test_swalr_matches_torch(strategy, epochs, torch):
    lrs = {}
    for name, lib in (("torch", torch), ("oar", oar)):
        p, q = lib.zeros(1, requires_grad=True), lib.zeros(1, requires_grad=True)
        opt = lib.optim.SGD([{"params": [p]}, {"params": [q], "lr": 0.2}], lr=0.5)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05, 0.01], anneal_epochs=epochs, anneal_strategy=strategy)
        seq = [[g["lr"] for g in opt.param_groups]]
        for t in range(6):
            opt.step()
            sched.step()
            seq.append([g["lr"] for g in opt.param_groups])
        lrs[name] = seq
    np.testing.assert_allclose(np.array(lrs["oar"]), np.array(lrs["torch"]), rtol=1e-12, atol=1e-15)


def test_swalr_refuses_what_torch_refuses():
    opt = oar.optim.SGD([oar.zeros(1, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy must by one of 'cos' or 'linear', instead got exp"):
        oar.optim.swa_utils.SWALR(opt, 0.01, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs must be equal or greater than 0, got -1"):
        oar.optim.swa_utils.SWALR(opt, 0.01, anneal_epochs=-1)


def test_update_bn_matches_torch(torch):
    torch.manual_seed(0)
    tm, om = mlp_bn(torch), mlp_bn(oar)
    copy_params(tm, om)
    rng = np.random.RandomState(4)
    data = [rng.randn(7, 4).astype(np.float32) * 2 + 1 for _ in range(5)]
    tm.eval(), om.eval()
    torch.optim.swa_utils.update_bn([(torch.tensor(x), 0) for x in data], tm)
    oar.optim.swa_utils.update_bn([(oar.tensor(x), 0) for x in data], om)
    assert not om.training and om[1].momentum == tm[1].momentum
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(om.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


# ---------------------------------------------------------------- SparseAdam
def test_sparse_adam_refuses_dense_gradients_as_torch(torch):
    emb = nn.Embedding(5, 3, sparse=True)
    opt = oar.optim.SparseAdam(emb.parameters(), lr=0.01)
    emb(oar.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, please consider Adam"):
        opt.step()
    temb = torch.nn.Embedding(5, 3)  # a dense gradient: torch refuses it with the same words
    topt = torch.optim.SparseAdam(temb.parameters(), lr=0.01)
    temb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients, please consider Adam"):
        topt.step()
