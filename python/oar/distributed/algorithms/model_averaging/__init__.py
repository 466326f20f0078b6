"""torch.distributed.algorithms.model_averaging: parameters averaged across ranks every few steps
(averagers.PeriodicModelAverager; utils.average_parameters), for post-local SGD (docs/dist.md)."""
from . import averagers, utils  # noqa: F401
