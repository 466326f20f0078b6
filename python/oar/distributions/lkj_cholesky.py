"""LKJCholesky(dim, concentration): the Cholesky factor of an LKJ-distributed correlation matrix, density
proportional to det(L L^T)^(concentration - 1), as torch 1.13 except for one fix in the sampler (below). Draws by the onion method: row i of the
factor is sqrt(y_i) times a uniform direction in its first i coordinates, y_i ~ Beta(i/2, concentration +
(dim - 2 - i)/2) (oar's Gamma-based Beta), and the diagonal completes each row to unit length."""
import math

from .. import _creation as C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._tensor import Size
from . import constraints
from .beta import Beta
from .distribution import Distribution, broadcast_all

__all__ = ["LKJCholesky"]


class LKJCholesky(Distribution):
    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        from .. import cat

        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = C.arange(dim - 1, dtype=self.concentration.dtype)
        offset = cat([C.zeros(1, dtype=offset.dtype), offset])
        # row k > 0 takes y ~ Beta(k / 2, marginal - (k - 1) / 2) (Lewandowski et al. 2009, sec. 3.2); torch 1.13
        # has offset + 0.5 as the first concentration, k - 1/2 from the third row on, so its draws for dim >= 3
        # do not follow its own log_prob (their correlations' marginals are off: test_lkj_cholesky_draws)
        self._beta = Beta(0.5 * offset + 0.5, marginal.unsqueeze(-1) - 0.5 * offset)
        super().__init__(self.concentration.size(), Size((dim, dim)), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = LKJCholesky.__new__(LKJCholesky)
        new.dim = self.dim
        new.concentration = self.concentration.expand(*batch_shape)
        new._beta = self._beta.expand(Size(tuple(batch_shape) + (self.dim,)))
        Distribution.__init__(new, Size(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=Size()):
        from .. import diag_embed, where

        with no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u = C.randn(*tuple(self._extended_shape(sample_shape)), dtype=y.dtype).tril(-1)
            norm = u.norm(dim=-1, keepdim=True)
            u = u / where(norm == 0, C.ones_like(norm), norm)   # row 0 has no coordinates left of its diagonal
            w = y.sqrt() * u
            diag = (1 - w.pow(2).sum(-1)).clamp(min=D.finfo(w.dtype).tiny).sqrt()
            return w + diag_embed(diag)

    def log_prob(self, value):
        from .. import mvlgamma

        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = C.arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        normalize = 0.5 * dm1 * math.log(math.pi) + mvlgamma(alpha - 0.5, dm1) - alpha.lgamma() * dm1
        return (order * diag.log()).sum(-1) - normalize
