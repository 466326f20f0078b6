"""torch.distributed.algorithms.ddp_comm_hooks: DistributedDataParallel's communication hooks
(docs/dist.md, "Communication hooks"): default_hooks (allreduce, fp16 and bf16 compression),
powerSGD_hook (low-rank compression) and ddp_zero_hook (ZeroRedundancyOptimizer's step inside the hook)."""
from . import default_hooks  # noqa: F401
