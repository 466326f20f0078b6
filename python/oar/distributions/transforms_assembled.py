"""CatTransform and StackTransform: transforms applied piecewise along a dim (slices of given lengths, or
single indices), their results put back with cat / stack, as torch.distributions.transforms'; the
matching constraints are constraints.cat and constraints.stack."""
from . import constraints
from .transforms import Transform, _sum_rightmost

__all__ = ["CatTransform", "StackTransform"]


def _check_dim(name, t, dim, size):
    if not -t.dim() <= dim < t.dim():
        raise ValueError(f"{name}: expected dim {dim} within a tensor of {t.dim()} dims")
    if t.shape[dim] != size:
        raise ValueError(f"{name}: expected size {size} along dim {dim} (the pieces' total), got {t.shape[dim]}")


class CatTransform(Transform):
    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        self.transforms = list(tseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.transforms)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: expected one length per transform, got {len(self.lengths)} lengths "
                             f"for {len(self.transforms)} transforms")
        self.dim = dim
        self.event_dim = max(t.event_dim for t in self.transforms)
        self.length = sum(self.lengths)

    bijective = property(lambda self: all(t.bijective for t in self.transforms))
    domain = property(lambda self: constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths))
    codomain = property(lambda self: constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths))

    def _pieces(self, z):
        start = 0
        for t, n in zip(self.transforms, self.lengths):
            yield t, z.narrow(self.dim, start, n)
            start += n

    def _call(self, x):
        from .. import cat

        _check_dim("CatTransform", x, self.dim, self.length)
        return cat([t(p) for t, p in self._pieces(x)], self.dim)

    def _inverse(self, y):
        from .. import cat

        _check_dim("CatTransform", y, self.dim, self.length)
        return cat([t.inv(p) for t, p in self._pieces(y)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        from .. import cat

        _check_dim("CatTransform", x, self.dim, self.length)
        _check_dim("CatTransform", y, self.dim, self.length)
        parts = []
        for (t, xp), (_, yp) in zip(self._pieces(x), self._pieces(y)):
            ldj = t.log_abs_det_jacobian(xp, yp)
            parts.append(_sum_rightmost(ldj, self.event_dim - t.event_dim) if t.event_dim < self.event_dim else ldj)
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        return cat(parts, dim) if dim < 0 else sum(parts)   # dim inside the event: the pieces' sum

    def __eq__(self, other):
        return isinstance(other, CatTransform) and (self.transforms, self.lengths, self.dim) == \
            (other.transforms, other.lengths, other.dim)

    __hash__ = object.__hash__


class StackTransform(Transform):
    def __init__(self, tseq, dim=0, cache_size=0):
        self.transforms, self.dim = list(tseq), dim

    bijective = property(lambda self: all(t.bijective for t in self.transforms))
    domain = property(lambda self: constraints.stack([t.domain for t in self.transforms], self.dim))
    codomain = property(lambda self: constraints.stack([t.codomain for t in self.transforms], self.dim))

    def _slices(self, z):
        _check_dim("StackTransform", z, self.dim, len(self.transforms))
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        from .. import stack

        return stack([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y):
        from .. import stack

        return stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x, y):
        from .. import stack

        return stack([t.log_abs_det_jacobian(xs, ys)
                      for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y))], self.dim)

    def __eq__(self, other):
        return isinstance(other, StackTransform) and (self.transforms, self.dim) == (other.transforms, other.dim)

    __hash__ = object.__hash__
