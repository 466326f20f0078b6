"""oar: a deep learning framework with a C core, used from Python with PyTorch's API.

    import oar as torch          # or: with oar.mock_torch(): import torch
    x = torch.randn(4, 3, requires_grad=True)
    (x @ x.T).sum().backward()

Tensors, ops and autograd run in oar's C core (libOAR); this package binds its public C API
(the oar._C extension) and adds torch's names, signatures and Python objects."""

from . import _C
from ._dtype import (bfloat16, bool_ as bool, dtype, float16, float32, float64, int8, int32, int64,  # noqa: F401
                     uint8)
from ._dtype import float32 as float, float64 as double, float16 as half, int64 as long, int32 as int  # noqa: F401
from ._dtype import int16, int16 as short, uint16, uint32, uint64  # noqa: F401
from ._dtype import float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu  # noqa: F401
from ._dtype import float4_e2m1fn, int4, uint4, int2, uint2  # noqa: F401
from ._complex import (complex, complex64, complex128, imag, is_complex, istft, polar, real, stft,  # noqa: F401
                       view_as_complex, view_as_real)
from ._complex import complex64 as cfloat, complex128 as cdouble  # noqa: F401
from ._dtype import finfo, iinfo  # noqa: F401
from ._tensor import Size, Tensor, device  # noqa: F401
from ._ops import ops  # noqa: F401
from . import _vision as _vision
ops.roi_align, ops.nms, ops.batched_nms = _vision.roi_align, _vision.nms, _vision.batched_nms  # torchvision.ops'
from ._functions import *  # noqa: F401,F403
from ._functions import abs, all, any, max, min, pow, round, sum  # noqa: F401  (shadow builtins, as torch does)
from ._creation import (arange, as_tensor, empty, empty_like, eye, from_dlpack, from_numpy, full, full_like,  # noqa: F401
                        linspace, ones, ones_like, rand, rand_like, randint, randn, randn_like, randperm,
                        scalar_tensor, tensor, zeros, zeros_like)
from ._creation import layout, strided  # noqa: F401
from ._creation import bartlett_window, blackman_window, hamming_window, hann_window, kaiser_window  # noqa: F401
from ._compositions import *  # noqa: F401,F403
from . import _compositions, _tensor
_compositions.add_methods(Tensor, _tensor._inplace)
from . import _tensor_more  # noqa: E402
_tensor_more.add_methods(Tensor)
from ._grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401
from .serialization import load, save  # noqa: F401
from . import autograd  # noqa: F401
from . import jit  # noqa: F401
from .jit import cond, while_loop  # noqa: F401
from ._mock import mock_torch  # noqa: F401
from ._qtensor import (_make_per_channel_quantized_tensor, _make_per_tensor_quantized_tensor,  # noqa: F401
                       dequantize, per_channel_affine, per_channel_affine_float_qparams, per_channel_symmetric,
                       per_tensor_affine, per_tensor_symmetric, qint8, qint32, qscheme, quantize_per_channel,
                       quantize_per_tensor, quint8)

__version__ = _C.version
FloatTensor = DoubleTensor = LongTensor = Tensor
_default_dtype = float32


from .random import fork_rng, get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: E402,F401


def set_num_threads(n):
    _C.set_num_threads(n)


def get_num_threads():
    return _C.get_num_threads()


def get_default_dtype():
    return _default_dtype


def set_default_dtype(d):
    if d is not float32:
        raise NotImplementedError("oar: the default dtype is float32")


def _assert(condition, message):
    """torch._assert: assert that symbolic tracers can see (a plain assert here)."""
    assert condition, message


def is_tensor(obj):
    return isinstance(obj, _C.TensorBase)


def numel(input):
    return input.numel()


def is_floating_point(input):
    return input.is_floating_point()


def typename(obj):
    return obj.type() if is_tensor(obj) else type(obj).__name__


from ._device import cuda  # noqa: E402  (oar.cuda: availability, synchronize)


class _QuantizedEngine:
    """torch.backends.quantized: the engine names select torch's default qconfig for each
    (get_default_qconfig); every one runs on oar's int8 kernels."""
    engine = "x86"

    @property
    def supported_engines(self):
        from .ao.quantization.qconfig import ENGINES

        return list(ENGINES)


class _Backends:
    class cudnn:
        benchmark = False
        deterministic = False
        enabled = False

    quantized = _QuantizedEngine()


backends = _Backends()

from . import nn  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from . import utils  # noqa: E402,F401
from . import distributed  # noqa: E402,F401
from . import futures  # noqa: E402,F401
from . import ao  # noqa: E402,F401
from . import fft  # noqa: E402,F401
from ._compat import onnx  # noqa: E402,F401  (torch.onnx.export on oar's exporter)
from . import special  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from . import distributions  # noqa: E402,F401
from .ao import quantization  # noqa: E402,F401  (torch.quantization, the older name)
nn.quantized, nn.intrinsic, nn.qat = ao.nn.quantized, ao.nn.intrinsic, ao.nn.qat  # torch.nn.quantized, ...

softmax, log_softmax, dropout = nn.functional.softmax, nn.functional.log_softmax, nn.functional.dropout
conv2d, layer_norm, batch_norm = nn.functional.conv2d, nn.functional.layer_norm, nn.functional.batch_norm

from . import _inplace_names  # noqa: E402
from ._tensor import _inplace as _write_into  # noqa: E402

_inplace_names.install(globals(), Tensor, _write_into)

from . import _torch_more  # noqa: E402

_torch_more.install(globals(), Tensor)

from . import amp, cpu  # noqa: E402,F401  (torch.amp, torch.cpu.amp, torch.cuda.amp: mixed precision)
from .amp.autocast_mode import (autocast, autocast_decrement_nesting, autocast_increment_nesting,  # noqa: E402,F401
                                clear_autocast_cache, get_autocast_cpu_dtype, get_autocast_gpu_dtype,
                                is_autocast_cache_enabled, is_autocast_cpu_enabled, is_autocast_enabled,
                                set_autocast_cache_enabled, set_autocast_cpu_dtype, set_autocast_cpu_enabled,
                                set_autocast_enabled, set_autocast_gpu_dtype)

cuda.amp = amp.cuda
import sys as _sys  # noqa: E402

_sys.modules["oar.cuda"] = cuda  # so `import oar.cuda.amp` (and, under the switch, torch.cuda.amp) resolves
_sys.modules["oar.cuda.amp"] = amp.cuda

import os as _os  # noqa: E402

if _os.environ.get("OAR_MOCK_TORCH") == "1":  # `import torch` gives oar from here on
    mock_torch(enable=True)
