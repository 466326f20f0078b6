"""torch.distributed.algorithms.ddp_comm_hooks: DistributedDataParallel's communication hooks
(docs/dist.md, "Communication hooks"): default_hooks (allreduce, fp16 and bf16 compression),
powerSGD_hook (low-rank compression: per matrix, or the whole bucket batched), ddp_zero_hook
(ZeroRedundancyOptimizer's step inside the hook, at the end or bucket by bucket) and post_localSGD_hook
(global averaging, then local SGD)."""
from . import default_hooks  # noqa: F401
