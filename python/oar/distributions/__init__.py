"""oar.distributions (torch.distributions): probability distributions with torch's names, shapes,
parameter validation, reparameterized sampling and KL divergences, written on oar's ops (so
log_prob, entropy and rsample are differentiable and traceable). docs/python.md lists them."""
from . import constraints  # noqa: F401
from .beta import Beta, Dirichlet, Kumaraswamy  # noqa: F401
from .continuous import Cauchy, Exponential, Laplace, Normal, Uniform  # noqa: F401
from .continuous_bernoulli import ContinuousBernoulli  # noqa: F401
from .counts import Binomial, Geometric, NegativeBinomial, Poisson  # noqa: F401
from .discrete import Bernoulli, Categorical, OneHotCategorical, OneHotCategoricalStraightThrough  # noqa: F401
from .distribution import Distribution  # noqa: F401
from .exp_family import ExponentialFamily  # noqa: F401
from .extreme_value import Gumbel, Pareto, Weibull  # noqa: F401
from .folded import HalfCauchy, HalfNormal  # noqa: F401
from .gamma import Chi2, Gamma  # noqa: F401
from .independent import Independent  # noqa: F401
from .kl import kl_divergence, register_kl  # noqa: F401
from .lkj_cholesky import LKJCholesky  # noqa: F401
from .lowrank_multivariate_normal import LowRankMultivariateNormal  # noqa: F401
from .mixture import MixtureSameFamily  # noqa: F401
from .multinomial import Multinomial  # noqa: F401
from .multivariate_normal import MultivariateNormal  # noqa: F401
from .relaxed import RelaxedBernoulli, RelaxedOneHotCategorical  # noqa: F401
from .student import FisherSnedecor, StudentT  # noqa: F401
from . import transforms  # noqa: F401
from .transformed_distribution import LogisticNormal, LogNormal, TransformedDistribution  # noqa: F401
from .transforms_assembled import CatTransform, StackTransform  # noqa: F401
from .transforms_structural import (CorrCholeskyTransform, CumulativeDistributionTransform,  # noqa: F401
                                    IndependentTransform, LowerCholeskyTransform, ReshapeTransform)
from .constraint_registry import biject_to, transform_to  # noqa: F401
from . import constraint_registry  # noqa: F401
from .transforms import identity_transform  # noqa: F401
from .von_mises import VonMises  # noqa: F401
from .wishart import Wishart  # noqa: F401
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,  # noqa: F401
                         PowerTransform, SigmoidTransform, SoftmaxTransform, SoftplusTransform,
                         StickBreakingTransform, TanhTransform, Transform)

__all__ = ["Distribution", "Normal", "Uniform", "Exponential", "Laplace", "Bernoulli", "Categorical",
           "OneHotCategorical", "MultivariateNormal", "Independent", "kl_divergence", "register_kl", "constraints",
           "TransformedDistribution", "LogNormal", "transforms", "Transform", "ExpTransform", "AffineTransform",
           "SigmoidTransform", "TanhTransform", "PowerTransform", "ComposeTransform", "Poisson", "Binomial",
           "Gamma", "Chi2", "Beta", "Dirichlet", "StudentT", "FisherSnedecor", "Cauchy", "HalfNormal", "HalfCauchy",
           "Gumbel", "Weibull", "Pareto", "Geometric", "NegativeBinomial", "AbsTransform", "Kumaraswamy",
           "Multinomial", "MixtureSameFamily", "RelaxedBernoulli", "RelaxedOneHotCategorical",
           "LowRankMultivariateNormal", "OneHotCategoricalStraightThrough", "VonMises", "LogisticNormal",
           "SoftmaxTransform", "SoftplusTransform", "StickBreakingTransform", "ContinuousBernoulli", "ExponentialFamily", "Wishart", "LKJCholesky", "IndependentTransform",
           "ReshapeTransform", "LowerCholeskyTransform", "CumulativeDistributionTransform", "CorrCholeskyTransform", "CatTransform", "StackTransform", "biject_to", "transform_to",
           "identity_transform"]

from . import _torch_modules  # noqa: E402

_torch_modules.install(__import__(__name__, fromlist=["_"]))   # torch's module names: normal, utils, ...

