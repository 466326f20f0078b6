"""StudentT(df, loc, scale) and FisherSnedecor(df1, df2), reparameterized through Chi2 / Gamma draws
(normal / sqrt(chi2 / df); the ratio of two scaled chi-squares), as torch 1.13: moments that do not exist
are inf or NaN, as torch's."""
import math

from .. import _creation as C
from .._tensor import Size
from . import constraints
from .continuous import _randn
from .distribution import Distribution, broadcast_all
from .gamma import Chi2, Gamma, _tiny_floor

__all__ = ["StudentT", "FisherSnedecor"]


def _where(cond, a, b):
    from .. import where

    return where(cond, a, b)


def _full(like, v):
    return C.full_like(like, v)


class StudentT(Distribution):
    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = StudentT.__new__(StudentT)
        shape = Size(batch_shape)
        new.df, new.loc, new.scale = (t.expand(*shape) for t in (self.df, self.loc, self.scale))
        new._chi2 = self._chi2.expand(shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return _where(self.df > 1, self.loc, _full(self.loc, math.nan))

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        df = self.df
        safe = _where(df > 2, df, _full(df, 3.0))   # no inf or NaN on the branch where doesn't take
        finite = self.scale.pow(2) * safe / (safe - 2)
        return _where(df > 2, finite, _where(df > 1, _full(df, math.inf), _full(df, math.nan)))

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        x = _randn(shape, self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * x * (z / self.df).rsqrt()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        z = self.scale.log() + 0.5 * df.log() + 0.5 * math.log(math.pi) + (0.5 * df).lgamma() - \
            (0.5 * (df + 1.0)).lgamma()
        return -0.5 * (df + 1.0) * (y.pow(2) / df).log1p() - z

    def entropy(self):
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return self.scale.log() + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma() - (0.5 * df).digamma()) + \
            0.5 * df.log() + lbeta


class FisherSnedecor(Distribution):
    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1, self._gamma2 = Gamma(self.df1 * 0.5, self.df1), Gamma(self.df2 * 0.5, self.df2)
        super().__init__(self.df1.size(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = FisherSnedecor.__new__(FisherSnedecor)
        shape = Size(batch_shape)
        new.df1, new.df2 = self.df1.expand(*shape), self.df2.expand(*shape)
        new._gamma1, new._gamma2 = self._gamma1.expand(shape), self._gamma2.expand(shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = _where(self.df2 > 2, self.df2, _full(self.df2, math.nan))
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return _where(self.df1 > 2, mode, _full(mode, math.nan))

    @property
    def variance(self):
        df1 = self.df1
        df2 = _where(self.df2 > 4, self.df2, _full(self.df2, math.nan))
        return 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape=Size()):
        x1, x2 = self._gamma1.rsample(sample_shape), self._gamma2.rsample(sample_shape)
        return _tiny_floor(x1 / x2)   # each draw is at least tiny; the ratio could underflow

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2, ct3 = self.df1 * 0.5, self.df2 * 0.5, self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3
