"""oar.optim.lr_scheduler beside torch 1.13: every scheduler and option set stepped 30+ times
after optimizer steps (two param groups with different lrs), the lr, momentum and betas of each
group after every step equal within 1e-12; state_dict round trips in the middle of a run;
torch's warnings and errors."""
import math
import warnings

import numpy as np
import pytest

import oar
from conftest import torch_or_skip

STEPS = 36


def _opt(lib, kind, **kw):
    lib.manual_seed(0)
    a, b = lib.nn.Parameter(lib.ones(3)), lib.nn.Parameter(lib.ones(2))
    groups = [{"params": [a]}, {"params": [b], "lr": 0.05}]
    if kind == "sgd":
        return lib.optim.SGD(groups, lr=0.1, momentum=kw.get("momentum", 0.9))
    return lib.optim.Adam(groups, lr=0.1, betas=(0.9, 0.99))


class _Scale:
    """A callable object: LambdaLR's state_dict keeps its attributes."""

    def __init__(self, r):
        self.r = r

    def __call__(self, e):
        return self.r ** e


def _plateau_metrics():
    # improves, stalls (within the threshold), improves a little, stalls again, gets worse
    return [1.0, 0.8, 0.7, 0.7, 0.69999, 0.7, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.59, 0.62, 0.62, 0.62, 0.62, 0.7,
            0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.45, 0.45, 0.45, 0.45, 0.45, 0.44, 0.44, 0.44, 0.44, 0.44, 0.44, 0.44]


