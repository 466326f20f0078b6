"""torch.nn.intrinsic.qat: fused runs for quantization-aware training. ConvBn2d / ConvBnReLU2d
train the BatchNorm as torch does: the weight is scaled by gamma / running std before its fake
quantizer, the convolution's output scaled back, and the BatchNorm applied (so its batch
statistics still train); convert() folds the BatchNorm into the int8 convolution."""
import oar as T
from ..... import nn as _nn
from .....nn import functional as NF
from ....quantization.fuse_modules import fuse_conv_bn_weights
from ...qat import Conv2d, Linear, _check_qconfig


class ConvReLU2d(Conv2d):
    _FUSED = True
    def forward(self, input):
        return NF.relu(super().forward(input))


class LinearReLU(Linear):
    _FUSED = True
    def forward(self, input):
        return NF.relu(super().forward(input))


class ConvBn2d(_nn.Conv2d):
    _FUSED = True
    _relu = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=None,
                 padding_mode="zeros", eps=1e-05, momentum=0.1, freeze_bn=False, qconfig=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode)
        _check_qconfig(type(self), qconfig)
        self.qconfig, self.freeze_bn = qconfig, freeze_bn if self.training else True
        self.bn = _nn.BatchNorm2d(out_channels, eps, momentum)
        self.weight_fake_quant = qconfig.weight()
        if bias:
            self.bias = _nn.Parameter(T.zeros(out_channels))

    def freeze_bn_stats(self):
        self.freeze_bn = True
        self.bn.training = False
        return self

    def update_bn_stats(self):
        self.freeze_bn = False
        self.bn.training = True
        return self

    def train(self, mode=True):
        self.training = mode
        if not self.freeze_bn:
            for m in self.children():
                m.train(mode)
        return self

    def forward(self, input):
        std = T.sqrt(self.bn.running_var + self.bn.eps)
        factor = self.bn.weight / std
        w = self.weight_fake_quant(self.weight * factor.reshape(-1, 1, 1, 1))
        y = NF.conv2d(input, w, None, self.stride, self.padding, self.dilation, self.groups)
        y = y / factor.reshape(1, -1, 1, 1)
        if self.bias is not None:
            y = y + self.bias.reshape(1, -1, 1, 1)
        y = self.bn(y)
        return NF.relu(y) if self._relu else y

    @classmethod
    def from_float(cls, mod):
        conv, bn = mod[0], mod[1]
        qat = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                  conv.groups, conv.bias is not None, conv.padding_mode, bn.eps, bn.momentum, False, mod.qconfig)
        qat.weight, qat.bias = conv.weight, conv.bias
        for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):  # shared, as torch's
            setattr(qat.bn, name, getattr(bn, name))
        return qat

    def folded(self):
        """(weight, bias) with the BatchNorm folded in, as convert() quantizes them."""
        return fuse_conv_bn_weights(self.weight, self.bias, self.bn.running_mean, self.bn.running_var, self.bn.eps,
                                    self.bn.weight, self.bn.bias)


class ConvBnReLU2d(ConvBn2d):
    _relu = True
