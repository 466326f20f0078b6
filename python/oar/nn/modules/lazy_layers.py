"""torch.nn's lazy layers: Linear, convolutions and norms whose input size (in_features,
in_channels, num_features) is read from the first input; their parameters are uninitialized until
then, and the module becomes the plain layer (torch's cls_to_become)."""
from ... import _creation as C
from ... import _dtype as D
from ..._grad_mode import no_grad
from ..parameter import UninitializedBuffer, UninitializedParameter
from .layers import (BatchNorm1d, BatchNorm2d, BatchNorm3d, Conv1d, Conv2d, Conv3d, ConvTranspose1d,
                     ConvTranspose2d, ConvTranspose3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, Linear)
from .lazy import LazyModuleMixin

__all__ = ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


class LazyLinear(LazyModuleMixin, Linear):
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.out_features = out_features
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class _LazyConv(LazyModuleMixin):
    """in_channels from the input's channel dim (dim 1, or 0 unbatched)"""

    def _lazy(self, out_channels, bias, dtype):
        self.out_channels = out_channels
        self.weight = UninitializedParameter(dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return
        batched = input.dim() == self._dims + 2
        self.in_channels = input.shape[1 if batched else 0]
        if self.in_channels % self.groups:
            raise ValueError("in_channels must be divisible by groups")
        with no_grad():
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize((*shape, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv(base):
    class Lazy(_LazyConv, base):
        cls_to_become = base

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                     padding_mode="zeros", device=None, dtype=None):
            super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode)
            self._lazy(out_channels, bias, dtype)

    Lazy.__name__ = Lazy.__qualname__ = "Lazy" + base.__name__
    return Lazy


def _lazy_conv_transpose(base):
    class Lazy(_LazyConv, base):
        cls_to_become = base

        def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                     dilation=1, padding_mode="zeros", device=None, dtype=None):
            super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
                             padding_mode)
            self._lazy(out_channels, bias, dtype)

    Lazy.__name__ = Lazy.__qualname__ = "Lazy" + base.__name__
    return Lazy


LazyConv1d, LazyConv2d, LazyConv3d = (_lazy_conv(b) for b in (Conv1d, Conv2d, Conv3d))
LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d = (
    _lazy_conv_transpose(b) for b in (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d))


class _LazyNorm(LazyModuleMixin):
    """num_features from the input's channel dim; weight, bias and running statistics uninitialized"""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None):
        super().__init__(0, eps, momentum, False, False)
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = UninitializedParameter(dtype=dtype)
            self.bias = UninitializedParameter(dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dtype)
            self.running_var = UninitializedBuffer(dtype=dtype)
            self.num_batches_tracked = C.tensor(0, dtype=D.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1] if input.dim() > 1 else input.shape[0]
        with no_grad():
            for name in ("weight", "bias", "running_mean", "running_var"):
                t = getattr(self, name, None)
                if t is not None:
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(base):
    class Lazy(_LazyNorm, base):
        cls_to_become = base

    Lazy.__name__ = Lazy.__qualname__ = "Lazy" + base.__name__
    return Lazy


LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d = (_lazy_norm(b) for b in (BatchNorm1d, BatchNorm2d, BatchNorm3d))
LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d = (
    _lazy_norm(b) for b in (InstanceNorm1d, InstanceNorm2d, InstanceNorm3d))
