"""torch.nn.functional.ctc_loss over oar's ctc_loss op (src/ops/ctc.c): the op gives each sample's
loss, with its own backward kernel (the beta recursion); the reduction is done here with ops, as in
torch ('mean' divides each loss by its target length, at least 1, then averages). Nothing reads
tensor data, so oar.jit.to_static traces it with the lengths as tensors. The op checks the
lengths' and labels' values (input_lengths within the frames, labels in range and not the blank)."""
from .. import _C
from .. import _creation as C
from .. import _dtype as D
from .. import _functions as F
from .._ops import call, default as _d

_INDEX = (D.int32, D.int64)


def _lengths(v, n, what):
    """A length argument as an i32/i64 tensor of n entries (ints, sequences or tensors, as torch takes)."""
    if isinstance(v, _C.TensorBase):
        t = v.reshape(1) if v.ndim == 0 else v
        if t.ndim != 1 or t.shape[0] != n:
            raise RuntimeError(f"ctc_loss: expected {what} to have length {n} (the batch), got shape {list(v.shape)}")
        return t if t.dtype in _INDEX else t.to(D.int64)
    values = [int(x) for x in v] if hasattr(v, "__len__") else [int(v)]
    if len(values) != n:
        raise RuntimeError(f"ctc_loss: expected {what} to have length {n} (the batch), got {len(values)}")
    return C.tensor(values, dtype=D.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=_d("ctc_loss", "blank"), reduction="mean",
             zero_infinity=_d("ctc_loss", "zero_infinity")):
    """log_probs [T, N, C] (or [T, C] unbatched), targets [N, S] padded or the concatenated 1-d targets"""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if targets.ndim == 1 else targets
    if log_probs.ndim != 3:
        raise RuntimeError(f"ctc_loss: expected log_probs of shape [T, N, C] or [T, C], got {list(log_probs.shape)}")
    T, N, n_classes = log_probs.shape
    if not 0 <= blank < n_classes:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {n_classes}), got {blank}")
    in_len = _lengths(input_lengths, N, "input_lengths")
    tg_len = _lengths(target_lengths, N, "target_lengths")
    if targets.dtype not in _INDEX and not targets.is_floating_point():
        targets = targets.to(D.int64)  # u8 / i16 / bool labels; float labels are refused by the op
    lp = log_probs if log_probs.dtype in (D.float32, D.float64) else log_probs.to(D.float32)
    try:
        loss = call("ctc_loss", (lp, targets, in_len, tg_len), {"blank": int(blank),
                                                                "zero_infinity": bool(zero_infinity)})
    except (ValueError, TypeError) as e:  # bad lengths, labels or dtypes: RuntimeError in torch
        raise RuntimeError(str(e)) from None
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    return F.div(loss, F.clamp_min(tg_len.to(loss.dtype), 1)).mean()
