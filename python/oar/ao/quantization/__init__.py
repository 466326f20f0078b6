"""torch.ao.quantization (and torch.quantization): PyTorch's eager quantization on oar's int8 ops:
QConfig, observers and fake quantizers, fuse_modules, prepare / calibrate / convert (static),
prepare_qat (quantization-aware training) and quantize_dynamic. docs/python.md says what is
covered; oar's own tools (docs/quant.md) quantize compiled programs."""
from .fake_quantize import *  # noqa: F401,F403
from .fake_quantize import FakeQuantizeBase, choose_qparams  # noqa: F401
from .fuse_modules import fuse_conv_bn_eval, fuse_known_modules, fuse_modules, fuse_modules_qat  # noqa: F401
from .observer import *  # noqa: F401,F403
from .observer import ObserverBase, _with_args  # noqa: F401
from .qconfig import (QConfig, assert_valid_qconfig, default_dynamic_qconfig, default_per_channel_qconfig,  # noqa: F401
                      default_qat_qconfig, default_qconfig, float16_static_qconfig, get_default_qat_qconfig,
                      get_default_qconfig, per_channel_dynamic_qconfig)
from .quantize import (convert, get_default_dynamic_quant_module_mappings, get_default_qat_module_mappings,  # noqa: F401
                       get_default_qconfig_propagation_list, get_default_static_quant_module_mappings, prepare,
                       prepare_qat, propagate_qconfig_, quantize, quantize_dynamic, quantize_qat)
from .stubs import DeQuantStub, QuantStub, QuantWrapper  # noqa: F401
