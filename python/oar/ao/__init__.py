"""torch.ao: PyTorch's quantization API (quantization, nn.quantized, nn.intrinsic) over oar's
int8 ops."""
from . import nn, quantization  # noqa: F401
