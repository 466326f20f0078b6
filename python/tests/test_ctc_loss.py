"""F.ctc_loss / nn.CTCLoss beside torch 1.13: padded and concatenated targets, repeated labels (which
need a blank between them), empty targets, unequal input lengths, every reduction, zero_infinity on
an impossible alignment; the loss and the gradient of the logits under log_softmax (torch's kernel
returns, as log_probs' gradient, the logits' one: exp(log_probs) minus the label posteriors; through
log_softmax the two agree, and log_softmax is how ctc_loss is fed)."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(19)


def _log_probs(T, N, C):
    return R.standard_normal((T, N, C)).astype(np.float32)  # logits: log_softmax is applied in each library


CASES = {
    # name: (T, C, targets (list per sample), input lengths, concatenated)
    "padded": (12, 5, [[1, 2, 3], [4, 4, 1, 2], [2]], [12, 10, 7], False),
    "concatenated": (10, 4, [[1, 1], [3, 2, 1], [2, 3]], [10, 9, 10], True),
    "repeats_tight": (7, 3, [[1, 1, 1]], [6], False),  # 3 labels + 2 blanks between the repeats: 5 frames
    "empty_target": (6, 4, [[], [2, 3]], [6, 5], False),
}


def _run(lib, name, reduction, data):
    T, C, rows, in_len, concat = CASES[name]
    z = lib.from_numpy(data.copy()).requires_grad_()
    lp = lib.nn.functional.log_softmax(z, -1)
    tl = [len(r) for r in rows]
    if concat:
        targets = lib.tensor([x for r in rows for x in r], dtype=lib.int64)
    else:
        width = max(tl + [1])
        targets = lib.tensor([r + [1] * (width - len(r)) for r in rows], dtype=lib.int64)
    loss = lib.nn.functional.ctc_loss(lp, targets, lib.tensor(in_len), lib.tensor(tl), blank=0,
                                      reduction=reduction)
    loss.sum().backward()
    return loss.detach().numpy(), z.grad.numpy()


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_ctc_loss_matches_torch(name, reduction):
    torch = torch_or_skip()
    T, C, rows, _, _ = CASES[name]
    data = _log_probs(T, len(rows), C)
    (lo, go), (lt, gt) = _run(oar, name, reduction, data), _run(torch, name, reduction, data)
    np.testing.assert_allclose(lo, lt, rtol=1e-5, atol=1e-5, err_msg=f"{name} loss")
    np.testing.assert_allclose(go, gt, rtol=1e-4, atol=1e-5, err_msg=f"{name} gradient")


def test_impossible_alignment_and_module():
    torch = torch_or_skip()
    lp = _log_probs(3, 2, 4)  # the first target, 1 1 2, needs 4 frames (a blank between the 1s): it has 3
    out = []
    for lib in (oar, torch):
        z = lib.from_numpy(lp.copy()).requires_grad_()
        t = lib.nn.functional.log_softmax(z, -1)
        tg = lib.tensor([[1, 1, 2], [3, 1, 1]])
        raw = lib.nn.functional.ctc_loss(t, tg, lib.tensor([3, 3]), lib.tensor([3, 1]), reduction="none")
        crit = lib.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
        loss = crit(t, tg, (3, 3), (3, 1))
        loss.backward()
        out.append((raw.detach().numpy(), loss.item(), z.grad.numpy(), repr(crit)))
    assert np.isinf(out[0][0][0]) and np.isinf(out[1][0][0])
    np.testing.assert_allclose(out[0][0][1], out[1][0][1], rtol=1e-5)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-5)
    np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-4, atol=1e-5)
    assert out[0][3] == out[1][3]
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        oar.nn.functional.ctc_loss(oar.from_numpy(lp), oar.tensor([[1]]), [3, 3], [1, 1], blank=4)
    with pytest.raises(RuntimeError, match=r"input_lengths\[1\] = 5 is outside \[0, 3\]"):
        oar.nn.functional.ctc_loss(oar.from_numpy(lp), oar.tensor([[1], [2]]), [3, 5], [1, 1])
