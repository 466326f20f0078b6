"""torch.distributions' per-distribution module names (torch.distributions.normal.Normal,
torch.distributions.utils.broadcast_all, ...) as modules of oar.distributions, so code written against
those import paths runs unchanged. Where oar's file has the same name (gamma, beta, wishart, ...) it is
the module itself; the rest are registered here, each holding its classes."""
import sys
import types

_NAMES = {
    "bernoulli": ("discrete", ["Bernoulli"]), "binomial": ("counts", ["Binomial"]),
    "categorical": ("discrete", ["Categorical"]), "cauchy": ("continuous", ["Cauchy"]), "chi2": ("gamma", ["Chi2"]),
    "dirichlet": ("beta", ["Dirichlet"]), "exponential": ("continuous", ["Exponential"]),
    "fishersnedecor": ("student", ["FisherSnedecor"]), "geometric": ("counts", ["Geometric"]),
    "gumbel": ("extreme_value", ["Gumbel"]), "half_cauchy": ("folded", ["HalfCauchy"]),
    "half_normal": ("folded", ["HalfNormal"]), "kumaraswamy": ("beta", ["Kumaraswamy"]),
    "laplace": ("continuous", ["Laplace"]), "log_normal": ("transformed_distribution", ["LogNormal"]),
    "logistic_normal": ("transformed_distribution", ["LogisticNormal"]),
    "mixture_same_family": ("mixture", ["MixtureSameFamily"]), "negative_binomial": ("counts", ["NegativeBinomial"]),
    "normal": ("continuous", ["Normal"]),
    "one_hot_categorical": ("discrete", ["OneHotCategorical", "OneHotCategoricalStraightThrough"]),
    "pareto": ("extreme_value", ["Pareto"]), "poisson": ("counts", ["Poisson"]),
    "relaxed_bernoulli": ("relaxed", ["RelaxedBernoulli", "LogitRelaxedBernoulli"]),
    "relaxed_categorical": ("relaxed", ["RelaxedOneHotCategorical", "ExpRelaxedCategorical"]),
    "studentT": ("student", ["StudentT"]), "uniform": ("continuous", ["Uniform"]),
    "weibull": ("extreme_value", ["Weibull"]),
    "utils": ("distribution", ["broadcast_all", "probs_to_logits", "logits_to_probs", "lazy_property"]),
}


def install(package):
    """adds the modules to package (oar.distributions) and to sys.modules"""
    for name, (source, members) in _NAMES.items():
        mod = types.ModuleType(f"{package.__name__}.{name}", f"torch.distributions.{name}'s names, from oar's {source}")
        src = sys.modules[f"{package.__name__}.{source}"]
        for m in members:
            setattr(mod, m, getattr(src, m))
        mod.__all__ = list(members)
        sys.modules[mod.__name__] = mod
        setattr(package, name, mod)
    from .relaxed import clamp_probs

    package.utils.clamp_probs = clamp_probs
    package.utils.__all__.append("clamp_probs")
