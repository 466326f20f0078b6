"""torch.nn.quantized (torch.ao.nn.quantized): quantized modules over oar's int8 ops."""
from .modules import (BatchNorm2d, DeQuantize, Dropout, ELU, FloatFunctional, FXFloatFunctional, Hardswish, LeakyReLU, Linear,  # noqa: F401
                      QFunctional, Quantize, ReLU6, Conv2d)
from . import dynamic  # noqa: E402,F401
