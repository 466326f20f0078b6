"""oar.nn.parallel: DistributedDataParallel (torch.nn.parallel's name) over oar's C data parallel."""
from .distributed import DistributedDataParallel  # noqa: F401
from .sync_batchnorm import SyncBatchNorm  # noqa: F401
