"""torch.distributions.constraints: where a parameter or a value may lie. check(value) is a boolean
tensor (elementwise, or per event for the event constraints); reprs are torch's."""
__all__ = ["Constraint", "real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer",
           "simplex", "lower_cholesky", "positive_definite", "real_vector", "greater_than", "greater_than_eq",
           "interval", "half_open_interval", "integer_interval", "dependent", "dependent_property", "independent",
           "positive_integer", "multinomial", "corr_cholesky", "less_than", "lower_triangular", "square", "symmetric",
           "positive_semidefinite", "one_hot", "is_dependent", "cat", "stack"]


class Constraint:
    is_discrete = False
    event_dim = 0

    def check(self, value):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__.lstrip("_") + "()"


class _Real(Constraint):
    def check(self, value):
        return value == value   # everything but NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return value > self.lower_bound

    def __repr__(self):
        return f"GreaterThan(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value):
        return value >= self.lower_bound

    def __repr__(self):
        return f"GreaterThanEq(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"LessThan(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound, upper_bound):
        self.lower_bound, self.upper_bound = lower_bound, upper_bound

    def check(self, value):
        return (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return f"Interval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value):
        return (value >= self.lower_bound) & (value < self.upper_bound)

    def __repr__(self):
        return f"HalfOpenInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerInterval(_Interval):
    is_discrete = True

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self):
        return f"IntegerInterval(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"IntegerGreaterThan(lower_bound={self.lower_bound})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        lower = (value.tril() == value).flatten(-2).all(-1)
        return lower & (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        return (value.tril() == value).flatten(-2).all(-1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        from .. import full

        return full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1], dtype=_bool())


class _Symmetric(_Square):
    def check(self, value):
        square = super().check(value)
        if not bool(square.all()):
            return square
        return ((value - value.mT).abs() <= 1e-6 + 1e-5 * value.mT.abs()).all(-2).all(-1)   # isclose, atol 1e-6


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        from .. import linalg

        sym = super().check(value)
        if not bool(sym.all()):
            return sym
        return (linalg.eigvalsh(value) >= 0).all(-1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        return ((value == 0) | (value == 1)).all(-1) & (value.sum(-1) == 1)


class _Cat(Constraint):
    """cseq[i] on the i-th slice of lengths[i] along dim (torch.cat's layout)"""

    def __init__(self, cseq, dim=0, lengths=None):
        self.cseq = list(cseq)
        self.lengths = list(lengths) if lengths is not None else [1] * len(self.cseq)
        self.dim = dim

    is_discrete = property(lambda self: any(c.is_discrete for c in self.cseq))
    event_dim = property(lambda self: max(c.event_dim for c in self.cseq))

    def check(self, value):
        from .. import cat

        checks, start = [], 0
        for c, n in zip(self.cseq, self.lengths):
            checks.append(c.check(value.narrow(self.dim, start, n)))
            start += n
        return cat(checks, self.dim)


class _Stack(Constraint):
    """cseq[i] on the i-th index along dim (torch.stack's layout)"""

    def __init__(self, cseq, dim=0):
        self.cseq, self.dim = list(cseq), dim

    is_discrete = property(lambda self: any(c.is_discrete for c in self.cseq))

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        return dim + 1 if self.dim + dim < 0 else dim

    def check(self, value):
        from .. import stack

        return stack([c.check(value.select(self.dim, i)) for i, c in zip(range(value.shape[self.dim]), self.cseq)],
                     self.dim)


def _bool():
    from .. import _dtype

    return _dtype.bool_


class _CorrCholesky(Constraint):
    """lower triangular with a positive diagonal and rows of unit length (a correlation matrix's factor)"""
    event_dim = 2

    def check(self, value):
        from .. import finfo

        tol = finfo(value.dtype).eps * value.shape[-1] * 10
        unit_rows = ((value.detach().pow(2).sum(-1).sqrt() - 1.0).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_rows


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value):
        from .. import linalg

        sym = ((value - value.mT).abs() < 1e-6).flatten(-2).all(-1)
        return sym & (linalg.eigvalsh(value) > 0).all(-1)


class _Multinomial(Constraint):
    """nonnegative integer counts summing to at most upper_bound (torch checks the weaker bound too)"""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(-1) & (x.sum(-1) <= self.upper_bound)


class _IndependentConstraint(Constraint):
    """base_constraint over the rightmost reinterpreted_batch_ndims dims taken together (all must hold)."""

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        self.base_constraint, self.reinterpreted_batch_ndims = base_constraint, reinterpreted_batch_ndims
        self.is_discrete = base_constraint.is_discrete
        self.event_dim = base_constraint.event_dim + reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self):
        return f"IndependentConstraint({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Dependent(Constraint):
    """A constraint that depends on other parameters (Uniform's low and high): not checked itself."""

    def check(self, value):
        raise ValueError("Cannot determine validity of dependent constraint")


def dependent_property(fn):
    return property(fn)


def is_dependent(constraint):
    return isinstance(constraint, _Dependent)


real, positive, nonnegative = _Real(), _GreaterThan(0.0), _GreaterThanEq(0.0)
unit_interval, boolean, nonnegative_integer = _Interval(0.0, 1.0), _Boolean(), _IntegerGreaterThan(0)
simplex, lower_cholesky, positive_definite = _Simplex(), _LowerCholesky(), _PositiveDefinite()
dependent = _Dependent()
greater_than, greater_than_eq, interval = _GreaterThan, _GreaterThanEq, _Interval
half_open_interval, integer_interval = _HalfOpenInterval, _IntegerInterval
independent, positive_integer, multinomial = _IndependentConstraint, _IntegerGreaterThan(1), _Multinomial
real_vector = independent(real, 1)
corr_cholesky = _CorrCholesky()
less_than, lower_triangular, square, symmetric = _LessThan, _LowerTriangular(), _Square(), _Symmetric()
positive_semidefinite, one_hot = _PositiveSemidefinite(), _OneHot()
cat, stack = _Cat, _Stack
