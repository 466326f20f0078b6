"""torch.nn.modules.batchnorm's names."""
from .layers import BatchNorm1d, BatchNorm2d, _BatchNorm  # noqa: F401
