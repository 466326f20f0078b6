"""torch.distributed.optim: ZeroRedundancyOptimizer, the optimizer state sharded across ranks (docs/dist.md)."""
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer  # noqa: F401

__all__ = ["ZeroRedundancyOptimizer"]