S = "lib.optim.lr_scheduler."
# (name, optimizer kind, constructor: (lib, optimizer) -> scheduler); metric: step(metric) for plateau
CASES = [
    ("lambda", "sgd", lambda lib, o: _sched(lib).LambdaLR(o, lambda e: 0.95 ** e)),
    ("lambda_per_group", "sgd", lambda lib, o: _sched(lib).LambdaLR(o, [lambda e: 1 / (1 + e), _Scale(0.9)])),
    ("multiplicative", "sgd", lambda lib, o: _sched(lib).MultiplicativeLR(o, lambda e: 0.9 if e % 2 else 0.97)),
    ("step", "sgd", lambda lib, o: _sched(lib).StepLR(o, step_size=3, gamma=0.5)),
    ("multistep", "sgd", lambda lib, o: _sched(lib).MultiStepLR(o, [3, 7, 7, 20], gamma=0.3)),
    ("constant", "sgd", lambda lib, o: _sched(lib).ConstantLR(o, factor=0.25, total_iters=6)),
    ("constant_default", "adam", lambda lib, o: _sched(lib).ConstantLR(o)),
    ("linear", "sgd", lambda lib, o: _sched(lib).LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=10)),
    ("linear_decay", "adam", lambda lib, o: _sched(lib).LinearLR(o, 1.0, 0.1, total_iters=30)),
    ("exponential", "sgd", lambda lib, o: _sched(lib).ExponentialLR(o, gamma=0.93)),
    ("polynomial", "sgd", lambda lib, o: _sched(lib).PolynomialLR(o, total_iters=20, power=2.0)),
    ("polynomial_sqrt", "adam", lambda lib, o: _sched(lib).PolynomialLR(o, total_iters=33, power=0.5)),
    ("cosine", "sgd", lambda lib, o: _sched(lib).CosineAnnealingLR(o, T_max=7, eta_min=0.001)),
    ("cosine_long", "adam", lambda lib, o: _sched(lib).CosineAnnealingLR(o, T_max=40)),
    ("cyclic_triangular", "sgd", lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.1, step_size_up=4)),
    ("cyclic_triangular2", "sgd", lambda lib, o: _sched(lib).CyclicLR(o, [0.01, 0.02], [0.1, 0.3], step_size_up=3,
                                                                       step_size_down=5, mode="triangular2")),
    ("cyclic_exp_range", "sgd", lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.1, step_size_up=5, mode="exp_range",
                                                                     gamma=0.97, base_momentum=0.7,
                                                                     max_momentum=[0.95, 0.9])),
    ("cyclic_scale_fn_cycle", "sgd", lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                                          scale_fn=lambda x: 1 / x)),
    ("cyclic_scale_fn_iter", "sgd", lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                                         scale_fn=lambda x: 0.99 ** x,
                                                                         scale_mode="iterations")),
    ("cyclic_no_momentum", "adam", lambda lib, o: _sched(lib).CyclicLR(o, 0.001, 0.01, step_size_up=6,
                                                                        cycle_momentum=False)),
    ("onecycle_cos_sgd", "sgd", lambda lib, o: _sched(lib).OneCycleLR(o, max_lr=0.5, total_steps=STEPS + 1)),
    ("onecycle_linear_adam", "adam", lambda lib, o: _sched(lib).OneCycleLR(
        o, max_lr=[0.5, 0.2], epochs=6, steps_per_epoch=7, anneal_strategy="linear", pct_start=0.25)),
    ("onecycle_three_phase", "sgd", lambda lib, o: _sched(lib).OneCycleLR(
        o, max_lr=1.0, total_steps=40, three_phase=True, div_factor=10., final_div_factor=100.,
        base_momentum=0.8, max_momentum=0.92)),
    ("onecycle_three_phase_adam", "adam", lambda lib, o: _sched(lib).OneCycleLR(
        o, max_lr=0.3, total_steps=STEPS + 1, three_phase=True, anneal_strategy="linear")),
    ("onecycle_no_momentum", "sgd", lambda lib, o: _sched(lib).OneCycleLR(o, max_lr=0.4, total_steps=50,
                                                                           cycle_momentum=False)),
    ("warm_restarts", "sgd", lambda lib, o: _sched(lib).CosineAnnealingWarmRestarts(o, T_0=5)),
    ("warm_restarts_mult", "adam", lambda lib, o: _sched(lib).CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2,
                                                                                          eta_min=0.001)),
    ("chained", "sgd", lambda lib, o: _sched(lib).ChainedScheduler(
        [_sched(lib).ConstantLR(o, factor=0.5, total_iters=4), _sched(lib).ExponentialLR(o, gamma=0.9)])),
    ("chained_three", "adam", lambda lib, o: _sched(lib).ChainedScheduler(
        [_sched(lib).LinearLR(o, 0.1, total_iters=5), _sched(lib).StepLR(o, 4, 0.7),
         _sched(lib).CosineAnnealingLR(o, T_max=9)])),
    ("sequential", "sgd", lambda lib, o: _sched(lib).SequentialLR(
        o, [_sched(lib).LinearLR(o, 0.1, total_iters=5), _sched(lib).CosineAnnealingLR(o, T_max=25)], milestones=[5])),
    ("sequential_three", "adam", lambda lib, o: _sched(lib).SequentialLR(
        o, [_sched(lib).ConstantLR(o, 0.5, total_iters=3), _sched(lib).ExponentialLR(o, 0.9),
            _sched(lib).StepLR(o, 5, 0.5)], milestones=[4, 12])),
    ("plateau", "sgd", lambda lib, o: _sched(lib).ReduceLROnPlateau(o, patience=2)),
    ("plateau_max_abs", "sgd", lambda lib, o: _sched(lib).ReduceLROnPlateau(
        o, mode="max", factor=0.5, patience=1, threshold=0.01, threshold_mode="abs", cooldown=2)),
    ("plateau_min_lr", "adam", lambda lib, o: _sched(lib).ReduceLROnPlateau(
        o, factor=0.3, patience=0, cooldown=1, min_lr=[0.02, 0.001], eps=1e-3)),
    ("plateau_abs_min", "adam", lambda lib, o: _sched(lib).ReduceLROnPlateau(
        o, threshold=0.05, threshold_mode="abs", patience=1, min_lr=0.004)),
]


def _sched(lib):
    return lib.optim.lr_scheduler


def _state(opt):
    return [(g["lr"], g.get("momentum"), tuple(g["betas"]) if "betas" in g else None) for g in opt.param_groups]


