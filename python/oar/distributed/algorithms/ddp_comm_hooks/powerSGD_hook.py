"""PowerSGD gradient compression as a DDP communication hook (torch 1.13's PowerSGDState and
powerSGD_hook; Vogels et al., NeurIPS 2019): each bucket's 2-d gradients M (n x m, a parameter's
gradient seen as shape[0] rows) are sent as two thin factors, P = M Q (n x r) and Q = M^T P (m x r),
so a step moves (n + m) r numbers where M has n m; the rest (biases, and matrices the rank would not
shrink by min_compression_rate) are allreduced whole. One power iteration per step:

    P = M Q;  allreduce P;  orthonormalize P's columns;  Q = M^T P;  allreduce Q;  M ~ P Q^T / N

with Q kept from the previous step (warm_start) and the part of M the approximation missed added to
the next step's gradient (use_error_feedback). Until start_powerSGD_iter steps have run the hook is
allreduce_hook (plain averaging), so the first iterations train as without compression.

The first Q is torch's: drawn as torch.randn would after torch.manual_seed of the seed the state's
RandomState gives (_torch_randn; oar's own stream is left alone, as torch forks its RNG), the
matrices taken grouped by shape as torch does, and orthonormalization is torch's (Gram-Schmidt up to
rank 2, a Householder QR above), so a run follows torch 1.13's. batch_tensors_with_same_shape is
accepted and does not batch (each matrix is handled alone; torch's batching only saves kernel
launches).

batched_powerSGD_hook compresses the whole bucket instead: the flat bucket, zero-padded to a square
of side s = ceil(sqrt(numel)), is one matrix, sent as two s x r factors."""
import math

import numpy as np

from ... import all_reduce, group
from . import default_hooks
from ._torch_randn import TorchNormal

__all__ = ["PowerSGDState", "powerSGD_hook", "batched_powerSGD_hook"]


def _orthonormalize(p, epsilon):
    """p's columns made orthonormal in place, as torch does: Gram-Schmidt up to 2 columns (and for
    half precision), where epsilon keeps a zero column finite; above, the Q of a Householder QR
    factorization (LAPACK's, through NumPy, as torch's linalg.qr; epsilon is not used there)."""
    from .... import float16, bfloat16, from_numpy, norm, sum as osum

    if p.shape[1] > 2 and p.dtype not in (float16, bfloat16):
        q = np.linalg.qr(p.numpy())[0]   # reduced: p's shape
        p.copy_(from_numpy(np.ascontiguousarray(q, dtype=p.numpy().dtype)))
        return
    for i in range(p.shape[1]):
        col = p[:, i:i + 1]
        scale = norm(col, dim=0, keepdim=True)
        if epsilon:
            scale = scale + epsilon
        elif float(scale) == 0.0:   # torch logs this and zeroes the column
            col.fill_(0.0)
            continue
        col /= scale
        if i + 1 < p.shape[1]:
            rest = p[:, i + 1:]
            rest -= osum(col * rest, dim=0, keepdim=True) * col


