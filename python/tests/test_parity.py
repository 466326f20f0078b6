"""Parity with PyTorch 1.13, table-driven: every case runs the same expression on oar and on
torch with the same random inputs and compares the outputs and the gradients of every float
input (of sum(output * w) for a random w). Tolerance: fp32, rtol 1e-4 and atol 1e-5 unless a
case says otherwise (reductions over many terms and convolutions accumulate in another order)."""
import numpy as np
import pytest

import oar

torch = pytest.importorskip("torch", reason="torch is absent (apt-get install python3-torch): no oracle")

R = np.random.RandomState(1234)


def f(*shape):  # a float input that takes gradients
    return ("f", shape)


def pos(*shape):  # positive floats (log, sqrt, pow)
    return ("pos", shape)


def cpos(*shape):  # positive floats without gradient (running variances)
    return ("cpos", shape)


def i(high, *shape):  # integer indices in [0, high)
    return ("i", shape, high)


def b(*shape):  # a bool mask
    return ("b", shape)


def c(*shape):  # floats without gradient (constants, running stats)
    return ("c", shape)


def make(spec):
    kind, shape = spec[0], spec[1]
    if kind in ("f", "c"):
        return R.randn(*shape).astype(np.float32)
    if kind in ("pos", "cpos"):
        return (R.rand(*shape) + 0.5).astype(np.float32)
    if kind == "i":
        return R.randint(0, spec[2], size=shape).astype(np.int64)
    return R.rand(*shape) > 0.5