def _run(lib, kind, make, steps=STEPS, start=None):
    """The groups' state after each of `steps` optimizer-then-scheduler steps; `start`
    (state_dicts of a run stopped midway) resumes instead of starting afresh."""
    opt = _opt(lib, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = make(lib, opt)
        if start is not None:
            opt.load_state_dict(start[0])
            sched.load_state_dict(start[1])
        out = [_state(opt)]
        metrics = _plateau_metrics()
        first = 0 if start is None else start[2]
        for i in range(first, first + steps):
            opt.step()
            if isinstance(sched, lib.optim.lr_scheduler.ReduceLROnPlateau):
                sched.step(metrics[i % len(metrics)])
            else:
                sched.step()
            out.append(_state(opt) + [tuple(sched._last_lr)])   # torch 1.13's plateau has no get_last_lr
    return out, opt, sched


def _close(a, b):
    if isinstance(a, (list, tuple)):
        return type(a) == type(b) and len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-12 * max(1.0, abs(b))
    return a == b


@pytest.mark.parametrize("name,kind,make", CASES, ids=[c[0] for c in CASES])
def test_sequence_matches_torch(name, kind, make):
    torch = torch_or_skip()
    ours, theirs = _run(oar, kind, make)[0], _run(torch, kind, make)[0]
    for step, (o, t) in enumerate(zip(ours, theirs)):
        assert _close(o, t), f"{name}: step {step}: oar {o} torch {t}"
    lrs = {x[0][0] for x in ours}
    assert len(lrs) >= 2, f"{name}: the schedule should move the lr"


@pytest.mark.parametrize("name,kind,make", CASES, ids=[c[0] for c in CASES])
def test_state_dict_round_trip(name, kind, make):
    torch = torch_or_skip()
    whole = _run(oar, kind, make)[0]
    _, opt, sched = _run(oar, kind, make, steps=13)
    resumed = _run(oar, kind, make, steps=STEPS - 13, start=(opt.state_dict(), sched.state_dict(), 13))[0]
    assert _close(resumed[1:], whole[14:]), name
    # the same keys as torch's state_dict
    _, t_opt, t_sched = _run(torch, kind, make, steps=13)
    assert sorted(sched.state_dict()) == sorted(t_sched.state_dict())


def test_fractional_epochs_of_warm_restarts():
    torch = torch_or_skip()
    seqs = []
    for lib in (oar, torch):
        opt = _opt(lib, "sgd")
        sched = lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=3, eta_min=0.005)
        seq = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for epoch in range(15):
                for b in range(4):   # per batch, as torch's documentation shows
                    opt.step()
                    sched.step(epoch + b / 4)
                    seq.append((sched.get_last_lr(), sched.T_cur, sched.T_i, sched.last_epoch))
        seqs.append(seq)
    assert _close(seqs[0], seqs[1])
    with pytest.raises(ValueError, match="Expected non-negative epoch, but got -1"):
        sched.step(-1)


def test_lambda_state_keeps_callable_objects():
    torch = torch_or_skip()
    saved = []
    for lib in (oar, torch):
        sched = lib.optim.lr_scheduler.LambdaLR(_opt(lib, "sgd"), [lambda e: 1.0, _Scale(0.8)])
        sd = sched.state_dict()
        saved.append(sd["lr_lambdas"])
        other = lib.optim.lr_scheduler.LambdaLR(_opt(lib, "sgd"), [lambda e: 1.0, _Scale(0.5)])
        other.load_state_dict(sd)
        assert other.lr_lambdas[1].r == 0.8 and "lr_lambdas" in sd
    assert saved[0] == saved[1] == [None, {"r": 0.8}]


def test_closed_forms_with_epoch_argument():
    torch = torch_or_skip()
    makes = [lambda lib, o: _sched(lib).StepLR(o, 3, 0.5), lambda lib, o: _sched(lib).MultiStepLR(o, [2, 5, 5], 0.5),
             lambda lib, o: _sched(lib).ConstantLR(o, 0.5, 4), lambda lib, o: _sched(lib).LinearLR(o, 0.3, 0.8, 6),
             lambda lib, o: _sched(lib).ExponentialLR(o, 0.8), lambda lib, o: _sched(lib).PolynomialLR(o, 8, 1.5),
             lambda lib, o: _sched(lib).CosineAnnealingLR(o, 6, 0.01)]
    for make in makes:
        seqs = []
        for lib in (oar, torch):
            opt = _opt(lib, "sgd")
            sched = make(lib, opt)
            seq = []
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                for e in (3, 1, 7, 0, 12, 5):
                    opt.step()
                    sched.step(e)
                    seq.append(tuple(sched.get_last_lr()))
            seqs.append((seq, [str(x.message) for x in w]))
        assert _close(seqs[0][0], seqs[1][0])
        assert seqs[0][1] == seqs[1][1] and len(seqs[0][1]) == 6


