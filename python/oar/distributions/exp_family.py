"""ExponentialFamily: distributions with density h(x) exp(<theta, t(x)> - A(theta)). A subclass gives its
natural parameters theta (_natural_params), the log normalizer A (_log_normalizer) and E[log h(x)]
(_mean_carrier_measure); the entropy then follows from A and its gradient, which is the mean of t(x):
H = A(theta) - <theta, grad A(theta)> - E[log h]. kl.py's Bregman-divergence KL uses the same pieces."""
from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        from .. import autograd

        result = -self._mean_carrier_measure
        thetas = [p.detach().requires_grad_() for p in self._natural_params]
        a = self._log_normalizer(*thetas)
        grads = autograd.grad(a.sum(), thetas, create_graph=True)
        result = result + a
        for theta, g in zip(thetas, grads):
            result = result - (theta * g).reshape(*self._batch_shape, -1).sum(-1)
        return result