# (name, expression over (lib, *inputs), inputs, options)
CASES = [
    # elementwise binary with broadcasting, scalars, reversed scalars
    ("add", lambda t, x, y: x + y, [f(3, 4), f(4)]),
    ("add_alpha", lambda t, x, y: t.add(x, y, alpha=2.5), [f(2, 3), f(2, 3)]),
    ("sub", lambda t, x, y: x - y, [f(3, 1), f(1, 4)]),
    ("mul", lambda t, x, y: x * y, [f(2, 3, 4), f(3, 1)]),
    ("div", lambda t, x, y: x / y, [f(3, 4), pos(3, 4)]),
    ("pow", lambda t, x, y: x ** y, [pos(3, 4), f(3, 4)]),
    ("maximum", lambda t, x, y: t.maximum(x, y), [f(5), f(5)]),
    ("minimum", lambda t, x, y: t.minimum(x, y), [f(2, 5), f(5)]),
    ("add_scalar", lambda t, x: x + 2, [f(3, 4)]),
    ("rsub_scalar", lambda t, x: 1.5 - x, [f(3, 4)]),
    ("rdiv_scalar", lambda t, x: 2 / x, [pos(6)]),
    ("pow_scalar", lambda t, x: x ** 3, [f(6)]),
    ("rpow_scalar", lambda t, x: 2 ** x, [f(6)]),
    ("mul_scalar_int_tensor", lambda t, x: x * 1.5, [i(9, 4)]),
    ("div_ints", lambda t, x, y: x / (y + 1), [i(9, 4), i(9, 4)]),
    ("neg", lambda t, x: -x, [f(4, 3)]),
    ("compare_gt", lambda t, x, y: (x > y).float() * x, [f(3, 4), f(4)]),
    ("compare_scalars", lambda t, x: (x <= 0.2).float() + (x == x).float() + (x != 0).float(), [f(5)]),
    ("where", lambda t, x, y, m: t.where(m, x, y), [f(3, 4), f(3, 4), b(3, 4)]),
    ("clamp", lambda t, x: t.clamp(x, -0.5, 0.7), [f(20)]),
    ("clamp_min", lambda t, x: x.clamp(min=0.1), [f(20)]),
    # unary
    *[(n, (lambda n: lambda t, x: getattr(t, n)(x))(n), [f(3, 5)]) for n in
      ("abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu", "square", "erf")],
    *[(n, (lambda n: lambda t, x: getattr(t, n)(x))(n), [pos(3, 5)]) for n in ("log", "log1p", "sqrt", "rsqrt")],
    ("floor_ceil_round_sign", lambda t, x: t.floor(x * 3) + t.ceil(x) + t.round(x * 2) + t.sign(x), [c(7)]),
    ("exp_of_ints", lambda t, x: t.exp(x), [i(4, 5)]),
    # reductions
    ("sum_all", lambda t, x: x.sum(), [f(3, 4)]),
    ("sum_dim_keepdim", lambda t, x: x.sum(1, keepdim=True), [f(3, 4, 5)]),
    ("sum_dims", lambda t, x: t.sum(x, (0, 2)), [f(3, 4, 5)]),
    ("mean_neg_dim", lambda t, x: x.mean(-1), [f(3, 4)]),
    ("prod", lambda t, x: x.prod(0), [f(3, 4)]),
    ("amax", lambda t, x: x.amax(1), [f(3, 4)]),
    ("max_dim", lambda t, x: x.max(1).values + x.max(1)[1].float(), [f(3, 4)]),
    ("min_all", lambda t, x: x.min(), [f(3, 4)]),
    ("var", lambda t, x: x.var(1), [f(3, 6)]),
    ("var_biased", lambda t, x: t.var(x, 0, unbiased=False), [f(5, 2)]),
    ("std", lambda t, x: x.std(), [f(4, 6)]),
    ("logsumexp", lambda t, x: t.logsumexp(x, 1), [f(3, 4)]),
    ("norm", lambda t, x: x.norm(), [f(3, 4)]),
    ("norm_dim", lambda t, x: t.norm(x, 1, dim=0), [f(3, 4)]),
    ("argmax", lambda t, x: x.argmax(1), [c(3, 4)]),
    ("argmin_all", lambda t, x: x.argmin(), [c(3, 4)]),
    ("cumsum", lambda t, x: x.cumsum(1), [f(3, 4)]),
    ("topk", lambda t, x: t.topk(x, 2, dim=1).values, [f(3, 5)]),
    ("all_any", lambda t, x: (x > 0).all(1).float() + (x > 0).any(1).float(), [c(3, 5)]),
    # shapes and views
    ("reshape", lambda t, x: x.reshape(4, 3) * 2, [f(3, 4)]),
    ("view_infer", lambda t, x: x.view(-1, 2), [f(3, 4)]),
    ("permute", lambda t, x: x.permute(2, 0, 1), [f(2, 3, 4)]),
    ("transpose", lambda t, x: x.transpose(0, 1).contiguous(), [f(2, 3)]),
    ("T", lambda t, x: x.T @ x, [f(3, 2)]),
    ("expand", lambda t, x: x.expand(3, 4) * 1.0, [f(1, 4)]),
    ("squeeze_unsqueeze", lambda t, x: x.unsqueeze(0).squeeze(2), [f(3, 1)]),
    ("squeeze_all", lambda t, x: x.squeeze(), [f(1, 3, 1)]),
    ("flatten", lambda t, x: x.flatten(1), [f(2, 3, 4)]),
    ("chunk", lambda t, x: x.chunk(3, 1)[1] * 2, [f(2, 7)]),
    ("split_sizes", lambda t, x: x.split([1, 3], 0)[1] + 1, [f(4, 2)]),
    ("cat", lambda t, x, y: t.cat([x, y], 1), [f(2, 3), f(2, 1)]),
    ("stack", lambda t, x, y: t.stack([x, y], 0), [f(2, 3), f(2, 3)]),
    ("flip", lambda t, x: t.flip(x, [0]), [f(3, 2)]),
    ("tril_triu", lambda t, x: t.tril(x) + t.triu(x, 1) * 2, [f(4, 4)]),
    ("repeat", lambda t, x: x.repeat(2, 3), [f(2, 3)]),
    ("index_select", lambda t, x, k: t.index_select(x, 1, k), [f(3, 5), i(5, 4)]),
    ("gather", lambda t, x, k: t.gather(x, 1, k), [f(3, 5), i(5, 3, 2)]),
    ("masked_fill", lambda t, x, m: x.masked_fill(m, 0.5), [f(3, 4), b(3, 4)]),
    ("narrow_select", lambda t, x: x.narrow(1, 1, 2).select(0, 1), [f(3, 4)]),
    # indexing
    ("getitem_int_slice", lambda t, x: x[1, 1:3], [f(3, 4)]),
    ("getitem_step_neg", lambda t, x: x[::2, -1], [f(5, 4)]),
    ("getitem_none_ellipsis", lambda t, x: x[None, ..., 0], [f(2, 3, 4)]),
    ("getitem_int_tensor", lambda t, x, k: x[k], [f(5, 3), i(5, 2, 2)]),
    ("getitem_bool_mask", lambda t, x, m: x[m], [f(3, 4), b(3, 4)]),
    ("getitem_list", lambda t, x: x[:, [0, 2, 2]], [f(3, 4)]),
    ("getitem_two_tensors", lambda t, x, k, j: x[k, j], [f(4, 5), i(4, 3), i(5, 3)]),
    # linear algebra
    ("matmul_2d", lambda t, x, y: x @ y, [f(3, 4), f(4, 5)]),
    ("matmul_batched_broadcast", lambda t, x, y: t.matmul(x, y), [f(2, 3, 4), f(4, 2)]),
    ("matmul_vec", lambda t, x, y: x @ y, [f(3, 4), f(4)]),
    ("bmm", lambda t, x, y: t.bmm(x, y), [f(2, 3, 4), f(2, 4, 5)]),
    ("einsum", lambda t, x, y: t.einsum("bij,bjk->bik", x, y), [f(2, 3, 4), f(2, 4, 2)]),
    ("outer_dot", lambda t, x, y: t.outer(x, y) * t.dot(x, x), [f(3), f(3)]),
    # nn.functional
    ("F.relu_gelu_silu", lambda t, x: t.nn.functional.gelu(x) + t.nn.functional.silu(x) + t.nn.functional.relu(x),
     [f(4, 5)]),
    ("F.gelu_tanh", lambda t, x: t.nn.functional.gelu(x, approximate="tanh"), [f(4, 5)]),
    ("F.leaky_elu_softplus", lambda t, x: t.nn.functional.leaky_relu(x, 0.1) + t.nn.functional.elu(x) +
     t.nn.functional.softplus(x, beta=2), [f(4, 5)]),
    ("F.softmax", lambda t, x: t.nn.functional.softmax(x, dim=1), [f(3, 5)]),
    ("F.log_softmax", lambda t, x: t.nn.functional.log_softmax(x, -1), [f(3, 5)]),
    ("F.linear", lambda t, x, w, b: t.nn.functional.linear(x, w, b), [f(4, 3), f(5, 3), f(5)]),
    ("F.linear_nobias_3d", lambda t, x, w: t.nn.functional.linear(x, w), [f(2, 4, 3), f(5, 3)]),
    ("F.conv2d", lambda t, x, w, b: t.nn.functional.conv2d(x, w, b, stride=2, padding=1), [f(2, 3, 7, 7),
                                                                                            f(4, 3, 3, 3), f(4)],
     dict(rtol=1e-3, atol=1e-4)),
    ("F.conv2d_groups_dilation", lambda t, x, w: t.nn.functional.conv2d(x, w, None, 1, 2, 2, 2),
     [f(1, 4, 6, 6), f(4, 2, 3, 3)], dict(rtol=1e-3, atol=1e-4)),
    ("F.conv2d_same", lambda t, x, w: t.nn.functional.conv2d(x, w, padding="same"), [f(1, 2, 5, 5), f(3, 2, 3, 3)],
     dict(rtol=1e-3, atol=1e-4)),
    ("F.conv1d", lambda t, x, w, b: t.nn.functional.conv1d(x, w, b, padding=1), [f(2, 3, 8), f(4, 3, 3), f(4)],
     dict(rtol=1e-3, atol=1e-4)),
    ("F.conv_transpose2d", lambda t, x, w: t.nn.functional.conv_transpose2d(x, w, stride=2, padding=1,
                                                                            output_padding=1),
     [f(1, 3, 4, 4), f(3, 2, 3, 3)], dict(rtol=1e-3, atol=1e-4)),
    ("F.max_pool2d", lambda t, x: t.nn.functional.max_pool2d(x, 2), [f(2, 3, 6, 6)]),
    ("F.max_pool2d_pad_ceil", lambda t, x: t.nn.functional.max_pool2d(x, 3, 2, 1, ceil_mode=True), [f(1, 2, 7, 7)]),
    ("F.avg_pool2d", lambda t, x: t.nn.functional.avg_pool2d(x, 3, 2, 1), [f(2, 2, 7, 7)]),
    ("F.avg_pool2d_exclude_pad", lambda t, x: t.nn.functional.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
     [f(1, 2, 6, 6)]),
    ("F.adaptive_avg_pool2d", lambda t, x: t.nn.functional.adaptive_avg_pool2d(x, (3, 2)), [f(2, 3, 7, 5)]),
    ("F.batch_norm_train", lambda t, x, w, b, m, v: t.nn.functional.batch_norm(x, m, v, w, b, True),
     [f(4, 3, 2, 2), f(3), f(3), c(3), cpos(3)], dict(rtol=1e-3, atol=1e-4)),
    ("F.batch_norm_eval", lambda t, x, w, b, m, v: t.nn.functional.batch_norm(x, m, v, w, b, False, eps=1e-3),
     [f(4, 3), f(3), f(3), c(3), cpos(3)], dict(rtol=1e-3, atol=1e-4)),
    ("F.layer_norm", lambda t, x, w, b: t.nn.functional.layer_norm(x, (4,), w, b), [f(3, 4), f(4), f(4)],
     dict(rtol=1e-3, atol=1e-4)),
    ("F.group_norm", lambda t, x, w, b: t.nn.functional.group_norm(x, 2, w, b), [f(2, 4, 3), f(4), f(4)],
     dict(rtol=1e-3, atol=1e-4)),
    ("F.embedding", lambda t, k, w: t.nn.functional.embedding(k, w), [i(6, 2, 3), f(6, 4)]),
    ("F.one_hot", lambda t, k: t.nn.functional.one_hot(k, 5).float(), [i(5, 4)]),
    ("F.pad_constant", lambda t, x: t.nn.functional.pad(x, (1, 2, 0, 1), value=0.5), [f(2, 3, 4)]),
    ("F.pad_reflect", lambda t, x: t.nn.functional.pad(x, (2, 1), mode="reflect"), [f(1, 2, 5)]),
    ("F.cross_entropy", lambda t, x, y: t.nn.functional.cross_entropy(x, y), [f(5, 4), i(4, 5)]),
    ("F.cross_entropy_smooth_sum", lambda t, x, y: t.nn.functional.cross_entropy(x, y, reduction="sum",
                                                                                 label_smoothing=0.1),
     [f(5, 4), i(4, 5)]),
    ("F.cross_entropy_none_2d", lambda t, x, y: t.nn.functional.cross_entropy(x, y, reduction="none"),
     [f(2, 4, 3), i(4, 2, 3)]),
    ("F.cross_entropy_probs", lambda t, x, p: t.nn.functional.cross_entropy(x, t.softmax(p, 1)),
     [f(3, 4), c(3, 4)]),
    ("F.nll_loss", lambda t, x, y: t.nn.functional.nll_loss(t.log_softmax(x, 1), y), [f(5, 4), i(4, 5)]),
    ("F.mse_loss", lambda t, x, y: t.nn.functional.mse_loss(x, y), [f(3, 4), c(3, 4)]),
    ("F.l1_loss_sum", lambda t, x, y: t.nn.functional.l1_loss(x, y, reduction="sum"), [f(3, 4), c(3, 4)]),
    ("F.smooth_l1", lambda t, x, y: t.nn.functional.smooth_l1_loss(x, y, beta=0.5), [f(3, 4), c(3, 4)]),
    ("F.bce_with_logits", lambda t, x, y: t.nn.functional.binary_cross_entropy_with_logits(x, t.sigmoid(y)),
     [f(3, 4), c(3, 4)]),
    ("F.normalize", lambda t, x: t.nn.functional.normalize(x, dim=1), [f(3, 4)]),
    ("F.dropout_eval", lambda t, x: t.nn.functional.dropout(x, 0.3, training=False), [f(3, 4)]),
    ("F.softmax_ints_promote", lambda t, x: t.nn.functional.softmax(x.float(), 0), [i(5, 4)]),
]


