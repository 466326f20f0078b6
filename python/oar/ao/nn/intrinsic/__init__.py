"""torch.nn.intrinsic: float modules that fuse_modules makes from runs of layers (a conv and the
ReLU after it, ...). They compute what their parts compute; convert() turns each into one
quantized op (nn.intrinsic.quantized)."""
from ....nn.modules.layers import Sequential


class _FusedModule(Sequential):
    _parts = ()

    def __init__(self, *mods):
        names = [type(m).__name__ for m in mods]
        if len(mods) != len(self._parts) or any(n != p for n, p in zip(names, self._parts)):
            raise AssertionError(f"Incorrect types for input modules: expected {', '.join(self._parts)}, "
                                 f"got {', '.join(names)}")
        super().__init__(*mods)


def _fused(name, *parts):
    return type(name, (_FusedModule,), {"_parts": parts, "__doc__": f"{' + '.join(parts)}, fused."})


ConvReLU1d = _fused("ConvReLU1d", "Conv1d", "ReLU")
ConvReLU2d = _fused("ConvReLU2d", "Conv2d", "ReLU")
ConvReLU3d = _fused("ConvReLU3d", "Conv3d", "ReLU")
LinearReLU = _fused("LinearReLU", "Linear", "ReLU")
BNReLU2d = _fused("BNReLU2d", "BatchNorm2d", "ReLU")
BNReLU3d = _fused("BNReLU3d", "BatchNorm3d", "ReLU")
ConvBn2d = _fused("ConvBn2d", "Conv2d", "BatchNorm2d")
ConvBnReLU2d = _fused("ConvBnReLU2d", "Conv2d", "BatchNorm2d", "ReLU")
LinearBn1d = _fused("LinearBn1d", "Linear", "BatchNorm1d")
for _c in (ConvReLU1d, ConvReLU2d, ConvReLU3d, LinearReLU, BNReLU2d, BNReLU3d, ConvBn2d, ConvBnReLU2d, LinearBn1d):
    _c.__module__ = __name__


from . import qat, quantized  # noqa: E402,F401  (after the fused classes they build on)
