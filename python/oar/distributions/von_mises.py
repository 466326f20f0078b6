"""VonMises(loc, concentration): the circular normal on [-pi, pi), as torch 1.13: the log density with
torch's normalizer (log I0 by Abramowitz and Stegun's polynomial approximations 9.8.1-9.8.4, so values
match torch's; about 1e-7 relative), samples by Best and Fisher's (1979) wrapped-Cauchy rejection
method, vectorized: every round redraws only the elements not yet accepted. No rsample."""
import math

from .. import _creation as C
from .._grad_mode import no_grad
from .._tensor import Size
from . import constraints
from .distribution import Distribution, broadcast_all, lazy_property

__all__ = ["VonMises"]

# A&S 9.8.1-9.8.4: I0 and I1 for x < 3.75 in (x/3.75)^2, e^-x sqrt(x) I_n for x >= 3.75 in 3.75/x
_I_SMALL = ([1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813],
            [0.5, 0.87890594, 0.51498869, 0.15084934, 0.02658733, 0.00301532, 0.00032411])
_I_LARGE = ([0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633,
             0.00392377],
            [0.39894228, -0.03988024, -0.00362018, 0.00163801, -0.01031555, 0.02282967, -0.02895312, 0.01787654,
             -0.00420059])


def _horner(y, coefs):
    result = coefs[-1]
    for c in reversed(coefs[:-1]):
        result = c + y * result
    return result


def _log_bessel_i(x, order):
    from .. import where

    y = (x / 3.75) ** 2
    small = _horner(y, _I_SMALL[order])
    if order == 1:
        small = x.abs() * small
    large = x - 0.5 * x.log() + _horner(3.75 / x, _I_LARGE[order]).log()
    return where(x < 3.75, small.log(), large)


class VonMises(Distribution):
    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        tau = 1 + (1 + 4 * self.concentration ** 2).sqrt()
        rho = (tau - (2 * tau).sqrt()) / (2 * self.concentration)
        self._proposal_r = (1 + rho ** 2) / (2 * rho)
        super().__init__(self.loc.size(), Size(), validate_args=validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.concentration * (value - self.loc).cos() - math.log(2 * math.pi) - \
            _log_bessel_i(self.concentration, 0)

    def sample(self, sample_shape=Size()):
        from .. import where
        from .continuous import _rand

        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            loc, kappa, r = (t.expand(*shape) if shape else t for t in (self.loc, self.concentration,
                                                                        self._proposal_r))
            x = C.zeros(shape, dtype=loc.dtype)
            done = x != x   # all False: nothing accepted yet
            while not bool(done.all()):
                u1, u2, u3 = (_rand(shape, loc.dtype) for _ in range(3))
                z = (math.pi * u1).cos()
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = ~done & (((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0))
                x = where(accept, (u3 - 0.5).sign() * f.acos(), x)
                done = done | accept
            return (x + math.pi + loc) % (2 * math.pi) - math.pi

    def expand(self, batch_shape, _instance=None):
        return VonMises(self.loc.expand(*batch_shape), self.concentration.expand(*batch_shape),
                        validate_args=self.__dict__.get("_validate_args"))

    mean = mode = property(lambda self: self.loc)

    @lazy_property
    def variance(self):
        k = self.concentration
        return 1 - (_log_bessel_i(k, 1) - _log_bessel_i(k, 0)).exp()
