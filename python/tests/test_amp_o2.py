"""O2 mixed precision from Python with Paddle's API (docs/amp.md, "O2 from Python"):
oar.amp.decorate (f16/bf16 parameters, norm layers f32, f32 master weights in the optimizer),
oar.amp.auto_cast (levels O1/O2, nesting, enable=False, custom lists) and oar.amp.GradScaler
under Paddle's names. Training against f32, one update against torch 1.13's optimizers on the
masters, checkpoints, skipped steps, compiled steps equal to eager ones, and refusals."""
import numpy as np
import pytest

import oar
import oar.nn as nn
import oar.nn.functional as F


def mlp():
    oar.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                         nn.Linear(32, 4))


def cnn():
    oar.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 4))


def data(kind):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 12) if kind == "mlp" else (16, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 4, size=x.shape[0])
    return oar.tensor(x), oar.tensor(y)


def train(kind, dtype=None, opt_cls=oar.optim.SGD, steps=20, scaler=None, **opt_kw):
    """Losses of `steps` steps; dtype None: f32, else O2 in that dtype."""
    m = mlp() if kind == "mlp" else cnn()
    opt = opt_cls(m.parameters(), **(opt_kw or {"lr": 0.05, "momentum": 0.9}))
    if dtype:
        m, opt = oar.amp.decorate(m, opt, level="O2", dtype=dtype)
    x, y = data(kind)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with oar.amp.auto_cast(enable=dtype is not None, level="O2", dtype=dtype or "float16"):
            loss = F.cross_entropy(m(x), y)
        losses.append(loss.item())
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    return m, opt, losses


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_o2_trains_like_f32(kind, dtype):
    _, _, ref = train(kind)
    low = {"bfloat16": oar.bfloat16, "float16": oar.float16}[dtype]
    scaler = oar.amp.GradScaler(init_loss_scaling=1024.0) if dtype == "float16" else None
    m, opt, got = train(kind, dtype, scaler=scaler)
    assert all(np.isfinite(got))
    assert got[-1] < 0.7 * got[0] and ref[-1] < 0.7 * ref[0]   # both learn
    assert np.allclose(got, ref, rtol=0.05, atol=0.02), (got, ref)
    for name, p in m.named_parameters():
        norm = kind == "mlp" and name.startswith("1.") or kind == "cnn" and name.startswith("1.")
        assert p.dtype == (oar.float32 if norm else low), name
    masters = opt.state_dict()["master_weights"]
    assert all(t.dtype == oar.float32 for t in masters.values())
    for name, p in m.named_parameters():   # each low parameter is its master rounded
        assert oar.equal(masters[name].to(p.dtype), p), name
    if scaler:
        assert scaler.get_scale() == 1024.0  # no inf/nan met: no backoff in 20 steps


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_update_runs_on_f32_masters_as_torch(torch, opt_name):
    """One O2 step equals torch's optimizer on the f32 masters with the widened bf16 gradients,
    and the parameters are the new masters rounded to bf16."""
    kw = {"SGD": dict(lr=0.1, momentum=0.9), "Adam": dict(lr=0.01), "AdamW": dict(lr=0.01, weight_decay=0.1)}[opt_name]
    m = mlp()
    opt = getattr(oar.optim, opt_name)(m.parameters(), **kw)
    m, opt = oar.amp.decorate(m, opt, dtype="bfloat16")
    names = [n for n, _ in m.named_parameters()]
    masters = [torch.tensor(opt.state_dict()["master_weights"][n].numpy()).requires_grad_() for n in names]
    topt = getattr(torch.optim, opt_name)(masters, **kw)
    x, y = data("mlp")
    for _ in range(3):
        opt.zero_grad()
        with oar.amp.auto_cast(level="O2", dtype="bfloat16"):
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        grads = [p.grad.float().numpy() for p in m.parameters()]
        assert m[0].weight.grad.dtype == oar.bfloat16 and m[1].weight.grad.dtype == oar.float32
        opt.step()
        for t, g in zip(masters, grads):
            t.grad = torch.tensor(g)
        topt.step()
        got = opt.state_dict()["master_weights"]
        for n, t, p in zip(names, masters, m.parameters()):
            assert np.allclose(got[n].numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6), n
            assert oar.equal(got[n].to(p.dtype), p.detach()), n   # the parameter: its master rounded


