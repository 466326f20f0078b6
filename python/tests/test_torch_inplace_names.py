"""torch's in-place forms (Tensor.<fn>_ and torch.<fn>_) and the top-level names of nn.functional
functions (torch.conv1d, torch.pixel_shuffle, ...), beside torch 1.13: the same values, the tensor
itself returned and changed, torch's error for a leaf that requires grad, and gradients through an
in-place op on a non-leaf."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(27)
X = (R.standard_normal((3, 4)) * 0.9).astype(np.float32)
POS = (R.random((3, 4)) * 0.8 + 0.1).astype(np.float32)  # in (0, 1): every domain below
OTHER = (R.random((3, 4)) + 0.5).astype(np.float32)
BINARY = {"atan2", "arctan2", "fmod", "remainder", "floor_divide", "hypot", "logical_and", "logical_or",
          "logical_xor", "xlogy", "true_divide", "multiply", "subtract", "divide", "igamma", "igammac"}
from oar._inplace_names import FROM_FUNCTIONAL, INPLACE, INPLACE_METHODS  # noqa: E402


@pytest.mark.parametrize("name", INPLACE + INPLACE_METHODS)
def test_inplace_method_and_function_match_torch(name):
    torch = torch_or_skip()
    data = POS if name in ("acosh", "arccosh") else X
    if name in ("acosh", "arccosh"):
        data = data + 1.0
    if name in ("logit", "log", "log10", "log2", "rsqrt", "sqrt", "xlogy", "igamma", "igammac"):
        data = POS
    args_o = (oar.from_numpy(OTHER.copy()),) if name in BINARY else ()
    args_t = (torch.from_numpy(OTHER.copy()),) if name in BINARY else ()
    if name in ("clamp_min", "clamp_max"):
        args_o = args_t = (0.2,)
    if name == "clip":
        args_o = args_t = (-0.3, 0.4)
    for how in ("method", "function") if name in INPLACE else ("method",):
        o, t = oar.from_numpy(data.copy()), torch.from_numpy(data.copy())
        if how == "method":
            ro, rt = getattr(o, name + "_")(*args_o), getattr(t, name + "_")(*args_t)
        else:
            ro, rt = getattr(oar, name + "_")(o, *args_o), getattr(torch, name + "_")(t, *args_t)
        assert ro is o, f"{name}_ ({how}) did not return the tensor itself"
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=2e-6, atol=2e-6, err_msg=f"{name}_ ({how})")


def test_inplace_on_a_leaf_requiring_grad_is_refused_and_non_leaves_differentiate():
    torch = torch_or_skip()
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        oar.ones(3, requires_grad=True).sin_()
    grads = []
    for lib in (oar, torch):
        x = lib.from_numpy(X.copy()).requires_grad_()
        y = x * 2
        y.sin_()
        y.expm1_()
        y.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


ALIAS_ARGS = {
    "conv1d": lambda L: (L.from_numpy(R.standard_normal((2, 3, 9)).astype(np.float32)),
                         L.from_numpy(np.ones((4, 3, 3), np.float32) * 0.1)),
    "max_pool1d": lambda L: (L.from_numpy(X[None].copy()), 2),
    "max_pool2d": lambda L: (L.from_numpy(X[None, None].copy()), 2),
    "avg_pool1d": lambda L: (L.from_numpy(X[None].copy()), 2),
    "prelu": lambda L: (L.from_numpy(X.copy()), L.from_numpy(np.full(4, 0.25, np.float32))),
    "cosine_similarity": lambda L: (L.from_numpy(X.copy()), L.from_numpy(OTHER.copy())),
    "pixel_shuffle": lambda L: (L.from_numpy(R.standard_normal((1, 8, 2, 3)).astype(np.float32)), 2),
    "selu": lambda L: (L.from_numpy(X.copy()),),
    "celu": lambda L: (L.from_numpy(X.copy()), 0.5),
    "threshold": lambda L: (L.from_numpy(X.copy()), 0.1, -1.0),
    "hardshrink": lambda L: (L.from_numpy(X.copy()), 0.3),
    "group_norm": lambda L: (L.from_numpy(R.standard_normal((2, 4, 3)).astype(np.float32)), 2),
}


@pytest.mark.parametrize("name", sorted(ALIAS_ARGS))
def test_top_level_functional_names_match_torch(name):
    torch = torch_or_skip()
    if name not in FROM_FUNCTIONAL:
        pytest.fail(f"{name} is not among the aliased names")
    if not hasattr(oar.nn.functional, name):
        pytest.skip(f"oar.nn.functional has no {name} yet")
    state = R.bit_generator.state
    ours = getattr(oar, name)(*ALIAS_ARGS[name](oar))
    R.bit_generator.state = state
    theirs = getattr(torch, name)(*ALIAS_ARGS[name](torch))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
