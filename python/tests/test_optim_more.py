"""oar.optim's Adadelta, Adamax, NAdam, RAdam, ASGD and Rprop against torch 1.13 (each a C
optimizer kind): ten steps on a small model from the same weights and batches, parameters within
1e-6; state_dict keys (torch's slot names) and values; a round trip through state_dict; torch's
state loaded into oar; and the compiled step (oar.jit.to_static) equal to the eager one bit for
bit."""
import numpy as np
import pytest

import oar
import oar.nn as nn

F = nn.functional

CASES = [
    ("Adadelta", {}),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, momentum_decay=0.01)),
    ("RAdam", {}),
    ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),  # beta2 0.9: rectified from step 6
    ("ASGD", {}),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=3, weight_decay=0.1, maximize=True)),  # averaging from step 4
    ("Rprop", {}),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.1), maximize=True)),
]
IDS = [f"{k}-{i}" for i, (k, _) in enumerate(CASES)]
STEPS = 10


def build(lib):
    return lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 3))


def copy_params(src, dst):
    """src's parameters (torch or oar) into the oar module dst."""
    dst.load_state_dict({k: oar.from_numpy(v.detach().numpy().copy()) for k, v in src.state_dict().items()})


def data(n=STEPS):
    rng = np.random.RandomState(3)
    return [(rng.randn(6, 4).astype(np.float32), rng.randint(0, 3, 6)) for _ in range(n)]


def torch_step(torch, m, opt, x, y):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(torch.tensor(x)), torch.tensor(y)).backward()
    opt.step()


def oar_step(m, opt, x, y):
    opt.zero_grad()
    F.cross_entropy(m(oar.tensor(x)), oar.tensor(y)).backward()
    opt.step()


def assert_params_close(om, tm, what, tol=1e-6):
    for (n, pt), (_, po) in zip(tm.named_parameters(), om.named_parameters()):
        np.testing.assert_allclose(po.detach().numpy(), pt.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"{what}: {n}")


def torch_state_flat(opt):
    """torch's state_dict state as oar names it: '<param index>.<slot>'."""
    return {f"{i}.{k}": v for i, st in opt.state_dict()["state"].items() for k, v in st.items()}


def as_oar(name, v):
    if name.endswith(".step"):
        return oar.tensor(np.array(int(v), dtype=np.int64))
    return oar.from_numpy(v.detach().numpy().copy())


@pytest.mark.parametrize("kind, opts", CASES, ids=IDS)
def test_steps_and_state_match_torch(kind, opts, torch):
    torch.manual_seed(0)
    tm, om = build(torch), build(oar)
    copy_params(tm, om)
    topt, oopt = getattr(torch.optim, kind)(tm.parameters(), **opts), getattr(oar.optim, kind)(om.parameters(), **opts)
    batches = data()
    for s, (x, y) in enumerate(batches):
        torch_step(torch, tm, topt, x, y)
        oar_step(om, oopt, x, y)
        assert_params_close(om, tm, f"{kind} step {s + 1}")
    # state: torch's slot names, values within the same tolerance
    tsd, osd = topt.state_dict(), oopt.state_dict()
    want = torch_state_flat(topt)
    assert set(osd["state"]) == set(want)
    for name, v in want.items():
        got = osd["state"][name].numpy()
        if name.endswith(".step"):
            assert int(got) == int(v), name
        else:
            np.testing.assert_allclose(got, v.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)
            assert got.dtype == v.numpy().dtype, name
    # hyper-parameters: the group keys torch has (its "params" are indices)
    for tg, og in zip(tsd["param_groups"], osd["param_groups"]):
        assert set(og) == set(tg) - {"params"}
        for k in og:
            assert og[k] == tg[k], k


@pytest.mark.parametrize("kind, opts", CASES, ids=IDS)
def test_state_dict_round_trip_and_torch_state(kind, opts, torch):
    """Half the steps, then: (a) oar's state_dict into a fresh oar optimizer continues exactly as
    the original; (b) torch's state loaded into oar continues as torch does."""
    torch.manual_seed(0)
    tm, om = build(torch), build(oar)
    copy_params(tm, om)
    topt, oopt = getattr(torch.optim, kind)(tm.parameters(), **opts), getattr(oar.optim, kind)(om.parameters(), **opts)
    batches = data()
    for x, y in batches[:5]:
        torch_step(torch, tm, topt, x, y)
        oar_step(om, oopt, x, y)
    om2, om3 = build(oar), build(oar)
    copy_params(om, om2)
    copy_params(tm, om3)
    opt2, opt3 = getattr(oar.optim, kind)(om2.parameters(), **opts), getattr(oar.optim, kind)(om3.parameters(), **opts)
    opt2.load_state_dict(oopt.state_dict())
    tsd = topt.state_dict()
    opt3.load_state_dict({"state": {k: as_oar(k, v) for k, v in torch_state_flat(topt).items()},
                          "param_groups": [{k: v for k, v in g.items() if k != "params"} for g in tsd["param_groups"]]})
    for x, y in batches[5:]:
        oar_step(om, oopt, x, y)
        oar_step(om2, opt2, x, y)
        oar_step(om3, opt3, x, y)
        torch_step(torch, tm, topt, x, y)
    for p, p2 in zip(om.parameters(), om2.parameters()):
        assert bool((p == p2).all()), f"{kind}: the reloaded optimizer went another way"
    assert_params_close(om3, tm, f"{kind} from torch's state")


@pytest.mark.parametrize("kind, opts", CASES, ids=IDS)
def test_compiled_step_matches_eager_bitwise(kind, opts):
    def run(compiled):
        oar.manual_seed(0)
        m = build(oar)
        opt = getattr(oar.optim, kind)(m.parameters(), **opts)

        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss

        f = oar.jit.to_static(step) if compiled else step
        losses = [f(oar.tensor(x), oar.tensor(y)).item() for x, y in data()]
        return losses, [p.detach().clone() for p in m.parameters()], opt.state_dict()["state"], f

    eager_losses, eager_params, eager_state, _ = run(False)
    losses, params, state, f = run(True)
    assert losses == eager_losses
    assert all(bool((a == b).all()) for a, b in zip(params, eager_params))
    assert set(state) == set(eager_state)
    assert all(bool((state[k] == eager_state[k]).all()) for k in state)
    assert f.num_traces() == 1


@pytest.mark.parametrize("make, err, match", [
    (lambda p: oar.optim.Adadelta(p, rho=1.5), ValueError, "Invalid rho value: 1.5"),
    (lambda p: oar.optim.Adamax(p, betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0"),
    (lambda p: oar.optim.NAdam(p, momentum_decay=-1), ValueError, "Invalid momentum_decay value: -1"),
    (lambda p: oar.optim.RAdam(p, lr=-1), ValueError, "Invalid learning rate: -1"),
    (lambda p: oar.optim.Rprop(p, etas=(1.5, 1.2)), ValueError, "Invalid eta values: 1.5, 1.2"),
    (lambda p: oar.optim.NAdam(p, maximize=True), TypeError, "maximize"),  # as torch 1.13's: no such argument
])
def test_bad_options_refused_as_torch(make, err, match):
    with pytest.raises(err, match=match):
        make([oar.ones(2, requires_grad=True)])
