"""torch.distributed.algorithms: the Join context manager for uneven inputs, DDP's communication hooks
(ddp_comm_hooks) and periodic model averaging (model_averaging) (docs/dist.md)."""
from .join import Join, Joinable, JoinHook  # noqa: F401
