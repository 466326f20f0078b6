"""torch.nn.modules.instancenorm's names."""
from .layers import InstanceNorm1d, InstanceNorm2d, _InstanceNorm  # noqa: F401
