"""F.multi_head_attention_forward (the function nn.MultiheadAttention runs) beside torch 1.13, called
with the weights passed in as model code does: one packed in-projection, separate q/k/v projections
(CLIP's attention pooling), masks, bias_k/bias_v, add_zero_attn, unbatched input; outputs, attention
weights and every gradient."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(12)
L, S, N, E, H = 3, 5, 2, 8, 2


def _arrays(separate):
    a = {"q": R.standard_normal((L, N, E)), "k": R.standard_normal((S, N, E)), "v": R.standard_normal((S, N, E)),
         "in_b": R.standard_normal(3 * E) * 0.1, "out_w": R.standard_normal((E, E)) * 0.3,
         "out_b": R.standard_normal(E) * 0.1, "bias_k": R.standard_normal((1, 1, E)) * 0.3,
         "bias_v": R.standard_normal((1, 1, E)) * 0.3}
    if separate:
        a.update({f"{n}_w": R.standard_normal((E, E)) * 0.3 for n in "qkv"})
    else:
        a["in_w"] = R.standard_normal((3 * E, E)) * 0.3
    return {k: v.astype(np.float32) for k, v in a.items()}


@pytest.mark.parametrize("variant", ["packed", "separate_clip", "masks_bias_kv", "zero_attn_unbatched"])
def test_multi_head_attention_forward_matches_torch(variant):
    torch = torch_or_skip()
    arrays = _arrays(variant == "separate_clip")
    attn_mask = np.triu(np.ones((L, S), bool), 2)
    pad = np.zeros((N, S), bool)
    pad[1, -1] = True
    res = []
    for lib in (oar, torch):
        t = {k: lib.from_numpy(v.copy()).requires_grad_() for k, v in arrays.items()}
        kw = dict(training=False, need_weights=True)
        q, k, v = t["q"], t["k"], t["v"]
        if variant == "zero_attn_unbatched":
            q, k, v = q[:, 0], k[:, 0], v[:, 0]
        if variant == "separate_clip":
            kw.update(use_separate_proj_weight=True, q_proj_weight=t["q_w"], k_proj_weight=t["k_w"],
                      v_proj_weight=t["v_w"])
        if variant == "masks_bias_kv":
            kw.update(attn_mask=lib.from_numpy(attn_mask), key_padding_mask=lib.from_numpy(pad))
        out, w = lib.nn.functional.multi_head_attention_forward(
            q, k, v, E, H, t.get("in_w"), t["in_b"],
            t["bias_k"] if variant == "masks_bias_kv" else None, t["bias_v"] if variant == "masks_bias_kv" else None,
            variant == "zero_attn_unbatched", 0.0, t["out_w"], t["out_b"], **kw)
        ((out * out).sum() + (w * w).sum()).backward()
        grads = {n: x.grad.numpy() for n, x in t.items() if x.grad is not None}
        res.append((out.detach().numpy(), w.detach().numpy(), grads))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-5)
    assert sorted(res[0][2]) == sorted(res[1][2])
    for n in res[1][2]:
        np.testing.assert_allclose(res[0][2][n], res[1][2][n], rtol=1e-4, atol=1e-5, err_msg=n)


def test_multi_head_attention_forward_errors():
    x = oar.ones(2, 1, 8)
    with pytest.raises(AssertionError, match="was expecting embedding dimension of 6, but got 8"):
        oar.nn.functional.multi_head_attention_forward(x, x, x, 6, 2, oar.ones(24, 8), None, None, None, False,
                                                       0.0, oar.ones(8, 8), None)
    with pytest.raises(AssertionError, match="q_proj_weight, k_proj_weight or v_proj_weight is None"):
        oar.nn.functional.multi_head_attention_forward(x, x, x, 8, 2, None, None, None, None, False, 0.0,
                                                       oar.ones(8, 8), None, use_separate_proj_weight=True)
