"""torch.random (the generator's state) and torch.utils.checkpoint, beside torch 1.13 where the two
libraries can agree (deterministic pieces: values and every gradient) and against oar's own
uncheckpointed run where they cannot (dropout: each library draws its own masks)."""
import warnings

import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(11)


def test_rng_state_round_trip_and_errors():
    oar.manual_seed(5)
    assert oar.initial_seed() == 5
    oar.randn(7)
    state = oar.get_rng_state()
    assert state.dtype is oar.uint8 and tuple(state.shape) == (16,)
    first = oar.randn(3, 4).numpy()
    oar.rand(9)
    oar.set_rng_state(state)
    np.testing.assert_array_equal(oar.randn(3, 4).numpy(), first)
    with oar.random.fork_rng():
        oar.randn(100)
    after_fork = oar.randn(2).numpy()
    oar.set_rng_state(state)
    oar.randn(3, 4)
    np.testing.assert_array_equal(oar.randn(2).numpy(), after_fork)  # the fork's draws left no trace
    s = oar.seed()
    assert isinstance(s, int) and oar.initial_seed() == s
    with pytest.raises(TypeError, match="expected a torch.ByteTensor"):
        oar.set_rng_state(oar.zeros(16))
    with pytest.raises(RuntimeError, match="state of 16 bytes .* got 5056 bytes"):
        oar.set_rng_state(oar.zeros(5056, dtype=oar.uint8))


def _block(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(6, 8), lib.nn.Tanh(), lib.nn.Linear(8, 8), lib.nn.GELU(),
                             lib.nn.Linear(8, 6))


def _copy_weights(src, dst):
    for (_, a), (_, b) in zip(src.named_parameters(), dst.named_parameters()):
        with oar.no_grad():
            b.copy_(oar.from_numpy(a.detach().numpy().copy()))


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_matches_torch(use_reentrant):
    torch = torch_or_skip()
    import torch.utils.checkpoint as tcp

    x = R.standard_normal((4, 6)).astype(np.float32)
    tm, om = _block(torch), _block(oar)
    _copy_weights(tm, om)
    results = []
    for lib, m, cp in ((torch, tm, tcp), (oar, om, oar.utils.checkpoint)):
        xi = lib.from_numpy(x.copy()).requires_grad_()
        y = cp.checkpoint(lambda v, scale: m(v) * scale, xi, 1.5, use_reentrant=use_reentrant)
        (y * y).sum().backward()
        results.append([y.detach().numpy(), xi.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
    for k, (ours, theirs) in enumerate(zip(results[1], results[0])):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=f"output/gradient {k}")


def test_checkpoint_recomputes_and_replays_dropout():
    calls = []
    m = oar.nn.Sequential(oar.nn.Linear(5, 16), oar.nn.Dropout(0.5), oar.nn.Linear(16, 3))
    x = oar.from_numpy(R.standard_normal((8, 5)).astype(np.float32))

    def piece(v):
        calls.append(1)
        return m(v)

    grads = []
    for checkpointed in (True, False):
        for p in m.parameters():
            p.grad = None
        xi = x.clone().requires_grad_()
        oar.manual_seed(3)
        y = oar.utils.checkpoint.checkpoint(piece, xi) if checkpointed else piece(xi)
        oar.randn(50)  # draws between forward and backward must not change the replayed masks
        y.pow(2).sum().backward()
        grads.append([xi.grad.numpy()] + [p.grad.numpy() for p in m.parameters()])
    assert len(calls) == 3  # the checkpointed piece ran twice (forward, recomputation), the plain once
    for ours, plain in zip(*grads):
        np.testing.assert_allclose(ours, plain, rtol=1e-6, atol=1e-7)
    # without preserve_rng_state the recomputation draws other masks: the gradients differ
    xi = x.clone().requires_grad_()
    oar.manual_seed(3)
    y = oar.utils.checkpoint.checkpoint(piece, xi, preserve_rng_state=False)
    oar.randn(50)
    y.pow(2).sum().backward()
    assert not np.allclose(xi.grad.numpy(), grads[1][0])


def test_checkpoint_sequential_matches_plain_and_torch():
    torch = torch_or_skip()
    x = R.standard_normal((3, 6)).astype(np.float32)
    tm, om = _block(torch), _block(oar)
    _copy_weights(tm, om)
    out = []
    for lib, m, cp in ((torch, tm, torch.utils.checkpoint), (oar, om, oar.utils.checkpoint)):
        xi = lib.from_numpy(x.copy()).requires_grad_()
        y = cp.checkpoint_sequential(m, 2, xi)
        y.sum().backward()
        out.append([y.detach().numpy(), xi.grad.numpy(), m[0].weight.grad.numpy()])
    for ours, theirs in zip(out[1], out[0]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


def test_checkpoint_errors_and_warnings():
    lin = oar.nn.Linear(3, 3)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: foo"):
        oar.utils.checkpoint.checkpoint(lin, oar.ones(2, 3), foo=1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = oar.utils.checkpoint.checkpoint(lin, oar.ones(2, 3))
    assert any("None of the inputs have requires_grad=True" in str(x.message) for x in w)
    assert not y.requires_grad  # reentrant: parameters get no gradient then, as torch warns
    y = oar.utils.checkpoint.checkpoint(lin, oar.ones(2, 3), use_reentrant=False)
    y.sum().backward()  # non-reentrant: the parameters inside still get theirs
    np.testing.assert_allclose(lin.bias.grad.numpy(), np.full(3, 2.0, np.float32))
    with oar.mock_torch():
        import torch
        import torch.utils.checkpoint as cp

        assert torch is oar and cp.checkpoint is oar.utils.checkpoint.checkpoint
        assert torch.random.get_rng_state is oar.get_rng_state