def to_lib(lib, arrays, specs):
    out = []
    for a, s in zip(arrays, specs):
        t = lib.tensor(a)
        if s[0] in ("f", "pos"):
            t.requires_grad_(True)
        out.append(t)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_parity(case):
    name, expr, specs = case[:3]
    tol = dict(rtol=1e-4, atol=1e-5)
    tol.update(case[3] if len(case) > 3 else {})
    arrays = [make(s) for s in specs]
    xo, xt = to_lib(oar, arrays, specs), to_lib(torch, arrays, specs)
    yo, yt = expr(oar, *xo), expr(torch, *xt)
    assert tuple(yo.shape) == tuple(yt.shape), f"{name}: shape {tuple(yo.shape)} vs torch {tuple(yt.shape)}"
    assert yo.dtype.name == str(yt.dtype).replace("torch.", ""), f"{name}: dtype {yo.dtype} vs {yt.dtype}"
    np.testing.assert_allclose(yo.detach().numpy().astype(np.float64), yt.detach().numpy().astype(np.float64),
                               err_msg=f"{name}: forward", **tol)
    if not yt.requires_grad:
        return
    assert yo.requires_grad and yo.grad_fn is not None
    w = np.asarray(R.randn(*yt.shape), dtype=np.float32)
    (yo * oar.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    for k, (a, t) in enumerate(zip(xo, xt)):
        if t.grad is None:
            continue
        assert a.grad is not None, f"{name}: input {k} got no gradient"
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), err_msg=f"{name}: gradient of input {k}", **tol)
