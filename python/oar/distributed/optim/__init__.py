"""torch.distributed.optim: ZeroRedundancyOptimizer, the optimizer state sharded across ranks, and
PostLocalSGDOptimizer, a local optimizer followed by periodic model averaging (docs/dist.md)."""
from .post_localSGD_optimizer import PostLocalSGDOptimizer  # noqa: F401
from .zero_redundancy_optimizer import ZeroRedundancyOptimizer  # noqa: F401

__all__ = ["ZeroRedundancyOptimizer", "PostLocalSGDOptimizer"]