def _warnings_of(lib, action):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        action(lib)
    return [(x.category.__name__, str(x.message)) for x in w]


def test_warnings_as_torch():
    torch = torch_or_skip()

    def early(lib):   # the scheduler stepped before the optimizer
        opt = _opt(lib, "sgd")
        s = lib.optim.lr_scheduler.StepLR(opt, 2)
        s.step()
        opt.step()

    def in_order(lib):
        opt = _opt(lib, "sgd")
        s = lib.optim.lr_scheduler.ExponentialLR(opt, 0.9)
        for _ in range(3):
            opt.step()
            s.step()

    def get_lr_outside(lib):
        s = lib.optim.lr_scheduler.CosineAnnealingLR(_opt(lib, "sgd"), 5)
        s.get_lr()

    def overridden(lib):
        opt = _opt(lib, "sgd")
        s = lib.optim.lr_scheduler.StepLR(opt, 2)
        opt.step = lambda: None
        opt.step()
        s.step()

    for action in (early, in_order, get_lr_outside, overridden):
        ours, theirs = _warnings_of(oar, action), _warnings_of(torch, action)
        assert ours == theirs, action.__name__
    assert len(_warnings_of(oar, early)) == 1 and not _warnings_of(oar, in_order)


def _error_of(lib, make):
    try:
        make(lib)
    except Exception as e:   # noqa: BLE001  (the type and message are compared)
        return type(e).__name__, str(e)
    return None


def _overstep(sched, n):
    for _ in range(n):
        sched.step()


def test_errors_as_torch():
    torch = torch_or_skip()
    L = _sched
    makes = [
        lambda lib: L(lib).ConstantLR(_opt(lib, "sgd"), factor=2),
        lambda lib: L(lib).LinearLR(_opt(lib, "sgd"), start_factor=1.5),
        lambda lib: L(lib).LinearLR(_opt(lib, "sgd"), end_factor=-1),
        lambda lib: L(lib).StepLR(_opt(lib, "sgd"), 2, last_epoch=4),
        lambda lib: L(lib).LambdaLR(_opt(lib, "sgd"), [lambda e: 1]),
        lambda lib: L(lib).StepLR(object(), 2),
        lambda lib: L(lib).CyclicLR(_opt(lib, "adam"), 0.01, 0.1),
        lambda lib: L(lib).CyclicLR(_opt(lib, "sgd"), 0.01, [0.1, 0.2, 0.3]),
        lambda lib: L(lib).CyclicLR(_opt(lib, "sgd"), 0.01, 0.1, mode="zigzag"),
        lambda lib: L(lib).OneCycleLR(_opt(lib, "sgd"), 0.1),
        lambda lib: L(lib).OneCycleLR(_opt(lib, "sgd"), 0.1, total_steps=0),
        lambda lib: L(lib).OneCycleLR(_opt(lib, "sgd"), 0.1, epochs=2, steps_per_epoch=-1),
        lambda lib: L(lib).OneCycleLR(_opt(lib, "sgd"), 0.1, total_steps=10, pct_start=1),
        lambda lib: L(lib).OneCycleLR(_opt(lib, "sgd"), 0.1, total_steps=10, anneal_strategy="exp"),
        lambda lib: _overstep(L(lib).OneCycleLR(_opt(lib, "sgd"), 0.1, total_steps=3), 4),
        lambda lib: L(lib).CosineAnnealingWarmRestarts(_opt(lib, "sgd"), T_0=0),
        lambda lib: L(lib).CosineAnnealingWarmRestarts(_opt(lib, "sgd"), T_0=2, T_mult=1.5),
        lambda lib: L(lib).ReduceLROnPlateau(_opt(lib, "sgd"), factor=1.0),
        lambda lib: L(lib).ReduceLROnPlateau(_opt(lib, "sgd"), mode="avg"),
        lambda lib: L(lib).ReduceLROnPlateau(_opt(lib, "sgd"), threshold_mode="pct"),
        lambda lib: L(lib).ReduceLROnPlateau(_opt(lib, "sgd"), min_lr=[0.1]),
        lambda lib: L(lib).SequentialLR(o := _opt(lib, "sgd"), [L(lib).StepLR(o, 2), L(lib).StepLR(o, 3)], []),
        lambda lib: L(lib).SequentialLR(_opt(lib, "sgd"), [L(lib).StepLR(_opt(lib, "sgd"), 2)], []),
        lambda lib: L(lib).ChainedScheduler([L(lib).StepLR(_opt(lib, "sgd"), 2), L(lib).StepLR(_opt(lib, "sgd"), 2)]),
    ]
    for i, make in enumerate(makes):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours, theirs = _error_of(oar, make), _error_of(torch, make)
        assert theirs is not None and ours == theirs, f"case {i}: oar {ours} torch {theirs}"


