"""torch.distributed.algorithms: the Join context manager for uneven inputs (docs/dist.md)."""
from .join import Join, Joinable, JoinHook  # noqa: F401
