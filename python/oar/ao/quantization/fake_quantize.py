"""FakeQuantize: quantization simulated in float during quantization-aware training, as torch's.
Each call observes its input (while the observer is on), sets the scale and zero point from the
observer, and returns the input rounded to that grid (oar's fake_quant op: the gradient passes
straight through where the value was not clamped)."""
import math

import oar as T
from ... import _dtype as D
from ... import _qtensor as Q
from ..._ops import call
from ...nn.modules.module import Module
from . import observer as O


class FakeQuantizeBase(Module):
    with_args = classmethod(O._with_args)

    def __init__(self):
        super().__init__()
        self.register_buffer("fake_quant_enabled", T.tensor([1], dtype=D.uint8))
        self.register_buffer("observer_enabled", T.tensor([1], dtype=D.uint8))

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled.fill_(1 if enabled else 0)
        return self

    def disable_fake_quant(self):
        return self.enable_fake_quant(False)

    def enable_observer(self, enabled=True):
        self.observer_enabled.fill_(1 if enabled else 0)
        return self

    def disable_observer(self):
        return self.enable_observer(False)


class FakeQuantize(FakeQuantizeBase):
    def __init__(self, observer=O.MovingAverageMinMaxObserver, quant_min=None, quant_max=None, **observer_kwargs):
        super().__init__()
        if quant_min is not None and quant_max is not None:
            if quant_min > quant_max:
                raise ValueError(f"FakeQuantize: quant_min ({quant_min}) must be <= quant_max ({quant_max})")
            observer_kwargs.update(quant_min=quant_min, quant_max=quant_max)
        self.activation_post_process = observer(**observer_kwargs)
        obs = self.activation_post_process
        self.quant_min, self.quant_max = obs.quant_min, obs.quant_max
        self.dtype, self.qscheme = obs.dtype, obs.qscheme
        self.is_per_channel = obs.qscheme in (Q.per_channel_affine, Q.per_channel_symmetric,
                                              Q.per_channel_affine_float_qparams)
        self.ch_axis = obs.ch_axis if self.is_per_channel else -1
        self.register_buffer("scale", T.tensor([1.0]))
        self.register_buffer("zero_point", T.tensor([0], dtype=D.int32))

    def calculate_qparams(self):
        return self.activation_post_process.calculate_qparams()

    def forward(self, X):
        if int(self.observer_enabled[0].item()) == 1:
            self.activation_post_process(X.detach())
            self.scale, self.zero_point = self.calculate_qparams()
            self.zero_point = self.zero_point.to(D.int32)
        if int(self.fake_quant_enabled[0].item()) == 1:
            s, z = (self.scale, self.zero_point) if self.is_per_channel else (self.scale.reshape(()),
                                                                              self.zero_point.reshape(()))
            axis = self.ch_axis % X.ndim if self.is_per_channel else -1
            X = call("fake_quant", (X, s, z), {"axis": axis, "quant_min": self.quant_min,
                                               "quant_max": self.quant_max})
        return X

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled={self.observer_enabled}, "
                f"quant_min={self.quant_min}, quant_max={self.quant_max}, dtype={self.dtype}, "
                f"qscheme={self.qscheme}, ch_axis={self.ch_axis}, scale={self.scale}, zero_point={self.zero_point}")


class FusedMovingAvgObsFakeQuantize(FakeQuantize):
    """torch's fused kernel of a moving-average observer and a fake quantizer (the default of
    get_default_qat_qconfig). Its scale and zero point come from the quantization utilities' choice
    (choose_qparams below), not the observer's calculate_qparams: the two differ, symmetric weights
    most (max|w| / 127 against / 127.5), so torch's training numbers need this one."""

    def __init__(self, observer=O.MovingAverageMinMaxObserver, quant_min=0, quant_max=255, **observer_kwargs):
        super().__init__(observer, quant_min, quant_max, **observer_kwargs)

    def calculate_qparams(self):
        obs = self.activation_post_process
        symmetric = obs.qscheme in (Q.per_tensor_symmetric, Q.per_channel_symmetric)
        return choose_qparams(obs.min_val, obs.max_val, self.quant_min, self.quant_max, symmetric)


_SMALL_SCALE = 6.1e-5  # the utilities' floor for a scale


