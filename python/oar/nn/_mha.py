"""torch.nn.functional.multi_head_attention_forward: the whole of multi-head attention on (L, N, E)
inputs (or unbatched (L, E)) with the weights passed in, as nn.MultiheadAttention runs it and as
model code that keeps its own projection weights calls it (CLIP's attention pooling, for one)."""
import math

from .. import _creation as C
from .. import _dtype as D
from .. import _functions as F
from . import functional as NF


def additive_mask(mask, dtype, what):
    """A bool mask (True: may not attend) or a float mask (added to the scores) as a float mask."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return F.masked_fill(C.zeros(*mask.shape, dtype=dtype), mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(f"MultiheadAttention: expected {what} to be bool or floating, got {mask.dtype}")
    return mask.to(dtype)


def open_column(mask):
    """An additive mask with one more key position at the end, which every query may attend."""
    if mask is None:
        return None
    return F.cat([mask, C.zeros(*mask.shape[:-1], 1, dtype=mask.dtype)], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True):
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k / static_v are not offered")
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    L, N, E = query.shape
    S, H = key.shape[0], num_heads
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    if E % H:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {H}")
    d = E // H
    if use_separate_proj_weight:
        w = (q_proj_weight, k_proj_weight, v_proj_weight)
        if any(x is None for x in w):
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
    else:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        w = in_proj_weight.chunk(3)
    b = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
    q, k, v = (NF.linear(x, w[i], b[i]) for i, x in enumerate((query, key, value)))  # (len, N, E)
    mask = additive_mask(attn_mask, q.dtype, "attn_mask")
    if mask is not None:
        want = (L, S) if mask.dim() == 2 else (N * H, L, S)
        if tuple(mask.shape) != want:
            raise RuntimeError(f"The shape of the {mask.dim()}D attn_mask is {tuple(mask.shape)}, but should be "
                               f"{want}.")
    pad = additive_mask(key_padding_mask, q.dtype, "key_padding_mask")
    if pad is not None and tuple(pad.shape) != (N, S):
        raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got {tuple(pad.shape)}")
    if bias_k is not None and bias_v is not None:  # the learned key and value join the sequence
        k = F.cat([k, bias_k.expand(1, N, E)], 0)
        v = F.cat([v, bias_v.expand(1, N, E)], 0)
        mask, pad = open_column(mask), open_column(pad)
    k, v = (t.reshape(t.shape[0], N, H, d).permute(1, 2, 0, 3) for t in (k, v))  # (N, H, S', d)
    q = q.reshape(L, N, H, d).permute(1, 2, 0, 3)
    if add_zero_attn:  # a zero key and value at the end of the sequence
        k, v = (F.cat([t, C.zeros(N, H, 1, d, dtype=t.dtype)], 2) for t in (k, v))
        mask, pad = open_column(mask), open_column(pad)
    S = k.shape[2]
    scores = F.matmul(q * (1.0 / math.sqrt(d)), k.transpose(-2, -1))  # (N, H, L, S)
    if mask is not None:
        scores = scores + mask.reshape(-1, H, L, S) if mask.dim() == 3 else scores + mask
    if pad is not None:
        scores = scores + pad.reshape(N, 1, 1, S)
    attn = NF.softmax(scores, -1)
    if training and dropout_p > 0.0:
        attn = NF.dropout(attn, dropout_p)
    out = F.matmul(attn, v).permute(2, 0, 1, 3).reshape(L, N, E)  # (L, N, E)
    out = NF.linear(out, out_proj_weight, out_proj_bias)
    if not batched:
        out = out.squeeze(1)
    weights = None
    if need_weights:
        weights = attn.mean(1) if average_attn_weights else attn
        if not batched:
            weights = weights.squeeze(0)
    return out, weights
