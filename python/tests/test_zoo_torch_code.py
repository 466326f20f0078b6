"""The zoo's resnet20, gpt-mini and lstm-lm written as plain PyTorch code
(oar/examples/zoo_torch.py) run unchanged on oar, eagerly and compiled (oar.jit.to_static), from
torch's initial weights and batches, and give torch 1.13's first two losses (small batches keep it
to seconds; `python -m oar.bench --zoo` times the full-size steps)."""
import os

import pytest


@pytest.mark.parametrize("name,batch", [("resnet20", 4), ("gpt-mini", 1), ("lstm-lm", 2)])
def test_zoo_torch_code_gives_torch_losses(torch, name, batch):
    if os.environ.get("OAR_PY_SANITIZED"):
        pytest.skip("zoo models from PyTorch code: release pass only (seconds of training steps)")
    from oar.bench import zoo

    losses = zoo.check_losses(name, batch, steps=2)
    assert set(losses) == {"torch", "oar_eager", "oar_compiled"}
    for mode in ("oar_eager", "oar_compiled"):
        for got, want in zip(losses[mode], losses["torch"]):
            assert abs(got - want) <= 1e-4 * abs(want) + 1e-5, f"{name} {mode}: losses {losses[mode]}, torch " \
                                                                f"{losses['torch']}"