class PowerSGDState:
    """PowerSGD's settings and per-bucket memory (torch's names): matrix_approximation_rank r,
    start_powerSGD_iter (plain allreduce before it; must be > 1 with error feedback or warm start),
    min_compression_rate (a matrix is compressed only when n m > rate (n + m) r), use_error_feedback,
    warm_start, orthogonalization_epsilon, random_seed; compression_stats() gives (rate, elements
    before, elements after) summed over the compressed steps."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000, min_compression_rate=2,
                 use_error_feedback=True, warm_start=True, orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000, batch_tensors_with_same_shape=False):
        if (use_error_feedback or warm_start) and start_powerSGD_iter <= 1:
            raise ValueError("Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, "
                             "because PowerSGD can only be applied after the first two iterations in DDP.")
        if int(matrix_approximation_rank) < 1:
            raise ValueError(f"PowerSGDState: expected matrix_approximation_rank >= 1, got {matrix_approximation_rank}")
        self.process_group = process_group
        self.matrix_approximation_rank = int(matrix_approximation_rank)
        self.start_powerSGD_iter = start_powerSGD_iter
        self.min_compression_rate = min_compression_rate
        self.use_error_feedback = use_error_feedback
        self.warm_start = warm_start
        self.orthogonalization_epsilon = orthogonalization_epsilon
        self.rng = np.random.RandomState(random_seed)
        self.error_dict = {}
        self.p_memory_dict = {}
        self.q_memory_dict = {}
        self.iter = 0
        self.total_numel_before_compression = 0
        self.total_numel_after_compression = 0
        self.compression_stats_logging_frequency = max(1, compression_stats_logging_frequency)
        self.next_stats_report = 0
        self.batch_tensors_with_same_shape = batch_tensors_with_same_shape

    def maybe_increase_iter(self, bucket):
        if bucket.is_last():
            self.iter += 1

    def compression_stats(self):
        before, after = self.total_numel_before_compression, self.total_numel_after_compression
        return (before / after if after > 0 else 0, before, after)


def _start(state, bucket):
    """(the group's size, the bucket's buffer, the plain average's future while the first
    state.start_powerSGD_iter steps average without compression, else None)"""
    n_ranks = (state.process_group if state.process_group is not None else group.WORLD).size()
    buffer = bucket.buffer()
    if state.iter < state.start_powerSGD_iter:
        state.maybe_increase_iter(bucket)
        return n_ranks, buffer, default_hooks._allreduce_fut(state.process_group, buffer)
    return n_ranks, buffer, None


def powerSGD_hook(state, bucket):
    """The bucket averaged over state.process_group through rank-r factors (see the module's notes)."""
    from .... import cat, empty, from_numpy, zeros

    n_ranks, buffer, warm_up = _start(state, bucket)
    if warm_up is not None:
        return warm_up

    index = bucket.index()
    if state.use_error_feedback:   # last step's residual joins this step's gradient
        if index in state.error_dict:
            buffer.add_(state.error_dict[index])
        else:
            state.error_dict[index] = zeros(buffer.numel(), dtype=buffer.dtype)
        before = buffer.clone()

    matrices, whole = [], []   # (M, rank) to compress; tensors sent as they are
    for t in bucket.gradients():
        m = t.view(t.shape[0], -1)
        rows, cols = m.shape
        r = min(rows, cols, state.matrix_approximation_rank)
        full, small = rows * cols, (rows + cols) * r
        state.total_numel_before_compression += full
        if small * state.min_compression_rate < full:
            matrices.append((m, r))
            state.total_numel_after_compression += small
        else:
            whole.append(t)
            state.total_numel_after_compression += full
    by_shape = {}   # torch takes the matrices grouped by shape (first appearance first): its Qs' draw order
    for m, r in matrices:
        by_shape.setdefault(tuple(m.shape), []).append((m, r))
    matrices = [mr for group_ in by_shape.values() for mr in group_]
    flat = cat([t.reshape(-1) for t in whole]) if whole else zeros(0, dtype=buffer.dtype)

    fresh = not state.warm_start or index not in state.p_memory_dict
    if fresh:
        state.p_memory_dict[index] = empty(sum(m.shape[0] * r for m, r in matrices), dtype=buffer.dtype)
        state.q_memory_dict[index] = empty(sum(m.shape[1] * r for m, r in matrices), dtype=buffer.dtype)
    ps, qs, p_at, q_at = [], [], 0, 0
    for m, r in matrices:   # each matrix's P and Q: views of the bucket's two flat memories
        ps.append(state.p_memory_dict[index][p_at:p_at + m.shape[0] * r].view(m.shape[0], r))
        qs.append(state.q_memory_dict[index][q_at:q_at + m.shape[1] * r].view(m.shape[1], r))
        p_at += m.shape[0] * r
        q_at += m.shape[1] * r
    if fresh:
        draw = TorchNormal(state.rng.randint(1_000_000_000))   # the same on every rank, and torch's
        for q in qs:
            q.copy_(from_numpy(draw.randn(tuple(q.shape))))
    for q in qs:
        _orthonormalize(q, state.orthogonalization_epsilon)
    for (m, _), p, q in zip(matrices, ps, qs):
        p.copy_(m @ q)

    def allreduce_ps(fut):
        summed = fut.value()[0].div_(n_ranks)
        at = 0
        for t in whole:
            t.copy_(summed[at:at + t.numel()].view(tuple(t.shape)))
            at += t.numel()
        return all_reduce(state.p_memory_dict[index], group=state.process_group, async_op=True).get_future().wait()[0]

    def allreduce_qs(fut):
        for p in ps:
            _orthonormalize(p, state.orthogonalization_epsilon)
        for (m, _), p, q in zip(matrices, ps, qs):
            q.copy_(m.t() @ p)
        return all_reduce(state.q_memory_dict[index], group=state.process_group, async_op=True).get_future().wait()[0]

    def decompress(fut):
        fut.value().div_(n_ranks)
        for (m, _), p, q in zip(matrices, ps, qs):
            m.copy_(p @ q.t())
        if state.use_error_feedback:
            state.error_dict[index] = before - buffer
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        state.maybe_increase_iter(bucket)
        return buffer

    first = all_reduce(flat, group=state.process_group, async_op=True).get_future()
    return first.then(allreduce_ps).then(allreduce_qs).then(decompress)


def batched_powerSGD_hook(state, bucket):
    """The bucket averaged over state.process_group through one rank-r approximation of the whole bucket:
    its numel elements, zero-padded to s * s with s = ceil(sqrt(numel)), as an s x s matrix M; then
    P = M Q, allreduce P, orthonormalize P, Q = M^T P, allreduce Q, M = P Q^T / N, the bucket being M's
    first numel elements. Plain averaging for state.start_powerSGD_iter steps; warm start keeps each
    bucket's Q (s x r) across steps; error feedback adds each bucket's padded residual to the next step's
    M. Coarser than powerSGD_hook (one matrix for all a bucket's tensors, biases included), cheaper in
    Python work. torch's arithmetic, with two differences where torch 1.13 fails: it asserts on its
    first compressed step (its orthogonalization takes a batch of matrices since PowerSGD learned to
    batch, and this hook hands it one matrix), and a rank above s would break its Gram-Schmidt; here the
    factors have min(r, s) columns. oar's bucket cannot grow in place as torch's resize_ does, so M is
    a padded copy written back."""
    from .... import from_numpy, zeros

    n_ranks, buffer, warm_up = _start(state, bucket)
    if warm_up is not None:
        return warm_up

    total = buffer.numel()
    side = math.ceil(math.sqrt(total))
    r = min(side, state.matrix_approximation_rank)
    state.total_numel_before_compression += total
    state.total_numel_after_compression += side * state.matrix_approximation_rank * 2
    padded = zeros(side * side, dtype=buffer.dtype)
    padded[:total].copy_(buffer)
    index = bucket.index()
    if state.use_error_feedback:   # last step's residual (padding included) joins this step's gradient
        if index in state.error_dict:
            padded.add_(state.error_dict[index])
        else:
            state.error_dict[index] = zeros(side * side, dtype=buffer.dtype)
        before = padded.clone()
    matrix = padded.view(side, side)

    if not state.warm_start or index not in state.p_memory_dict:
        state.p_memory_dict[index] = zeros(side, r, dtype=buffer.dtype)
        draw = TorchNormal(state.rng.randint(1_000_000_000))   # the same on every rank, and torch's
        state.q_memory_dict[index] = from_numpy(draw.randn((side, r))).to(buffer.dtype)
    p, q = state.p_memory_dict[index], state.q_memory_dict[index]
    _orthonormalize(q, 0)   # torch's batched hook passes no epsilon
    p.copy_(matrix @ q)

    def compute_q(fut):
        _orthonormalize(p, 0)
        q.copy_(matrix.t() @ p)
        return all_reduce(q, group=state.process_group, async_op=True).get_future().wait()[0]

    def decompress(fut):
        q.div_(n_ranks)   # the average's factor, kept for the warm start
        matrix.copy_(p @ q.t())
        if state.use_error_feedback:
            state.error_dict[index] = before - padded
        if not state.warm_start:
            state.p_memory_dict.clear()
            state.q_memory_dict.clear()
        buffer.copy_(padded[:total])
        state.maybe_increase_iter(bucket)
        return buffer

    return all_reduce(p, group=state.process_group, async_op=True).get_future().then(compute_q).then(decompress)