def choose_qparams(min_val, max_val, qmin, qmax, symmetric):
    """torch's ChooseQuantizationParams per value of min_val/max_val (float32 tensors): a symmetric
    range spans [-128, 127] * max(|min| / 128, max / 127); the range is widened to hold 0; the scale is
    (max - min) / (qmax - qmin) in double; scales below 6.1e-5 are raised to it with the range widened;
    the zero point comes from the end whose code is the more exact, rounded half to even and clamped."""
    scales, zero_points = [], []
    f32 = lambda v: float(T.tensor(v, dtype=D.float32).item())  # the utilities keep min and max in float
    for lo, hi in zip(min_val.reshape(-1).tolist(), max_val.reshape(-1).tolist()):
        if symmetric and lo < 0 < hi:
            sym_min, sym_max = -((qmax - qmin) // 2 + 1), (qmax - qmin) // 2
            widest = max(abs(lo / sym_min), abs(hi / sym_max))
            lo, hi = f32(widest * sym_min), f32(widest * sym_max)
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = (hi - lo) / (qmax - qmin)
        if f32(scale) == 0.0 or math.isinf(f32(1.0 / f32(scale))):
            scale = 0.1
        if scale < f32(_SMALL_SCALE):
            small, scale = scale, f32(_SMALL_SCALE)
            if lo == 0.0:
                hi = f32(scale * (qmax - qmin))
            elif hi == 0.0:
                lo = f32(-scale * (qmax - qmin))
            else:
                lo, hi = f32(lo * f32(scale / small)), f32(hi * f32(scale / small))
        from_min, from_max = qmin - lo / scale, qmax - hi / scale
        exact_min, exact_max = abs(qmin) - abs(lo / scale), abs(qmax) - abs(hi / scale)
        zp = from_min if exact_min < exact_max else from_max
        if symmetric and lo < 0 < hi:
            zp = (qmin + qmax) / 2
        zero_points.append(qmin if zp < qmin else qmax if zp > qmax else round(zp))
        scales.append(scale)
    return T.tensor(scales, dtype=D.float32), T.tensor(zero_points, dtype=D.int32)


class FixedQParamsFakeQuantize(FakeQuantize):
    """A fixed scale and zero point (the outputs of sigmoid, hardsigmoid, softmax, tanh)."""

    def __init__(self, observer):
        super().__init__(observer=observer)
        self.scale, self.zero_point = self.activation_post_process.calculate_qparams()

    def calculate_qparams(self):
        return self.scale, self.zero_point


default_fake_quant = FakeQuantize.with_args(observer=O.MovingAverageMinMaxObserver, quant_min=0, quant_max=255,
                                            dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=True)
default_weight_fake_quant = FakeQuantize.with_args(observer=O.MovingAverageMinMaxObserver, quant_min=-128,
                                                   quant_max=127, dtype=Q.qint8, qscheme=Q.per_tensor_symmetric,
                                                   reduce_range=False)
default_per_channel_weight_fake_quant = FakeQuantize.with_args(observer=O.MovingAveragePerChannelMinMaxObserver,
                                                               quant_min=-128, quant_max=127, dtype=Q.qint8,
                                                               qscheme=Q.per_channel_symmetric, reduce_range=False,
                                                               ch_axis=0)
default_fused_act_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(observer=O.MovingAverageMinMaxObserver,
                                                                       quant_min=0, quant_max=255, dtype=Q.quint8)
default_fused_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(observer=O.MovingAverageMinMaxObserver,
                                                                      quant_min=-128, quant_max=127, dtype=Q.qint8,
                                                                      qscheme=Q.per_tensor_symmetric)
default_fused_per_channel_wt_fake_quant = FusedMovingAvgObsFakeQuantize.with_args(
    observer=O.MovingAveragePerChannelMinMaxObserver, quant_min=-128, quant_max=127, dtype=Q.qint8,
    qscheme=Q.per_channel_symmetric)
default_fixed_qparams_range_0to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=O.default_fixed_qparams_range_0to1_observer)
default_fixed_qparams_range_neg1to1_fake_quant = FixedQParamsFakeQuantize.with_args(
    observer=O.default_fixed_qparams_range_neg1to1_observer)


def disable_fake_quant(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.disable_fake_quant()


def enable_fake_quant(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.enable_fake_quant()


def disable_observer(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.disable_observer()


def enable_observer(mod):
    if isinstance(mod, FakeQuantizeBase):
        mod.enable_observer()
