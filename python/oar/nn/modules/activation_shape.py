"""Activations, shape layers, paddings, channel dropouts and power pooling with torch.nn's
constructors, attributes and reprs, each on its oar.nn.functional function."""
import numbers

from .. import functional as NF
from .module import Module


def _inplace_str(module, lead=", "):
    return f"{lead}inplace=True" if module.inplace else ""


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return NF.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace_str(self)}"


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return NF.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace_str(self)}"


class SELU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return NF.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace_str(self, "")


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return NF.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace_str(self)}"


class _Shrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(_Shrink):
    def forward(self, input):
        return NF.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    def forward(self, input):
        return NF.softshrink(input, self.lambd)


class Softsign(Module):
    def forward(self, input):
        return NF.softsign(input)


class Tanhshrink(Module):
    def forward(self, input):
        return NF.tanhshrink(input)


class LogSigmoid(Module):
    def forward(self, input):
        return NF.logsigmoid(input)


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return NF.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmax2d(Module):
    def forward(self, input):
        if input.ndim not in (3, 4):
            raise RuntimeError(f"Softmax2d requires a 3D (C, H, W) or 4D (N, C, H, W) tensor as input, got "
                               f"{input.ndim}D")
        return NF.softmax(input, -3)


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return NF.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return NF.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return NF.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Upsample(Module):
    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners, self.recompute_scale_factor = mode, align_corners, recompute_scale_factor

    def forward(self, input):
        return NF.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                              recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor}" if self.scale_factor is not None else f"size={self.size}"
        return info + f", mode={self.mode}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


def _ntuple(v, n):
    return (v,) * n if isinstance(v, numbers.Integral) else tuple(v)


class _ConstantPadNd(Module):
    _sides = 2

    def __init__(self, padding, value):
        super().__init__()
        self.padding, self.value = _ntuple(padding, self._sides), value

    def forward(self, input):
        return NF.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _sides = 2


class ConstantPad2d(_ConstantPadNd):
    _sides = 4


class ConstantPad3d(_ConstantPadNd):
    _sides = 6


class ZeroPad2d(ConstantPad2d):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return str(self.padding)


class _ModePadNd(Module):
    _sides, _mode = 2, "reflect"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, self._sides)

    def forward(self, input):
        return NF.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return str(self.padding)


class ReflectionPad1d(_ModePadNd):
    _sides, _mode = 2, "reflect"


class ReflectionPad2d(_ModePadNd):
    _sides, _mode = 4, "reflect"


class ReflectionPad3d(_ModePadNd):
    _sides, _mode = 6, "reflect"


class ReplicationPad1d(_ModePadNd):
    _sides, _mode = 2, "replicate"


class ReplicationPad2d(_ModePadNd):
    _sides, _mode = 4, "replicate"


class ReplicationPad3d(_ModePadNd):
    _sides, _mode = 6, "replicate"


class AdaptiveAvgPool1d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return NF.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _DropoutNd(Module):
    _fn = staticmethod(NF.dropout)

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    _fn = staticmethod(NF.dropout1d)


class Dropout2d(_DropoutNd):
    _fn = staticmethod(NF.dropout2d)


class Dropout3d(_DropoutNd):
    _fn = staticmethod(NF.dropout3d)


class AlphaDropout(_DropoutNd):
    _fn = staticmethod(NF.alpha_dropout)


class FeatureAlphaDropout(_DropoutNd):
    _fn = staticmethod(NF.feature_alpha_dropout)


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    def forward(self, input):
        return NF.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPoolNd):
    def forward(self, input):
        return NF.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


__all__ = ["Threshold", "RReLU", "SELU", "CELU", "Hardshrink", "Softshrink", "Softsign", "Tanhshrink", "LogSigmoid",
           "Softmin", "Softmax2d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Upsample",
           "UpsamplingNearest2d", "UpsamplingBilinear2d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d",
           "ReplicationPad2d", "ReplicationPad3d",
           "AdaptiveAvgPool1d", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
           "LPPool1d", "LPPool2d"]
