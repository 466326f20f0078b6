"""torch.ao.nn: quantized (nn.quantized), fused (nn.intrinsic) and quantization-aware training
(nn.qat, nn.intrinsic.qat) modules."""
from . import intrinsic, qat, quantized  # noqa: F401
from .intrinsic import qat as _intrinsic_qat, quantized as _intrinsic_quantized  # noqa: F401
