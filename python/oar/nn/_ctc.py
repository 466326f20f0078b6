"""torch.nn.functional.ctc_loss as a composition: the forward (alpha) recursion of Graves et al.
over the targets with blanks between and around their labels, in log space, one step per input
frame for the whole batch at once; autograd differentiates it (torch writes its backward by hand).
Unreachable states hold a large negative number rather than -inf, so a log-sum of them stays finite
and their gradients are zero rather than NaN; a sample whose target cannot be aligned at all gives
inf (or 0 with zero_infinity), as torch."""
from .. import _creation as C
from .. import _dtype as D
from .. import _functions as F

_UNREACHABLE = -1e30


def _lengths(v, n, what):
    values = [int(x) for x in (v.tolist() if hasattr(v, "tolist") else v)]
    if len(values) != n:
        raise RuntimeError(f"ctc_loss: expected {what} to have length {n} (the batch), got {len(values)}")
    return values


def _log_add(a, b):
    m = F.maximum(a, b)
    return F.add(m, F.log(F.add(F.exp(F.sub(a, m)), F.exp(F.sub(b, m)))))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
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
    for n, t in enumerate(in_len):
        if not 0 <= t <= T:
            raise RuntimeError(f"ctc_loss: input_lengths[{n}] = {t} is outside [0, {T}] (the frames of log_probs)")
    flat = targets.tolist()
    if targets.ndim == 1:  # concatenated
        if sum(tg_len) > len(flat):
            raise RuntimeError(f"ctc_loss: target_lengths sum to {sum(tg_len)}, but targets has {len(flat)} labels")
        rows, at = [], 0
        for s in tg_len:
            rows.append(flat[at:at + s])
            at += s
    else:
        for n, s in enumerate(tg_len):
            if s > len(flat[n]):
                raise RuntimeError(f"ctc_loss: target_lengths[{n}] = {s} exceeds the targets' {len(flat[n])} columns")
        rows = [flat[n][:tg_len[n]] for n in range(N)]
    L = 2 * max(tg_len + [0]) + 1
    ext, skip = [], []  # the labels of each state (blank, l1, blank, l2, ..., blank) and where s-2 -> s is allowed
    for row in rows:
        e = [blank] * L
        for i, lab in enumerate(row):
            e[2 * i + 1] = int(lab)
        ext.append(e)
        skip.append([s >= 2 and e[s] != blank and e[s] != e[s - 2] and s < 2 * len(row) + 1 for s in range(L)])
    ext_t = C.tensor(ext, dtype=D.int64)
    skip_t = C.tensor(skip, dtype=D.bool_)
    valid = C.tensor([[s < 2 * len(r) + 1 for s in range(L)] for r in rows], dtype=D.bool_)
    lp = log_probs if log_probs.dtype.is_floating_point else log_probs.to(D.float32)
    low = F.mul(C.ones(N, L, dtype=lp.dtype), _UNREACHABLE)
    start = C.tensor([[s < 2 for s in range(L)] for _ in rows], dtype=D.bool_)
    emit = F.gather(lp[0], 1, ext_t)
    alpha = F.where(F.logical_and(start, valid), emit, low)
    pad1 = F.mul(C.ones(N, 1, dtype=lp.dtype), _UNREACHABLE)
    pad2 = F.mul(C.ones(N, 2, dtype=lp.dtype), _UNREACHABLE)
    frames = C.tensor([[n] for n in in_len], dtype=D.int64)  # [N, 1]: a sample's states move while t < its length
    for t in range(1, T):
        prev1 = F.cat([pad1, alpha[:, :-1]], 1)
        prev2 = F.where(skip_t, F.cat([pad2, alpha[:, :-2]], 1), low) if L > 2 else low
        step = F.add(_log_add(_log_add(alpha, prev1), prev2), F.gather(lp[t], 1, ext_t))
        step = F.where(valid, step, low)
        alpha = F.where(F.gt(frames, t), step, alpha)
    last = C.tensor([[2 * s] for s in tg_len], dtype=D.int64)
    before = C.tensor([[max(2 * s - 1, 0)] for s in tg_len], dtype=D.int64)
    end = F.gather(alpha, 1, last).squeeze(1)
    end2 = F.where(C.tensor([s > 0 for s in tg_len], dtype=D.bool_), F.gather(alpha, 1, before).squeeze(1),
                   F.mul(C.ones(N, dtype=lp.dtype), _UNREACHABLE))
    loss = F.neg(_log_add(end, end2))
    # no alignment at all (too few frames, or no frames for a non-empty target): torch's inf
    impossible = F.logical_or(F.gt(loss, -_UNREACHABLE / 2),
                              C.tensor([in_len[n] == 0 and tg_len[n] > 0 for n in range(N)], dtype=D.bool_))
    inf = F.mul(C.ones(N, dtype=lp.dtype), float("inf"))
    loss = F.where(impossible, C.zeros(N, dtype=lp.dtype) if zero_infinity else inf, loss)
    if in_len and min(in_len) == 0:  # no frames: an empty target costs nothing
        loss = F.where(C.tensor([in_len[n] == 0 and tg_len[n] == 0 for n in range(N)], dtype=D.bool_),
                       C.zeros(N, dtype=lp.dtype), loss)
    if reduction == "none":
        return loss.squeeze(0) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    return F.div(loss, C.tensor([max(s, 1) for s in tg_len], dtype=lp.dtype)).mean()