def test_masters_round_trip_through_state_dict(tmp_path):
    """Saved mid-run (optimizer state with the masters, the model with save_dtype float32) and
    loaded into a freshly decorated model, the run continues with the same bits."""
    def make():
        m = mlp()
        opt = oar.optim.AdamW(m.parameters(), lr=0.01)
        return oar.amp.decorate(m, opt, level="O2", dtype="bfloat16", save_dtype="float32")

    def steps(m, opt, n):
        x, y = data("mlp")
        out = []
        for _ in range(n):
            opt.zero_grad()
            with oar.amp.auto_cast(level="O2", dtype="bfloat16"):
                loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    m, opt = make()
    steps(m, opt, 4)
    msd, osd = m.state_dict(), opt.state_dict()
    assert msd["0.weight"].dtype == oar.float32          # save_dtype: the masters
    assert oar.equal(msd["0.weight"], osd["master_weights"]["0.weight"])
    assert not oar.equal(msd["0.weight"], m[0].weight.float())  # finer than the bf16 parameter
    for k, d in (("model", msd), ("masters", osd["master_weights"]), ("state", osd["state"])):
        oar.save(d, str(tmp_path / f"{k}.pt"))   # safetensors files: one flat dict each
    at_save = [p.detach().clone() for p in m.parameters()]
    want = steps(m, opt, 3)
    m2, opt2 = make()
    ck = {k: dict(oar.load(str(tmp_path / f"{k}.pt"))) for k in ("model", "masters", "state")}
    ck["opt"] = {"state": ck["state"], "master_weights": ck["masters"], "param_groups": osd["param_groups"]}
    m2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    assert m2[0].weight.dtype == oar.bfloat16
    assert steps(m2, opt2, 3) == want
    for a, b in zip(m.parameters(), m2.parameters()):
        assert oar.equal(a, b)
    # the optimizer's state alone restores the masters and rounds them into the parameters
    m4, opt4 = make()
    opt4.load_state_dict(ck["opt"])
    for n, t in opt4.state_dict()["master_weights"].items():
        assert oar.equal(t, ck["masters"][n]), n
    assert all(oar.equal(a, b) for a, b in zip(m4.parameters(), at_save))
    # the model's state alone restores the masters too
    m3, opt3 = make()
    m3.load_state_dict(ck["model"])
    assert oar.equal(opt3.state_dict()["master_weights"]["3.weight"], ck["opt"]["master_weights"]["3.weight"])


def test_norm_and_excluded_layers_stay_f32():
    m = cnn()
    oar.amp.decorate(m, level="O2", dtype="bfloat16", excluded_layers=[m[7]])
    assert m[0].weight.dtype == oar.bfloat16 and m[4].weight.dtype == oar.bfloat16
    assert m[1].weight.dtype == oar.float32 and m[1].running_mean.dtype == oar.float32
    assert m[7].weight.dtype == oar.float32
    m = mlp()
    oar.amp.decorate(m, dtype="float16", excluded_layers=nn.Linear)
    assert all(p.dtype == oar.float32 for p in m.parameters())
    m = mlp()
    assert oar.amp.decorate(m, level="O1") is m and m[0].weight.dtype == oar.float32   # O1 changes nothing


def test_fp16_scaler_skips_a_step_on_inf():
    m = mlp()
    opt = oar.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    m, opt = oar.amp.decorate(m, opt, dtype="float16")
    sc = oar.amp.GradScaler(init_loss_scaling=256.0, decr_every_n_nan_or_inf=2)
    x, y = data("mlp")

    def step(inp):
        opt.zero_grad()
        with oar.amp.auto_cast(level="O2", dtype="float16"):
            loss = F.cross_entropy(m(inp), y)
        sc.scale(loss).backward()
        return sc.minimize(opt, loss)

    step(x)
    before = [p.clone() for p in m.parameters()]
    masters = {k: v.clone() for k, v in opt.state_dict()["master_weights"].items()}
    bad = x.clone()
    bad[0, 0] = float("inf")
    step(bad)   # skipped; the first inf of two: the scale stays
    assert all(oar.equal(a, b) for a, b in zip(before, m.parameters()))
    assert all(oar.equal(masters[k], v) for k, v in opt.state_dict()["master_weights"].items())
    assert sc.get_scale() == 256.0 and sc.state_dict()["decr_count"] == 1
    step(bad)   # the second: backoff
    assert sc.get_scale() == 128.0 and sc.state_dict()["decr_count"] == 0
    step(x)     # a finite step moves the parameters again
    assert not all(oar.equal(a, b) for a, b in zip(before, m.parameters()))
    assert sc.state_dict()["incr_count"] == 1


