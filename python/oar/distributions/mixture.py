"""MixtureSameFamily(mixture_distribution, component_distribution): a Categorical choice among the
components along the component distribution's rightmost batch dim, as torch 1.13 (log_prob by logsumexp,
the mixture's mean, variance by the law of total variance, cdf where the components have one; sample
gathers the chosen component's draw; no rsample)."""
from .._grad_mode import no_grad
from .._tensor import Size
from .discrete import Categorical
from .distribution import Distribution

__all__ = ["MixtureSameFamily"]


class MixtureSameFamily(Distribution):
    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distribtutions.Categorical")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an instance of torch.distributions.Distribution")
        mdbs, cdbs = mixture_distribution.batch_shape, component_distribution.batch_shape[:-1]
        for s1, s2 in zip(reversed(tuple(mdbs)), reversed(tuple(cdbs))):
            if s1 != 1 and s2 != 1 and s1 != s2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not compatible with "
                                 f"`component_distribution.batch_shape`({cdbs})")
        km, kc = mixture_distribution.logits.shape[-1], component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(Size(cdbs), component_distribution.event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = MixtureSameFamily.__new__(MixtureSameFamily)
        batch_shape = Size(batch_shape)
        new._component_distribution = self._component_distribution.expand(Size(tuple(batch_shape) +
                                                                                (self._num_component,)))
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component, new._event_ndims = self._num_component, self._event_ndims
        Distribution.__init__(new, batch_shape, new._component_distribution.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    support = property(lambda self: self._component_distribution.support)
    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        """the mixture's probs [..., k] shaped to broadcast with the components' [batch..., k, event...]"""
        mix_batch = self._mixture_distribution.batch_shape
        pad = 0 if mix_batch.numel() == 1 else len(self._batch_shape) - len(mix_batch)
        xs = tuple(x.shape)
        return x.reshape(*(xs[:-1] + (1,) * pad + xs[-1:] + (1,) * self._event_ndims))

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        return (probs * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self._mixture_distribution.probs)
        d = -1 - self._event_ndims
        mean_cond_var = (probs * self._component_distribution.variance).sum(d)
        var_cond_mean = (probs * (self._component_distribution.mean - self._pad(self.mean)).pow(2.0)).sum(d)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        return (self._component_distribution.cdf(self._pad(x)) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        log_prob_x = self._component_distribution.log_prob(self._pad(x))   # [S, B, k]
        log_mix = self._mixture_distribution.logits.log_softmax(-1)       # [B, k]
        return (log_prob_x + log_mix).logsumexp(-1)

    def sample(self, sample_shape=Size()):
        with no_grad():
            gather_dim = len(tuple(sample_shape)) + len(self._batch_shape)
            es = tuple(self._event_shape)
            mix = self._mixture_distribution.sample(sample_shape)
            comp = self._component_distribution.sample(sample_shape)
            ms = tuple(mix.shape)
            index = mix.reshape(*(ms + (1,) * (len(es) + 1))).expand(*(ms + (1,) + es))
            return comp.gather(gather_dim, index).squeeze(gather_dim)

    def __repr__(self):
        return f"MixtureSameFamily(\n  {self._mixture_distribution},\n  {self._component_distribution})"
