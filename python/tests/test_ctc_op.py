"""F.ctc_loss on oar's ctc_loss op (src/ops/ctc.c, its backward kernel and the threaded CPU kernels of
src/kernels/cpu/cpu_ctc.c) beside torch 1.13: random configurations (repeats, empty targets, inputs
shorter than T, targets no alignment fits, blanks other than 0, f32 and f64, i32 and i64 lengths,
padded and concatenated targets) for the losses and the logits' gradients; the log_probs' own
gradient, which is torch's minus exp(log_probs) on the frames in use; results at 1 and 2 threads;
lengths as tensors under oar.jit.to_static; the ONNX export's refusal; bad inputs."""
import warnings

import numpy as np
import pytest

import oar
from conftest import torch_or_skip


def _config(seed):
    """A random batch: (logits [T, N, C], rows of labels, input lengths, blank, options)"""
    R = np.random.default_rng(seed)
    T, N, C = int(R.integers(1, 30)), int(R.integers(1, 6)), int(R.integers(2, 7))
    blank = int(R.integers(0, C)) if seed % 3 else 0
    labels = [c for c in range(C) if c != blank]
    rows = [[int(x) for x in R.choice(labels, size=int(R.integers(0, max(1, T // 2) + 2)))] for _ in range(N)]
    in_len = [int(R.integers(1, T + 1)) for _ in range(N)]
    # (no zero-frame samples here: torch 1.13 reads uninitialized memory for an empty target with no
    # frames - 0 in the release run, 0.37 under the sanitizer build; oar's 0 is checked in test_no_frames)
    opts = {"concat": seed % 2 == 1, "zero_infinity": seed % 5 < 2, "f64": seed % 3 == 2,
            "i32": seed % 4 == 1, "reduction": ("none", "mean", "sum")[seed % 3]}
    return R.standard_normal((T, N, C)), rows, in_len, blank, opts


def _run(lib, logits, rows, in_len, blank, opts):
    dt = lib.float64 if opts["f64"] else lib.float32
    ldt = lib.int32 if opts["i32"] else lib.int64
    z = lib.tensor(logits, dtype=dt, requires_grad=True)
    tl = [len(r) for r in rows]
    if opts["concat"]:
        targets = lib.tensor([x for r in rows for x in r], dtype=ldt)
    else:
        width = max(tl + [1])
        targets = lib.tensor([r + [1 if blank == 0 else 0] * (width - len(r)) for r in rows], dtype=ldt)
    loss = lib.nn.functional.ctc_loss(lib.nn.functional.log_softmax(z, -1), targets, lib.tensor(in_len, dtype=ldt),
                                      lib.tensor(tl, dtype=ldt), blank=blank, reduction=opts["reduction"],
                                      zero_infinity=opts["zero_infinity"])
    loss.sum().backward()
    return loss.detach().numpy(), z.grad.numpy()


@pytest.mark.parametrize("seed", range(24))
def test_random_configurations_match_torch(seed):
    torch = torch_or_skip()
    case = _config(seed)
    (lo, go), (lt, gt) = _run(oar, *case), _run(torch, *case)
    tol = 1e-10 if case[4]["f64"] else 2e-5
    np.testing.assert_allclose(lo, lt, rtol=tol, atol=tol, err_msg=f"seed {seed} loss {case[1:]}")
    np.testing.assert_allclose(go, gt, rtol=max(tol, 1e-4) if not case[4]["f64"] else 1e-9, atol=tol * 10,
                               err_msg=f"seed {seed} gradient {case[1:]}")


def test_log_probs_gradient_is_torch_minus_softmax():
    """The op differentiates the loss itself; torch's kernel returns the logits' gradient under log_softmax
    (its own + exp(log_probs)) as log_probs' gradient, on the frames each sample uses."""
    torch = torch_or_skip()
    R = np.random.default_rng(3)
    T, N, C = 9, 3, 5
    z = R.standard_normal((T, N, C))
    lp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    rows, in_len = [[1, 2, 2], [3], []], [9, 6, 4]
    grads = []
    for lib in (oar, torch):
        x = lib.tensor(lp, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(x, lib.tensor([r + [1] * (3 - len(r)) for r in rows]), lib.tensor(in_len),
                                          lib.tensor([len(r) for r in rows]), reduction="sum")
        loss.backward()
        grads.append(x.grad.numpy())
    used = (np.arange(T)[:, None] < np.array(in_len)[None, :])[:, :, None]
    np.testing.assert_allclose(grads[0], grads[1] - np.exp(lp) * used, rtol=1e-9, atol=1e-12)
    # and it is the derivative: a central difference along a random direction
    d = R.standard_normal(lp.shape)

    def f(v):
        return oar.nn.functional.ctc_loss(oar.tensor(v), oar.tensor([r + [1] * (3 - len(r)) for r in rows]),
                                          in_len, [len(r) for r in rows], reduction="sum").item()
    h = 1e-6
    np.testing.assert_allclose((f(lp + h * d) - f(lp - h * d)) / (2 * h), (grads[0] * d).sum(), rtol=1e-6)


def test_no_frames():
    """input_length 0: the empty target costs 0, any other has no alignment: inf, or 0 with zero_infinity
    (torch 1.13's CPU kernel gives -log(2) there, not a probability of any alignment); no gradient."""
    z = oar.tensor(np.random.default_rng(6).standard_normal((4, 3, 3)), requires_grad=True)
    lp = oar.nn.functional.log_softmax(z, -1)
    tg = oar.tensor([[1, 2], [1, 1], [2, 1]])
    for zero_infinity, want in ((False, [0.0, np.inf, 0.0]), (True, [0.0, 0.0, 0.0])):
        loss = oar.nn.functional.ctc_loss(lp, tg, [0, 0, 0], [0, 1, 0], reduction="none", zero_infinity=zero_infinity)
        np.testing.assert_array_equal(loss.detach().numpy(), want)
        (g,) = oar.autograd.grad(loss.sum(), z, retain_graph=True)
        np.testing.assert_array_equal(g.numpy(), 0)


def test_thread_count_does_not_change_results():
    case = _config(7)
    case[4]["f64"] = False
    was = oar.get_num_threads()
    try:
        oar.set_num_threads(1)
        one = _run(oar, *case)
        oar.set_num_threads(2)
        two = _run(oar, *case)
    finally:
        oar.set_num_threads(was)
    for a, b in zip(one, two):
        assert np.array_equal(a, b, equal_nan=True)


def _batch():
    lp = oar.nn.functional.log_softmax(oar.tensor(np.random.default_rng(1).standard_normal((5, 2, 4)),
                                                  dtype=oar.float32), -1)
    return lp, oar.tensor([[1, 2], [3, 3]], dtype=oar.int32), oar.tensor([5, 4], dtype=oar.int32), \
        oar.tensor([2, 2], dtype=oar.int32)


def test_to_static_traces_the_op_with_tensor_lengths():
    lp, tg, il, tl = _batch()

    def fn(lp, tg, il, tl):
        return oar.nn.functional.ctc_loss(lp, tg, il, tl, reduction="mean")

    compiled = oar.jit.to_static(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a read of the lengths would warn and fall back
        got = compiled(lp, tg, il, tl)
    assert not compiled.fell_back and "ctc_loss" in compiled.program()
    np.testing.assert_allclose(got.numpy(), fn(lp, tg, il, tl).numpy(), rtol=1e-6)
    il2 = oar.tensor([3, 5], dtype=oar.int32)  # new lengths, same program
    np.testing.assert_allclose(compiled(lp, tg, il2, tl).numpy(), fn(lp, tg, il2, tl).numpy(), rtol=1e-6)
    assert compiled.num_traces() == 1


def test_onnx_export_refuses_it_by_name(tmp_path):
    lp, tg, il, tl = _batch()

    def fn(lp, tg, il, tl):
        return oar.nn.functional.ctc_loss(lp, tg, il, tl, reduction="none")

    with pytest.raises(RuntimeError, match=r"\(ctc_loss\): ONNX \(opset 17\) has no CTC loss operator"):
        oar.onnx.export(fn, (lp, tg, il, tl), str(tmp_path / "ctc.onnx"))


def test_unbatched_matches_torch():
    torch = torch_or_skip()
    z = np.random.default_rng(2).standard_normal((6, 4)).astype(np.float32)
    out = []
    for lib in (oar, torch):
        x = lib.tensor(z, requires_grad=True)
        loss = lib.nn.functional.ctc_loss(lib.nn.functional.log_softmax(x, -1), lib.tensor([1, 3, 3]),
                                          lib.tensor(6), lib.tensor(3), reduction="mean")
        loss.backward()
        out.append((loss.item(), x.grad.numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-4, atol=1e-6)


def test_bad_inputs():
    lp, tg, il, tl = _batch()
    F = oar.nn.functional
    with pytest.raises(RuntimeError, match=r"expected input_lengths to have length 2 \(the batch\), got shape \[3\]"):
        F.ctc_loss(lp, tg, oar.tensor([5, 5, 5]), tl)
    with pytest.raises(RuntimeError, match=r"expected target_lengths to have length 2 \(the batch\), got 1"):
        F.ctc_loss(lp, tg, il, [2])
    with pytest.raises(RuntimeError, match=r"targets\[1\]\[0\] is the blank \(0\); expected labels in \[0, 4\)"):
        F.ctc_loss(lp, oar.tensor([[1, 2], [0, 3]]), il, tl)
    with pytest.raises(RuntimeError, match=r"targets\[0\]\[1\] = 4 is outside \[0, 4\)"):
        F.ctc_loss(lp, oar.tensor([[1, 4], [2, 3]]), il, tl)
    with pytest.raises(RuntimeError, match=r"targets\[2\] \(sample 1\) = 7 is outside \[0, 4\)"):
        F.ctc_loss(lp, oar.tensor([1, 2, 7, 3]), il, tl)
    with pytest.raises(RuntimeError, match=r"input_lengths\[1\] = 6 is outside \[0, 5\]"):
        F.ctc_loss(lp, tg, oar.tensor([5, 6]), tl)
    with pytest.raises(RuntimeError, match=r"expected targets of dtype i32 or i64, got f32"):
        F.ctc_loss(lp, oar.tensor([[1.0, 2.0], [3.0, 3.0]]), il, tl)


def test_no_second_derivative():
    z = oar.tensor(np.random.default_rng(4).standard_normal((5, 2, 4)), requires_grad=True)
    loss = oar.nn.functional.ctc_loss(z, oar.tensor([[1, 2], [3, 3]]), [5, 4], [2, 2])
    (g,) = oar.autograd.grad(loss, z, create_graph=True)
    with pytest.raises(RuntimeError, match="second-order gradients of ctc_loss are not offered"):
        oar.autograd.grad(g.sum(), z)
