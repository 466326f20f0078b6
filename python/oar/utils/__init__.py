from . import data  # noqa: F401
from . import data_more  # noqa: F401  (more samplers, ChainDataset, default_convert)
from . import data_distributed  # noqa: F401  (oar.utils.data.distributed)
from . import checkpoint  # noqa: F401  (torch.utils.checkpoint)
