"""torch.special: the special functions under their torch.special names (the op table's digamma,
polygamma, lgamma, erfinv and the erf family; the Bessel functions, Airy's Ai, the incomplete gamma
functions, zeta and the orthogonal polynomials of src/ops/special.c; and compositions of them)."""
import math

from . import _functions as F
from . import _compositions as K
from ._creation import full as _full

__all__ = ["digamma", "psi", "polygamma", "gammaln", "multigammaln", "erf", "erfc", "erfinv", "erfcx", "ndtr",
           "ndtri", "log_ndtr", "expit", "logit", "xlogy", "xlog1py", "exp2", "expm1", "log1p", "sinc", "round",
           "logsumexp", "softmax", "log_softmax", "entr", "i0", "i0e", "i1", "i1e", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "spherical_bessel_j0",
           "airy_ai", "gammainc", "gammaincc", "zeta", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "chebyshev_polynomial_v", "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
           "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
           "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]

digamma = psi = F.digamma
polygamma = F.polygamma
gammaln = F.lgamma
erf, erfc, erfinv = F.erf, F.erfc, F.erfinv
expit = F.sigmoid
exp2, expm1, log1p, round = F.exp2, F.expm1, F.log1p, F.round
logit, xlogy, sinc = K.logit, K.xlogy, K.sinc
logsumexp = F.logsumexp

# the op table's (src/ops/special.c): integers promote to float32 as in torch; the binary ones take a
# number on either side, except gammainc / gammaincc (torch.igamma / igammac: tensors only)
i0 = F.i0
i0e, i1, i1e = F.G["i0e"], F.G["i1"], F.G["i1e"]
modified_bessel_i0, modified_bessel_i1 = F.G["modified_bessel_i0"], F.G["modified_bessel_i1"]
modified_bessel_k0, modified_bessel_k1 = F.G["modified_bessel_k0"], F.G["modified_bessel_k1"]
scaled_modified_bessel_k0 = F.G["scaled_modified_bessel_k0"]
scaled_modified_bessel_k1 = F.G["scaled_modified_bessel_k1"]
bessel_j0, bessel_j1, bessel_y0, bessel_y1 = F.G["bessel_j0"], F.G["bessel_j1"], F.G["bessel_y0"], F.G["bessel_y1"]
spherical_bessel_j0, airy_ai = F.G["spherical_bessel_j0"], F.G["airy_ai"]
gammainc, gammaincc = F.igamma, F.igammac
zeta = F.G["zeta"]
chebyshev_polynomial_t, chebyshev_polynomial_u = F.G["chebyshev_polynomial_t"], F.G["chebyshev_polynomial_u"]
chebyshev_polynomial_v, chebyshev_polynomial_w = F.G["chebyshev_polynomial_v"], F.G["chebyshev_polynomial_w"]
shifted_chebyshev_polynomial_t = F.G["shifted_chebyshev_polynomial_t"]
shifted_chebyshev_polynomial_u = F.G["shifted_chebyshev_polynomial_u"]
shifted_chebyshev_polynomial_v = F.G["shifted_chebyshev_polynomial_v"]
shifted_chebyshev_polynomial_w = F.G["shifted_chebyshev_polynomial_w"]
hermite_polynomial_h, hermite_polynomial_he = F.G["hermite_polynomial_h"], F.G["hermite_polynomial_he"]
laguerre_polynomial_l, legendre_polynomial_p = F.G["laguerre_polynomial_l"], F.G["legendre_polynomial_p"]


def multigammaln(input, p):
    """log of the multivariate gamma function: p(p-1)/4 log(pi) + sum_j lgamma(x - j/2), j < p;
    torch requires every element > (p - 1) / 2"""
    if p < 1:
        raise RuntimeError(f"p has to be greater than or equal to 1, got {p}")
    x = K._float(input)
    if bool(F.le(x, (p - 1) / 2.0).any()):
        raise RuntimeError(f"All elements must be greater than (p-1)/2 = {(p - 1) / 2.0}")
    out = F.lgamma(x)
    for j in range(1, p):
        out = F.add(out, F.lgamma(F.sub(x, j / 2.0)))
    return F.add(out, p * (p - 1) / 4.0 * math.log(math.pi))


def erfcx(input):
    """e^(x^2) erfc(x); composed, so it overflows where e^(x^2) does (x > ~9 in float32)"""
    x = K._float(input)
    return F.mul(F.exp(F.square(x)), F.erfc(x))


def ndtr(input):
    """the standard normal CDF: erfc(-x / sqrt 2) / 2"""
    return F.mul(F.erfc(F.mul(K._float(input), -1.0 / math.sqrt(2.0))), 0.5)


def ndtri(input):
    """the standard normal quantile: sqrt 2 erfinv(2p - 1)"""
    return F.mul(F.erfinv(F.sub(F.mul(K._float(input), 2.0), 1.0)), math.sqrt(2.0))


def log_ndtr(input):
    return F.log(ndtr(input))


def xlog1py(input, other):
    """x log1p(y), 0 where x == 0 (unless y is NaN)"""
    x, y = K._float(input), other
    r = F.mul(x, F.log1p(y))
    return F.where(F.logical_and(F.eq(x, 0), F.eq(y, y)), _full((), 0.0, dtype=r.dtype), r)


def entr(input):
    """-x ln x for x > 0, 0 at 0, -inf below"""
    x = K._float(input)
    zero = _full((), 0.0, dtype=x.dtype)
    safe = F.where(F.gt(x, 0), x, _full((), 1.0, dtype=x.dtype))
    r = F.neg(F.mul(x, F.log(safe)))
    return F.where(F.gt(x, 0), r, F.where(F.eq(x, 0), zero, F.where(F.lt(x, 0), _full((), -math.inf, dtype=x.dtype),
                                                                          x)))


def softmax(input, dim, *, dtype=None):
    from .nn import functional as nnf

    return nnf.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):
    from .nn import functional as nnf

    return nnf.log_softmax(input, dim, dtype=dtype)