def test_paddle_grad_scaler_names():
    sc = oar.amp.GradScaler(True, 512.0, 3.0, 0.25, 7, 2, True)
    assert (sc.is_enable(), sc.is_use_dynamic_loss_scaling(), sc.get_init_loss_scaling()) == (True, True, 512.0)
    assert (sc.get_incr_ratio(), sc.get_decr_ratio(), sc.get_incr_every_n_steps()) == (3.0, 0.25, 7)
    assert sc.get_decr_every_n_nan_or_inf() == 2
    sd = sc.state_dict()
    assert {"incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_count",
            "decr_count", "use_dynamic_loss_scaling", "scale"} <= set(sd)
    paddle_only = {k: v for k, v in sd.items() if k not in ("growth_factor", "backoff_factor", "growth_interval",
                                                           "_growth_tracker")}
    sc2 = oar.amp.GradScaler(enable=True)
    sc2.load_state_dict(paddle_only)
    assert (sc2.get_scale(), sc2.get_incr_ratio(), sc2.get_decr_every_n_nan_or_inf()) == (512.0, 3.0, 2)
    assert set(oar.amp.GradScaler().state_dict()) == {"scale", "growth_factor", "backoff_factor", "growth_interval",
                                                      "_growth_tracker"}   # torch's keys for torch's calls
    off = oar.amp.GradScaler(enable=False)
    assert not off.is_enable()
    static = oar.amp.GradScaler(init_loss_scaling=8.0, use_dynamic_loss_scaling=False)
    assert not static.is_use_dynamic_loss_scaling()
    with pytest.raises(TypeError, match="'init_scale' given twice"):
        oar.amp.GradScaler(init_scale=2.0, init_loss_scaling=4.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'incr_every'"):
        oar.amp.GradScaler(incr_every=3)
    with pytest.raises(ValueError, match="decr_every_n_nan_or_inf to be an int >= 1, got 0"):
        oar.amp.GradScaler(decr_every_n_nan_or_inf=0)


def test_auto_cast_levels_nesting_and_lists():
    x, w = oar.randn(4, 8), oar.randn(8, 3)
    with oar.amp.auto_cast(dtype="bfloat16"):      # O1: f32 inputs of a low op are cast down
        assert (x @ w).dtype == oar.bfloat16
        with oar.amp.auto_cast(enable=False):
            assert (x @ w).dtype == oar.float32
            with oar.amp.auto_cast(level="O2", dtype="float16"):
                assert (x @ w).dtype == oar.float16
            assert (x @ w).dtype == oar.float32
        assert (x @ w).dtype == oar.bfloat16
        with oar.amp.auto_cast(level="O0"):
            assert (x @ w).dtype == oar.float32
    assert (x @ w).dtype == oar.float32
    xb = x.bfloat16()
    with oar.amp.auto_cast(level="O2", dtype="bfloat16"):
        assert oar.relu(xb).dtype == oar.bfloat16        # all inputs low: low
        assert (xb + x).dtype == oar.float32             # a promote op meeting f32: f32
        assert oar.softmax(xb, -1).dtype == oar.float32  # fp32 class
        with oar.amp.auto_cast(level="O2", dtype="bfloat16", custom_black_list=["matmul"]):
            assert (xb @ w.bfloat16()).dtype == oar.float32
    with oar.amp.auto_cast(level="O2", dtype="bfloat16", custom_white_list=["softmax"]):
        assert oar.softmax(xb, -1).dtype == oar.bfloat16

    @oar.amp.auto_cast(dtype="bfloat16")
    def f(a, b):
        return a @ b

    assert f(x, w).dtype == oar.bfloat16 and (x @ w).dtype == oar.float32


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_compiled_o2_step_equals_eager(kind, dtype):
    def run(compiled):
        m = mlp() if kind == "mlp" else cnn()
        opt = oar.optim.Adam(m.parameters(), lr=0.01)
        m, opt = oar.amp.decorate(m, opt, dtype=dtype)
        sc = oar.amp.GradScaler(init_loss_scaling=1024.0, incr_every_n_steps=3, enable=dtype == "float16")
        x, y = data(kind)

        def step(x, y):
            opt.zero_grad()
            with oar.amp.auto_cast(level="O2", dtype=dtype):
                loss = F.cross_entropy(m(x), y)
            sc.scale(loss).backward()
            sc.step(opt)
            sc.update()
            return loss

        fn = oar.jit.to_static(step) if compiled else step
        losses = [fn(x, y).item() for _ in range(6)]
        return losses, [t.clone() for t in m.state_dict().values()], opt.state_dict()["master_weights"], \
            sc.get_scale()

    (le, pe, me, se), (lc, pc, mc, sc_) = run(False), run(True)
    assert le == lc and se == sc_
    assert all(a.dtype == b.dtype and oar.equal(a, b) for a, b in zip(pe, pc))   # parameters, running stats
    assert all(oar.equal(me[k], mc[k]) for k in me)
    if dtype == "float16":
        assert se == 4096.0  # grew twice (every 3 good steps) in eager and compiled alike


def test_bad_inputs():
    m = mlp()
    with pytest.raises(ValueError, match="expected level 'O1' or 'O2', got 'O3'"):
        oar.amp.decorate(m, level="O3")
    with pytest.raises(ValueError, match="expected dtype 'float16' or 'bfloat16', got 'float32'"):
        oar.amp.decorate(m, dtype="float32")
    with pytest.raises(ValueError, match="expected level 'O0', 'O1' or 'O2', got 'O4'"):
        oar.amp.auto_cast(level="O4")
    with pytest.raises(ValueError, match="expected dtype 'float16' or 'bfloat16', got 'int8'"):
        oar.amp.auto_cast(dtype="int8")
    with pytest.raises(ValueError, match="use_promote=False is not offered"):
        oar.amp.auto_cast(use_promote=False)
    with pytest.raises(ValueError, match="in both custom_white_list and custom_black_list"):
        oar.amp.auto_cast(custom_white_list=["matmul"], custom_black_list=["matmul"])
    with pytest.raises(ValueError, match="is 'no_such_op', not an op"):
        with oar.amp.auto_cast(custom_white_list=["no_such_op"]):
            pass
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="master_weight=False is not offered"):
        oar.amp.decorate(m, opt, master_weight=False)
    oar.amp.decorate(m, opt, dtype="bfloat16")
    with pytest.raises(RuntimeError, match="decorated already .* decorate each model once"):
        oar.amp.decorate(m, dtype="bfloat16")
    with pytest.raises(RuntimeError, match="SGD is decorated already"):
        oar.amp.decorate(mlp(), opt)
    other = mlp()
    with pytest.raises(ValueError, match="not one of the decorated models' trainable parameters"):
        oar.amp.decorate(mlp(), oar.optim.SGD(other.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="expected models to be a layer"):
        oar.amp.decorate("model")
    with pytest.raises(TypeError, match="excluded_layers to be a layer, a layer type"):
        oar.amp.decorate(mlp(), excluded_layers="norm")
    d = nn.Linear(2, 2).double()   # a non-f32 parameter: refused, nothing converted
    with pytest.raises(TypeError, match="expected f32 parameters, got f64 for 'weight' .make it f32 first"):
        oar.amp.decorate(d)
    assert d.weight.dtype == oar.float64
    with pytest.raises(RuntimeError, match="add_param_group: this optimizer was decorated"):
        opt.add_param_group({"params": [nn.Parameter(oar.zeros(2))]})
    stepped = mlp()
    sopt = oar.optim.SGD(stepped.parameters(), lr=0.1)
    F.cross_entropy(stepped(data("mlp")[0]), data("mlp")[1]).backward()
    sopt.step()
    with pytest.raises(RuntimeError, match="has stepped already"):
        oar.amp.decorate(stepped, sopt)
    assert stepped[0].weight.dtype == oar.float32  # the refusal converted nothing


def test_clip_master_grads_after_unscale():
    """After unscale_ the true gradients are on the masters: clipping master_params bounds the step."""
    m = mlp()
    opt = oar.optim.SGD(m.parameters(), lr=0.5)
    m, opt = oar.amp.decorate(m, opt, dtype="float16")
    assert len(oar.amp.master_params(opt)) == len(list(m.parameters()))
    assert all(t.dtype == oar.float32 for t in oar.amp.master_params(opt))
    sc = oar.amp.GradScaler(init_loss_scaling=512.0)
    x, y = data("mlp")
    before = [t.detach().clone() for t in oar.amp.master_params(opt)]
    with oar.amp.auto_cast(level="O2", dtype="float16"):
        loss = F.cross_entropy(m(x), y)
    sc.scale(loss).backward()
    sc.unscale_(opt)
    norm = nn.utils.clip_grad_norm_(oar.amp.master_params(opt), 1e-3)
    assert 1e-3 < float(norm) < 100   # the unscaled norm (the scaled one would be 512 times larger)
    sc.step(opt)
    sc.update()
    moved = sum(float(((t.detach() - b) ** 2).sum()) for t, b in zip(oar.amp.master_params(opt), before)) ** 0.5
    assert abs(moved - 0.5 * 1e-3) < 1e-5
    assert m[0].weight.grad is None   # the gradients went to the masters


def test_deepcopy_of_a_decorated_model():
    """A copy (an EMA or SWA model) is a plain model with the low parameters: no masters of its own."""
    import copy

    m = mlp()
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    oar.amp.decorate(m, opt, dtype="bfloat16", save_dtype="float32")
    c = copy.deepcopy(m)
    assert c[0].weight.dtype == oar.bfloat16 and oar.equal(c[0].weight, m[0].weight)
    assert c.state_dict()["0.weight"].dtype == oar.bfloat16 and m.state_dict()["0.weight"].dtype == oar.float32
    c.load_state_dict(m.state_dict())   # f32 values, rounded into the copy's parameters
    assert oar.equal(c[0].weight, m[0].weight)


def test_lists_of_models_and_optimizers():
    """decorate returns what it was given (lists stay lists); two optimizers over two models step
    their own masters, and the master names carry the model's index."""
    a, b = mlp(), cnn()
    oa, ob = oar.optim.SGD(a.parameters(), lr=0.1), oar.optim.Adam(b.parameters(), lr=0.01)
    models, opts = oar.amp.decorate([a, b], [oa, ob], dtype="bfloat16")
    assert models == [a, b] and opts == [oa, ob]
    assert a[0].weight.dtype == oar.bfloat16 and b[0].weight.dtype == oar.bfloat16
    assert set(oa.state_dict()["master_weights"]) >= {"0.0.weight", "1.0.weight"}
    (xa, ya), (xb, yb) = data("mlp"), data("cnn")
    b_before = b[0].weight.clone()
    with oar.amp.auto_cast(level="O2", dtype="bfloat16"):
        loss = F.cross_entropy(a(xa), ya) + F.cross_entropy(b(xb), yb)
    loss.backward()
    a_before = a[0].weight.clone()
    oa.step()
    assert not oar.equal(a[0].weight, a_before) and oar.equal(b[0].weight, b_before)
    ob.step()
    assert not oar.equal(b[0].weight, b_before)


def test_lr_schedule_reaches_the_masters_update():
    """An lr schedule edits param_groups; the rebuilt C optimizer over the masters takes it."""
    def moved(gamma):
        m = mlp()
        opt = oar.optim.SGD(m.parameters(), lr=0.1)
        m, opt = oar.amp.decorate(m, opt, dtype="bfloat16")
        sched = oar.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=gamma)
        x, y = data("mlp")
        for _ in range(2):
            opt.zero_grad()
            with oar.amp.auto_cast(level="O2", dtype="bfloat16"):
                F.cross_entropy(m(x), y).backward()
            before = oar.amp.master_params(opt)[0].detach().clone()
            opt.step()
            sched.step()
        return float((oar.amp.master_params(opt)[0].detach() - before).abs().sum())

    assert moved(0.0) == 0.0 and moved(1.0) > 0.0   # the second step runs at lr 0.1 * gamma
