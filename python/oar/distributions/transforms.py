"""torch.distributions.transforms: invertible maps with the log of their Jacobian's determinant, for
TransformedDistribution: ExpTransform, AffineTransform, SigmoidTransform, TanhTransform, PowerTransform,
AbsTransform, SoftplusTransform, SoftmaxTransform, StickBreakingTransform, ComposeTransform (and each
one's inverse through .inv). Equality as torch's (same kind and parameters), which KL between two
TransformedDistributions relies on; forward_shape / inverse_shape for the transforms that change the
event size (stick-breaking adds one)."""
import math

from . import constraints

__all__ = ["Transform", "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform", "PowerTransform",
           "ComposeTransform", "AbsTransform", "SoftplusTransform", "SoftmaxTransform", "StickBreakingTransform",
           "identity_transform"]


class Transform:
    """y = T(x); inv(y) = x; log_abs_det_jacobian(x, y) = log |dy/dx| (elementwise; event_dim > 0 sums)."""
    bijective = True
    sign = 1
    event_dim = 0
    domain = codomain = constraints.real

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        return self._call(x)

    def __eq__(self, other):   # parameterless transforms: any two of a kind are equal (overridden below)
        return type(self) is type(other)

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def forward_shape(self, shape):
        return tuple(shape)

    def inverse_shape(self, shape):
        return tuple(shape)

    @property
    def codomain_event_dim(self):
        """event dims of the output (event_dim is the input's; they differ for a reshape)"""
        return self.event_dim

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        self._inv = transform
        self.event_dim = transform.codomain_event_dim
        self.sign = transform.sign
        self.domain, self.codomain = transform.codomain, transform.domain

    @property
    def inv(self):
        return self._inv

    def __call__(self, x):
        return self._inv._inverse(x)

    def _inverse(self, y):
        return self._inv(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def __eq__(self, other):
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    @property
    def codomain_event_dim(self):
        return self._inv.event_dim

    __hash__ = object.__hash__

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


def _sum_rightmost(value, dims):
    return value.reshape(*value.shape[:value.ndim - dims], -1).sum(-1) if dims else value


class ExpTransform(Transform):
    codomain = constraints.positive

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class AbsTransform(Transform):
    """y = |x|: not invertible; its inverse takes the nonnegative branch (HalfNormal, HalfCauchy)"""
    bijective = False
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """y = loc + scale x; event_dim rightmost dims form one event (their log-determinants summed)."""

    def __init__(self, loc, scale, event_dim=0):
        self.loc, self.scale, self.event_dim = loc, scale, event_dim

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                if a != b:
                    return False
            elif not bool((a == b).all()):
                return False
        return True

    __hash__ = object.__hash__

    @property
    def sign(self):
        if isinstance(self.scale, (int, float)):
            return 1 if self.scale > 0 else -1
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        from .. import full_like

        if isinstance(self.scale, (int, float)):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log().expand(*x.shape) if x.ndim else self.scale.abs().log()
        return _sum_rightmost(result, self.event_dim)


class SigmoidTransform(Transform):
    codomain = constraints.unit_interval

    def _call(self, x):
        from .. import finfo

        eps = finfo(x.dtype).tiny
        return x.sigmoid().clamp(min=eps, max=1 - finfo(x.dtype).eps)

    def _inverse(self, y):
        from .. import finfo

        eps = finfo(y.dtype).eps
        y = y.clamp(min=finfo(y.dtype).tiny, max=1 - eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        from ..nn import functional as NF

        return -NF.softplus(-x) - NF.softplus(x)


class TanhTransform(Transform):
    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * ((1 + y).log() - (1 - y).log())   # atanh; no clamping, as torch

    def log_abs_det_jacobian(self, x, y):
        from ..nn import functional as NF

        return 2.0 * (math.log(2.0) - x - NF.softplus(-2.0 * x))   # log(1 - tanh(x)^2), stably


class PowerTransform(Transform):
    domain = codomain = constraints.positive

    def __init__(self, exponent):
        self.exponent = exponent

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        equal = self.exponent == other.exponent
        return bool(equal.all()) if hasattr(equal, "all") else bool(equal)

    __hash__ = object.__hash__

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        e = self.exponent
        return (e * y / x).abs().log()


class ComposeTransform(Transform):
    """The transforms applied in order; log-determinants summed."""

    def __init__(self, parts):
        self.parts = list(parts)
        self.event_dim = max((p.event_dim for p in self.parts), default=0)

    def __eq__(self, other):
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def __repr__(self):   # torch's layout: one part a line
        return "ComposeTransform(\n    " + ",\n    ".join(repr(p) for p in self.parts) + "\n)"

    __hash__ = object.__hash__

    def forward_shape(self, shape):
        for p in self.parts:
            shape = p.forward_shape(shape)
        return tuple(shape)

    def inverse_shape(self, shape):
        for p in reversed(self.parts):
            shape = p.inverse_shape(shape)
        return tuple(shape)

    def _call(self, x):
        for p in self.parts:
            x = p(x)
        return x

    def _inverse(self, y):
        for p in reversed(self.parts):
            y = p.inv(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            from .. import zeros_like

            return zeros_like(x)
        total = 0
        for p in self.parts:
            nxt = p(x)
            total = total + _sum_rightmost(p.log_abs_det_jacobian(x, nxt), self.event_dim - p.event_dim)
            x = nxt
        return total


class SoftplusTransform(Transform):
    """y = log(1 + e^x)"""
    codomain = constraints.positive

    def _call(self, x):
        from ..nn import functional as NF

        return NF.softplus(x)

    def _inverse(self, y):
        return (-(-y).expm1()).log() + y   # log(e^y - 1), stably

    def log_abs_det_jacobian(self, x, y):
        from ..nn import functional as NF

        return -NF.softplus(-x)


class SoftmaxTransform(Transform):
    """softmax over the last dim: not bijective (its inverse is a log, up to a constant); no Jacobian"""
    codomain = constraints.simplex
    event_dim = 1
    bijective = False

    def _call(self, x):
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()


class StickBreakingTransform(Transform):
    """R^K to the (K+1)-simplex by stick breaking: z_i = sigmoid(x_i - log(K + 1 - i)) takes that share of
    what the first i - 1 left; y = (z_1, (1 - z_1) z_2, ..., prod (1 - z_i))"""
    codomain = constraints.simplex
    event_dim = 1

    @staticmethod
    def _offset(k, dtype):
        from .. import arange

        return (k - arange(k, dtype=dtype)).log()   # log(K + 1 - i) for i = 1 .. K

    def _call(self, x):
        from .. import cat, finfo, ones

        fi = finfo(x.dtype)
        z = (x - self._offset(x.shape[-1], x.dtype)).sigmoid().clamp(min=fi.tiny, max=1 - fi.eps)
        left = (1 - z).cumprod(-1)
        one = ones(*x.shape[:-1], 1, dtype=x.dtype)
        return cat([z, one], -1) * cat([one, left], -1)

    def _inverse(self, y):
        from .. import finfo

        crop = y[..., :-1]
        rest = (1 - crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)   # the stick left, kept positive
        return crop.log() - rest.log() + self._offset(crop.shape[-1], y.dtype)

    def log_abs_det_jacobian(self, x, y):
        from ..nn import functional as NF

        x = x - self._offset(x.shape[-1], x.dtype)
        # log sigmoid(x) + log(1 - sigmoid(x)) of each break, times the stick it breaks
        return (-x + NF.logsigmoid(x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return tuple(shape[:-1]) + (shape[-1] - 1,)


identity_transform = ComposeTransform([])


def __getattr__(name):   # the structural and assembled transforms live in their own files (they import this one)
    from . import transforms_assembled, transforms_structural

    for mod in (transforms_structural, transforms_assembled):
        if name in mod.__all__:
            return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

