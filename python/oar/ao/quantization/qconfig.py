"""QConfig: which observers a module's activations and weights get (torch's names and defaults)."""
from collections import namedtuple

from . import fake_quantize as FQ
from . import observer as O


class QConfig(namedtuple("QConfig", ["activation", "weight"])):
    """activation and weight are observer factories (classes or with_args partials), not instances."""

    def __new__(cls, activation, weight):
        if isinstance(activation, O.ObserverBase) or isinstance(weight, O.ObserverBase):
            raise ValueError("QConfig received observer instance, please pass observer class instead. "
                             "Use MyObserver.with_args(x=1) to override arguments to constructor if needed")
        return super().__new__(cls, activation, weight)


default_qconfig = QConfig(activation=O.default_observer, weight=O.default_weight_observer)
default_dynamic_qconfig = QConfig(activation=O.default_dynamic_quant_observer, weight=O.default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=O.default_dynamic_quant_observer,
                                      weight=O.default_per_channel_weight_observer)
default_per_channel_qconfig = QConfig(activation=O.default_observer, weight=O.default_per_channel_weight_observer)
float16_static_qconfig = QConfig(activation=O.PlaceholderObserver.with_args(dtype=O.D.float16),
                                 weight=O.PlaceholderObserver.with_args(dtype=O.D.float16))

# the engines torch names; each selects torch's default qconfig for it, and all run on oar's int8 kernels
ENGINES = ("none", "fbgemm", "x86", "qnnpack", "onednn")


def get_default_qconfig(backend="fbgemm", version=0):
    """torch's default static-quantization qconfig for an engine: histogram-observed activations (7-bit
    on fbgemm and x86), per-channel weights but on qnnpack."""
    if backend not in ENGINES[1:]:
        raise AssertionError(f"backend: {backend} not supported. backend must be one of {list(ENGINES[1:])}")
    if version != 0:
        raise AssertionError(f"Version number: {version} in get_default_qconfig is not supported. Version number "
                             "must be 0")
    activation = O.HistogramObserver.with_args(reduce_range=backend in ("fbgemm", "x86"))
    weight = O.default_weight_observer if backend == "qnnpack" else O.default_per_channel_weight_observer
    return QConfig(activation=activation, weight=weight)


def get_default_qat_qconfig(backend="fbgemm", version=1):
    """torch's default QAT qconfig for an engine: fake quantizers with moving-average observers
    (7-bit activations but on qnnpack and onednn; per-channel weights but on qnnpack)."""
    if backend not in ENGINES[1:]:
        raise AssertionError(f"backend: {backend} not supported. backend must be one of {list(ENGINES[1:])}")
    make = FQ.FakeQuantize if version == 0 else FQ.FusedMovingAvgObsFakeQuantize
    activation = make.with_args(observer=O.MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                reduce_range=backend in ("fbgemm", "x86"))
    if backend == "qnnpack":
        weight = FQ.default_weight_fake_quant if version == 0 else FQ.default_fused_wt_fake_quant
    else:
        weight = (FQ.default_per_channel_weight_fake_quant if version == 0
                  else FQ.default_fused_per_channel_wt_fake_quant)
    return QConfig(activation=activation, weight=weight)


default_qat_qconfig = QConfig(activation=FQ.default_fake_quant, weight=FQ.default_weight_fake_quant)


def assert_valid_qconfig(qconfig, mod):
    return None
