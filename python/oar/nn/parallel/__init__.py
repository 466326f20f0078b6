"""oar.nn.parallel: DistributedDataParallel (torch.nn.parallel's name) over oar's C data parallel, and
DataParallel (the whole batch in this process)."""
from .data_parallel import DataParallel, data_parallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401
from .sync_batchnorm import SyncBatchNorm  # noqa: F401
