"""torch.ao: the quantization namespace (see quantization.py)."""
from . import quantization  # noqa: F401
