"""torch.nn.intrinsic.quantized: a fused float run as one int8 op (the ReLU in the epilogue)."""
from ...quantized.modules import BatchNorm2d, Conv2d, Linear, _RELU


class ConvReLU2d(Conv2d):
    _FLOAT_MODULE = ("Conv2d",)
    _activation = _RELU


class LinearReLU(Linear):
    _FLOAT_MODULE = ("Linear",)
    _activation = _RELU


class BNReLU2d(BatchNorm2d):
    _relu = True
