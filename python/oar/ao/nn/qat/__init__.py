"""torch.nn.qat: Conv2d and Linear whose weights pass a fake quantizer in every forward, for
quantization-aware training; convert() makes them int8 layers with the weights' learned grid."""
from .... import nn as _nn
from ....nn import functional as NF


def _check_qconfig(cls, qconfig):
    if qconfig is None:
        raise AssertionError(f"{cls.__name__}: qconfig must be provided for a QAT module")


class Conv2d(_nn.Conv2d):
    _FLOAT_MODULE = _nn.Conv2d

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", qconfig=None, device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode)
        _check_qconfig(type(self), qconfig)
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return NF.conv2d(input, self.weight_fake_quant(self.weight), self.bias, self.stride, self.padding,
                         self.dilation, self.groups)

    @classmethod
    def from_float(cls, mod):
        conv = mod[0] if isinstance(mod, _nn.Sequential) else mod
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                  conv.groups, conv.bias is not None, conv.padding_mode, qconfig=mod.qconfig)
        qat.weight, qat.bias = conv.weight, conv.bias
        return qat

    def to_float(self):
        conv = _nn.Conv2d(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                          self.dilation, self.groups, self.bias is not None, self.padding_mode)
        conv.weight, conv.bias = self.weight, self.bias
        return conv


class Linear(_nn.Linear):
    _FLOAT_MODULE = _nn.Linear

    def __init__(self, in_features, out_features, bias=True, qconfig=None, device=None, dtype=None):
        super().__init__(in_features, out_features, bias)
        _check_qconfig(type(self), qconfig)
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input):
        return NF.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod):
        lin = mod[0] if isinstance(mod, _nn.Sequential) else mod
        qat = cls(lin.in_features, lin.out_features, lin.bias is not None, qconfig=mod.qconfig)
        qat.weight, qat.bias = lin.weight, lin.bias
        return qat

    def to_float(self):
        lin = _nn.Linear(self.in_features, self.out_features, self.bias is not None)
        lin.weight, lin.bias = self.weight, self.bias
        return lin
