"""F.conv_transpose3d / nn.ConvTranspose3d (the conv_transpose3d op) beside torch 1.13:
outputs and the gradients of input, weight and bias over strides, padding, output_padding,
dilation and groups; the lazy form; an unbatched input."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(6)

CASES = [  # (input shape, weight shape, kwargs)
    ((2, 3, 4, 5, 3), (3, 2, 3, 3, 2), {}),
    ((1, 4, 3, 4, 4), (4, 3, 2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 4, 3, 3, 5), (4, 1, 3, 2, 3), {"stride": (2, 1, 3), "padding": (1, 0, 2), "dilation": (2, 1, 1),
                                        "groups": 2}),
    ((1, 2, 5, 2, 2), (2, 2, 2, 1, 1), {"stride": 3, "output_padding": (2, 0, 1)}),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_conv_transpose3d_matches_torch(case):
    torch = torch_or_skip()
    xs, ws, kw = CASES[case]
    x, w = R.standard_normal(xs).astype(np.float32), R.standard_normal(ws).astype(np.float32)
    b = R.standard_normal(ws[1] * kw.get("groups", 1)).astype(np.float32)
    res = []
    for lib in (oar, torch):
        ts = [lib.from_numpy(a.copy()).requires_grad_() for a in (x, w, b)]
        y = lib.nn.functional.conv_transpose3d(*ts, **kw)
        (y * y).sum().backward()
        res.append([y.detach().numpy()] + [t.grad.numpy() for t in ts])
    for k, (o, t) in enumerate(zip(*res)):
        np.testing.assert_allclose(o, t, rtol=1e-4, atol=1e-4, err_msg=f"case {case}, output {k}")


def test_conv_transpose3d_module_lazy_and_unbatched():
    torch = torch_or_skip()
    x = R.standard_normal((3, 2, 3, 4)).astype(np.float32)
    out = []
    for lib in (oar, torch):
        m = lib.nn.ConvTranspose3d(3, 4, 2, stride=2, bias=False)
        with lib.no_grad():
            m.weight.copy_(lib.from_numpy(np.linspace(-1, 1, 3 * 4 * 8, dtype=np.float32).reshape(3, 4, 2, 2, 2)))
        out.append((m(lib.from_numpy(x.copy())).detach().numpy(), repr(m)))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5, atol=1e-5)
    assert out[0][1] == out[1][1]
    with pytest.raises(RuntimeError, match="expected a 5-D input and weight"):
        oar.nn.functional.conv_transpose3d(oar.ones(1, 2, 3), oar.ones(2, 2, 1, 1, 1))
