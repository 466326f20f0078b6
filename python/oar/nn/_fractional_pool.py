"""Fractional max pooling (Graham, "Fractional Max-Pooling", 2014; torch's fractional_max_pool2d/3d):
windows of kernel_size whose starts grow by a non-integer step alpha = (in - k) / (out - 1), placed
by one uniform sample u per plane and dim: start_i = floor((i + u) alpha) - floor(u alpha), the last
window ending at the input's edge. Written as a gather of every window's elements (per plane, since
each plane has its own samples) and a max over them; indices are flat positions in the plane, as
torch returns them, and the gradient reaches the maxima through the gather."""
import math

from .. import _creation as C
from .. import _dtype as D
from .. import _functions as F


def _starts(size, out, k, u):
    """Window starts along one dim for one sample u (torch's interval rule)."""
    if out == 1:
        return [size - k]
    alpha = (size - k) / (out - 1)
    return [int((i + u) * alpha) - int(u * alpha) for i in range(out - 1)] + [size - k]


def _tuple(v, n, name):
    t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
    if len(t) != n:
        raise ValueError(f"fractional_max_pool{n}d: expected {name} of {n} values, got {v!r}")
    return t


def _fractional_max_pool(n, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    who = f"fractional_max_pool{n}d"
    if input.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"{who}(): Expected {n + 1}D or {n + 2}D tensor, but got: {list(input.shape)}")
    batched = input.ndim == n + 2
    x = input if batched else input.unsqueeze(0)
    N, Cn, sizes = x.shape[0], x.shape[1], tuple(x.shape[2:])
    k = _tuple(kernel_size, n, "kernel_size")
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{who} requires specifying either an output_size or an output_ratio")
        ratio = _tuple(output_ratio, n, "output_ratio")
        out = tuple(int(s * r) for s, r in zip(sizes, ratio))
    else:
        out = _tuple(output_size, n, "output_size")
    for s, o, kk in zip(sizes, out, k):
        if o + kk - 1 > s:
            raise RuntimeError(f"{who}(): pool size {kk} too large relative to input size {s} for output {o}: "
                               f"expected output + kernel - 1 <= input")
    if _random_samples is None:
        samples = C.rand(N, Cn, n, dtype=x.dtype)
    else:
        samples = _random_samples
        if tuple(samples.shape) != (N, Cn, n):
            raise RuntimeError(f"{who}(): expected _random_samples of shape {[N, Cn, n]}, got {list(samples.shape)}")
    u = samples.detach().to(D.float64).numpy().reshape(N * Cn, n)
    # torch's samples: in 2-d, [0] places the width and [1] the height; in 3-d, [0] the depth, [1] the
    # height, [2] the width
    order = [1, 0] if n == 2 else list(range(n))
    taps = list(_grid(tuple(k)))
    plane = math.prod(sizes)
    strides = [math.prod(sizes[d + 1:]) for d in range(n)]
    rows = []
    for p in range(N * Cn):
        starts = [_starts(sizes[d], out[d], k[d], float(u[p][order[d]])) for d in range(n)]
        rows.append([sum((starts[d][o[d]] + t[d]) * strides[d] for d in range(n))
                     for o in _grid(out) for t in taps])
    idx = C.tensor(rows, dtype=D.int64).reshape(N, Cn, math.prod(out), math.prod(k))
    flat = x.reshape(N, Cn, plane)
    picked = F.gather(flat, 2, idx.reshape(N, Cn, -1)).reshape(N, Cn, math.prod(out), math.prod(k))
    values, which = picked.max(dim=3)
    values = values.reshape(N, Cn, *out)
    indices = F.gather(idx, 3, which.unsqueeze(3)).reshape(N, Cn, *out)
    if not batched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def _grid(shape):
    """Every index of shape, row-major."""
    if not shape:
        yield ()
        return
    for i in range(shape[0]):
        for rest in _grid(shape[1:]):
            yield (i,) + rest


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    return _fractional_max_pool(2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    return _fractional_max_pool(3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)
