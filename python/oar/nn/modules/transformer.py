"""nn.MultiheadAttention, nn.TransformerEncoderLayer and nn.TransformerEncoder with torch 1.13's
constructor signatures, parameter names, initialisation and forward semantics (masks, batch_first,
norm_first, need_weights), composed from oar's ops so every gradient is the ops' own."""
import copy
import math

from ... import _creation as C
from ... import _dtype as D
from ... import _functions as F
from .. import functional as NF
from .. import init
from ..parameter import Parameter
from .layers import Dropout, LayerNorm, Linear, ModuleList, _dt
from .module import Module


def _additive_mask(mask, dtype, what):
    """A bool mask (True: may not attend) or a float mask (added to the scores) as a float mask."""
    if mask is None:
        return None
    if mask.dtype is D.bool_:
        return F.masked_fill(C.zeros(*mask.shape, dtype=dtype), mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(f"MultiheadAttention: expected {what} to be bool or floating, got {mask.dtype}")
    return mask.to(dtype)


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn or (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim other than "
                                      "embed_dim are not offered")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        self.head_dim = embed_dim // num_heads
        self.in_proj_weight = Parameter(C.empty(3 * embed_dim, embed_dim, dtype=_dt(dtype)))
        self.register_parameter("q_proj_weight", None)
        self.register_parameter("k_proj_weight", None)
        self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(C.empty(3 * embed_dim, dtype=_dt(dtype)))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.bias_k = self.bias_v = None
        self.add_zero_attn = False
        self._reset_parameters()

    def _reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True):
        batched = query.dim() == 3
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:  # work in (L, N, E), torch's layout
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        L, N, E = query.shape
        S, H, d = key.shape[0], self.num_heads, self.head_dim
        if E != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        w = self.in_proj_weight.chunk(3)
        b = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)

        def heads(x, k, length):  # (length, N, E) -> (N, H, length, d)
            return NF.linear(x, w[k], b[k]).reshape(length, N, H, d).permute(1, 2, 0, 3)

        q, k, v = heads(query, 0, L), heads(key, 1, S), heads(value, 2, S)
        scores = F.matmul(q * (1.0 / math.sqrt(d)), k.transpose(-2, -1))  # (N, H, L, S)
        mask = _additive_mask(attn_mask, scores.dtype, "attn_mask")
        if mask is not None:
            if mask.dim() == 2:
                if tuple(mask.shape) != (L, S):
                    raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(mask.shape)}, but should be "
                                       f"{(L, S)}.")
            elif tuple(mask.shape) != (N * H, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(mask.shape)}, but should be "
                                   f"{(N * H, L, S)}.")
            scores = scores + mask.reshape(-1, H, L, S) if mask.dim() == 3 else scores + mask
        pad = _additive_mask(key_padding_mask, scores.dtype, "key_padding_mask")
        if pad is not None:
            if tuple(pad.shape) != (N, S):
                raise AssertionError(f"expecting key_padding_mask shape of {(N, S)}, but got {tuple(pad.shape)}")
            scores = scores + pad.reshape(N, 1, 1, S)
        attn = NF.softmax(scores, -1)
        if self.training and self.dropout > 0.0:
            attn = NF.dropout(attn, self.dropout)
        out = F.matmul(attn, v).permute(2, 0, 1, 3).reshape(L, N, E)  # (L, N, E)
        out = self.out_proj(out)
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
        weights = None
        if need_weights:
            weights = attn.mean(1) if average_attn_weights else attn
            if not batched:
                weights = weights.squeeze(0)
        return out, weights


def _activation_fn(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return NF.relu
    if activation == "gelu":
        return NF.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, src, mask=None, src_key_padding_mask=None):
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        return self.norm(out) if self.norm is not None else out
