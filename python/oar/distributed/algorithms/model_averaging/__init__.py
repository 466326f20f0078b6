"""torch.distributed.algorithms.model_averaging: parameters averaged across ranks every few steps
(averagers.PeriodicModelAverager, hierarchical_model_averager.HierarchicalModelAverager;
utils.average_parameters), for post-local SGD and hierarchical SGD (docs/dist.md)."""
from . import averagers, hierarchical_model_averager, utils  # noqa: F401