def test_schedule_reaches_the_c_optimizer():
    """The lr a scheduler writes is the one the next C step uses: SGD without momentum moves a
    parameter with gradient 1 by exactly the scheduled lr."""
    p = oar.nn.Parameter(oar.zeros(1, dtype=oar.float64))
    opt = oar.optim.SGD([p], lr=1.0)
    sched = oar.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10, cycle_momentum=False)
    expect = 0.0
    for _ in range(9):
        lr = opt.param_groups[0]["lr"]
        (p * 1.0).sum().backward()
        opt.step()
        opt.zero_grad()
        sched.step()
        expect -= lr
        assert math.isclose(p.item(), expect, rel_tol=1e-12)


@pytest.mark.parametrize("kind,make", [
    ("adam", lambda lib, o: _sched(lib).OneCycleLR(o, max_lr=0.3, total_steps=15)),
    ("sgd", lambda lib, o: _sched(lib).CyclicLR(o, 0.01, 0.2, step_size_up=3, mode="triangular2")),
    ("sgd", lambda lib, o: _sched(lib).OneCycleLR(o, max_lr=0.2, total_steps=15, three_phase=True)),
    ("adam", lambda lib, o: _sched(lib).SequentialLR(
        o, [_sched(lib).LinearLR(o, 0.2, total_iters=4), _sched(lib).CosineAnnealingWarmRestarts(o, 4)], [4]))])
def test_training_trajectory_matches_torch(kind, make):
    """The momentum and betas the cyclic schedules write reach the C optimizer: 14 steps on a
    quadratic give torch's parameters."""
    torch = torch_or_skip()
    target = np.linspace(-1.0, 2.0, 5)
    finals = []
    for lib in (oar, torch):
        w = lib.nn.Parameter(lib.zeros(5, dtype=lib.float64))
        v = lib.nn.Parameter(lib.ones(3, dtype=lib.float64))
        groups = [{"params": [w]}, {"params": [v], "lr": 0.05}]
        opt = lib.optim.SGD(groups, lr=0.1, momentum=0.9) if kind == "sgd" else \
            lib.optim.Adam(groups, lr=0.1, betas=(0.9, 0.99))
        sched = make(lib, opt)
        tt = lib.from_numpy(target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(14):
                loss = ((w - tt) ** 2).sum() + (v ** 4).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
        finals.append(np.concatenate([w.detach().numpy(), v.detach().numpy()]))
    assert np.allclose(finals[0], finals[1], rtol=1e-9, atol=1e-12), finals


def test_verbose_prints_as_torch(capsys):
    torch = torch_or_skip()
    outs = []
    for lib in (oar, torch):
        opt = _opt(lib, "sgd")
        s = lib.optim.lr_scheduler.StepLR(opt, 2, verbose=True)
        p = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, verbose=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(4):
                opt.step()
                s.step()
                p.step(1.0)
            s.step(7.5)
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "reducing learning rate of group 1" in outs[0] and "Epoch 7.50" in outs[0]
