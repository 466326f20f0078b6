"""torch.distributions.Distribution: batch and event shapes, parameter validation against
arg_constraints, samples of sample_shape + batch_shape + event_shape, and the derived statistics."""
import math

from .. import _creation as C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._tensor import Size, Tensor
from . import constraints

__all__ = ["Distribution", "broadcast_all", "probs_to_logits", "logits_to_probs", "lazy_property",
           "set_probs_or_logits"]


class lazy_property:
    """An attribute computed from the others at first use and then kept (Bernoulli's logits from
    probs, or the reverse)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.fn.__name__] = value
        return value


def broadcast_all(*values):
    """The values as tensors of one broadcast shape (numbers take the tensors' float dtype, or float32)."""
    from .. import broadcast_tensors

    dtype = next((v.dtype for v in values if isinstance(v, Tensor) and v.is_floating_point()), D.float32)
    tensors = [v if isinstance(v, Tensor) else C.tensor(float(v), dtype=dtype) for v in values]
    return broadcast_tensors(*tensors)


def set_probs_or_logits(dist, probs, logits, *others):
    """The given one of probs/logits (exactly one) set on dist, broadcast with others, which are returned
    in its dtype (Bernoulli's and Binomial's parameters; the other of the pair is a lazy_property)."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")
    name, value = ("probs", probs) if probs is not None else ("logits", logits)
    *rest, param = broadcast_all(*others, value)
    setattr(dist, name, param)
    return [r.to(param.dtype) for r in rest]


def probs_to_logits(probs, is_binary=False):
    eps = D.finfo(probs.dtype).eps
    p = probs.clamp(min=eps, max=1 - eps)
    return (p.log() - (-p).log1p()) if is_binary else p.log()


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else logits.softmax(-1)


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__
    arg_constraints = {}
    support = None

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape, self._event_shape = Size(batch_shape), Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.dependent is constraint or param not in self.__dict__ and \
                        isinstance(getattr(type(self), param, None), lazy_property):
                    continue   # a lazily computed parameter, or one checked through others
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(f"Expected parameter {param} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def expand(self, batch_shape, _instance=None):
        raise NotImplementedError(f"{type(self).__name__}.expand is not offered")

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self)} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampler (has_rsample is False)")

    def sample_n(self, n):
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """torch's checks of a value given to log_prob: a tensor, broadcastable, within the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        if tuple(value.shape[value.ndim - event_dim:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.size()} vs "
                             f"{self._event_shape}.")
        support = self.support
        if support is not None and support is not constraints.dependent:
            valid = support.check(value)
            if not bool(valid.all()):
                raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                                 f"to be within the support ({support!r}) of the distribution {self!r}, but found "
                                 f"invalid values:\n{value}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        shown = ", ".join(f"{k}: {_param_text(self.__dict__[k])}" for k in names)
        return f"{type(self).__name__}({shown})"


def _param_text(t):
    """torch's repr of a parameter: a one-element tensor shows its value (a 0-d one as a number), others
    their size"""
    if t.numel() != 1:
        return str(t.size())
    return str(t.item()) if t.ndim == 0 else str(t)


_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
