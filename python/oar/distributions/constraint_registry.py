"""biject_to(constraint) and transform_to(constraint) (torch.distributions.constraint_registry): the
transform from unconstrained reals onto a constraint's set, a bijection for biject_to (what HMC needs),
possibly not one for transform_to (softmax for the simplex, what an optimizer needs). Registered by the
constraint's class, as torch's; register adds more."""
import numbers

from . import constraints, transforms
from .transforms_assembled import CatTransform, StackTransform
from .transforms_structural import CorrCholeskyTransform, IndependentTransform, LowerCholeskyTransform

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    def __init__(self):
        self._registry = {}

    def register(self, constraint, factory=None):
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(f"Expected constraint to be either a Constraint subclass or instance, but got {constraint}")
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint):
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(f"Cannot transform {type(constraint).__name__} constraints") from None
        return factory(constraint)


biject_to, transform_to = ConstraintRegistry(), ConstraintRegistry()


def _both(*cs):
    def decorate(f):
        for c in cs:
            biject_to.register(c, f)
            transform_to.register(c, f)
        return f
    return decorate


@_both(constraints.real)
def _to_real(c):
    return transforms.identity_transform


@biject_to.register(constraints.independent)
def _biject_independent(c):
    return IndependentTransform(biject_to(c.base_constraint), c.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_independent(c):
    return IndependentTransform(transform_to(c.base_constraint), c.reinterpreted_batch_ndims)


@_both(constraints.positive, constraints.nonnegative)
def _to_positive(c):
    return transforms.ExpTransform()


@_both(constraints.greater_than, constraints.greater_than_eq)
def _to_greater_than(c):
    return transforms.ComposeTransform([transforms.ExpTransform(), transforms.AffineTransform(c.lower_bound, 1)])


@_both(constraints.less_than)
def _to_less_than(c):
    return transforms.ComposeTransform([transforms.ExpTransform(), transforms.AffineTransform(c.upper_bound, -1)])


@_both(constraints.interval, constraints.half_open_interval)
def _to_interval(c):
    lo, hi = c.lower_bound, c.upper_bound
    if isinstance(lo, numbers.Number) and lo == 0 and isinstance(hi, numbers.Number) and hi == 1:
        return transforms.SigmoidTransform()
    return transforms.ComposeTransform([transforms.SigmoidTransform(), transforms.AffineTransform(lo, hi - lo)])


@biject_to.register(constraints.simplex)
def _biject_simplex(c):
    return transforms.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_simplex(c):
    return transforms.SoftmaxTransform()


@transform_to.register(constraints.lower_cholesky)
def _transform_lower_cholesky(c):
    return LowerCholeskyTransform()


@_both(constraints.corr_cholesky)
def _to_corr_cholesky(c):
    return CorrCholeskyTransform()


@biject_to.register(constraints.cat)
def _biject_cat(c):
    return CatTransform([biject_to(part) for part in c.cseq], c.dim, c.lengths)


@transform_to.register(constraints.cat)
def _transform_cat(c):
    return CatTransform([transform_to(part) for part in c.cseq], c.dim, c.lengths)


@biject_to.register(constraints.stack)
def _biject_stack(c):
    return StackTransform([biject_to(part) for part in c.cseq], c.dim)


@transform_to.register(constraints.stack)
def _transform_stack(c):
    return StackTransform([transform_to(part) for part in c.cseq], c.dim)

