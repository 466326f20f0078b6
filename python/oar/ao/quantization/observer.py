"""Observers with torch's names, defaults and arithmetic: they record the range of what passes
through them (min_val/max_val buffers, in state_dict as in torch) and turn it into a scale and
zero point (calculate_qparams), in float32 as torch does, so the same data gives the same bits."""
import math
import warnings
from functools import partial

import oar as T
from ... import _dtype as D
from ... import _qtensor as Q
from ...nn.modules.module import Module

_EPS = 2.0 ** -23  # torch.finfo(torch.float32).eps


def _with_args(cls, **kwargs):
    """cls.with_args(**kwargs): a factory making observers with these arguments (torch's _PartialWrapper)."""
    f = partial(cls, **kwargs)
    f.with_args = lambda **more: _with_args(cls, **{**kwargs, **more})
    return f


def qmin_qmax(dtype, reduce_range, quant_min=None, quant_max=None):
    """torch's code range of an observer: the dtype's, or a custom [quant_min, quant_max], halved by
    reduce_range (fbgemm's 7-bit activations) in both cases."""
    if quant_min is not None and quant_max is not None:
        if not quant_min <= 0 <= quant_max:
            raise ValueError(f"observer: the quantization range must include 0, got [{quant_min}, {quant_max}]")
        if dtype is Q.qint8 and quant_max - quant_min + 1 > 256:
            raise ValueError(f"observer: a qint8 range holds at most 256 codes, got [{quant_min}, {quant_max}]")
        lo, hi = quant_min, quant_max
    elif dtype is Q.qint8:
        lo, hi = -128, 127
    elif dtype is Q.quint8:
        lo, hi = 0, 255
    else:
        lo, hi = Q.qint32.qmin, Q.qint32.qmax
    return (lo // 2, hi // 2) if reduce_range else (lo, hi)


class ObserverBase(Module):
    with_args = classmethod(_with_args)

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype


class _UniformObserver(ObserverBase):
    _per_channel = False

    def __init__(self, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS):
        super().__init__(dtype)
        if dtype not in (Q.quint8, Q.qint8, Q.qint32):
            raise ValueError(f"{type(self).__name__}: expected dtype torch.quint8, torch.qint8 or torch.qint32, "
                             f"got {dtype!r}")
        allowed = ((Q.per_channel_affine, Q.per_channel_symmetric, Q.per_channel_affine_float_qparams)
                   if self._per_channel else (Q.per_tensor_affine, Q.per_tensor_symmetric))
        if qscheme not in allowed:
            raise NotImplementedError(f"{type(self).__name__}: qscheme {qscheme!r} is not one of "
                                      f"{', '.join(map(repr, allowed))}")
        self.qscheme, self.reduce_range = qscheme, reduce_range
        self.register_buffer("eps", T.tensor([float(eps)]))
        self.has_customized_qrange = quant_min is not None and quant_max is not None
        self.quant_min, self.quant_max = qmin_qmax(dtype, reduce_range, quant_min, quant_max)

    def _symmetric(self):
        return self.qscheme in (Q.per_tensor_symmetric, Q.per_channel_symmetric)

    def _calculate_qparams(self, min_val, max_val):
        """torch's formula, in float32 tensors: affine spans [min(min, 0), max(max, 0)] over the codes,
        symmetric spans +-max|.| around the middle code."""
        if not _seen(min_val, max_val):
            warnings.warn("must run observer before calling calculate_qparams. Returning default values.")
            return T.tensor([1.0]), T.tensor([0], dtype=D.int64)
        qmin, qmax = self.quant_min, self.quant_max
        lo = T.minimum(min_val, T.zeros_like(min_val))
        hi = T.maximum(max_val, T.zeros_like(max_val))
        eps = self.eps.reshape(())
        if self._symmetric():
            scale = T.maximum(T.maximum(-lo, hi) / (float(qmax - qmin) / 2), eps)
            mid = (qmin + qmax) // 2 if self.has_customized_qrange else 128
            zero_point = T.full_like(scale, mid if self.dtype is Q.quint8 else 0, dtype=D.int64)
        elif self.qscheme is Q.per_channel_affine_float_qparams:
            scale = (max_val - min_val) / float(qmax - qmin)
            scale = T.where(scale > eps, scale, T.ones_like(scale))
            zero_point = -1 * min_val / scale
        else:
            scale = T.maximum((hi - lo) / float(qmax - qmin), eps)
            zero_point = T.clamp(qmin - T.round(lo / scale).to(D.int32), qmin, qmax)
        if scale.ndim == 0:
            scale, zero_point = scale.reshape(1), zero_point.reshape(1)
        return scale, zero_point

    def calculate_qparams(self):
        return self._calculate_qparams(self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"

    def reset_min_max_vals(self):
        self.min_val.fill_(math.inf)
        self.max_val.fill_(-math.inf)


def _seen(min_val, max_val):
    if min_val.numel() == 0 or max_val.numel() == 0:
        return False
    return all(math.isfinite(v) for t in (min_val, max_val) for v in t.reshape(-1).tolist())


def _moving_average(obs, lo, hi):
    """the moving observers' update: the first batch's range, then an exponential moving average of
    each batch's (per tensor or per channel alike: nothing observed yet is an empty or infinite range)"""
    if not _seen(obs.min_val, obs.max_val):
        obs.min_val, obs.max_val = lo, hi
    else:
        c = obs.averaging_constant
        obs.min_val = obs.min_val + c * (lo - obs.min_val)
        obs.max_val = obs.max_val + c * (hi - obs.max_val)


class MinMaxObserver(_UniformObserver):
    """The running minimum and maximum of everything observed."""

    def __init__(self, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps)
        self.register_buffer("min_val", T.tensor(math.inf))
        self.register_buffer("max_val", T.tensor(-math.inf))

    def _update(self, lo, hi):
        self.min_val = T.minimum(lo, self.min_val)
        self.max_val = T.maximum(hi, self.max_val)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(D.float32)
        self._update(T.amin(x), T.amax(x))
        return x_orig


class MovingAverageMinMaxObserver(MinMaxObserver):
    """An exponential moving average of each batch's minimum and maximum (the first batch sets them)."""

    def __init__(self, averaging_constant=0.01, dtype=Q.quint8, qscheme=Q.per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=_EPS, **kwargs):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, None, eps)
        self.averaging_constant = averaging_constant

    _update = _moving_average


class PerChannelMinMaxObserver(_UniformObserver):
    """The minimum and maximum of each slice along ch_axis (weights: one scale per output channel)."""

    _per_channel = True

    def __init__(self, ch_axis=0, dtype=Q.quint8, qscheme=Q.per_channel_affine, reduce_range=False, quant_min=None,
                 quant_max=None, factory_kwargs=None, eps=_EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps)
        self.ch_axis = ch_axis
        self.register_buffer("min_val", T.tensor([]))
        self.register_buffer("max_val", T.tensor([]))

    def _update(self, lo, hi):
        if self.min_val.numel() == 0:
            self.min_val, self.max_val = lo, hi
        else:
            self.min_val, self.max_val = T.minimum(lo, self.min_val), T.maximum(hi, self.max_val)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(D.float32)
        axis = self.ch_axis % x.ndim
        rows = x.transpose(0, axis).reshape(x.shape[axis], -1)
        self._update(T.amin(rows, 1), T.amax(rows, 1))
        return x_orig


class MovingAveragePerChannelMinMaxObserver(PerChannelMinMaxObserver):
    def __init__(self, averaging_constant=0.01, ch_axis=0, dtype=Q.quint8, qscheme=Q.per_channel_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=_EPS, **kwargs):
        super().__init__(ch_axis, dtype, qscheme, reduce_range, quant_min, quant_max, None, eps)
        self.averaging_constant = averaging_constant

    _update = _moving_average


class PlaceholderObserver(ObserverBase):
    """Records nothing; carries a dtype (float16 for fp16 static quantization, or a fixed map)."""

    def __init__(self, dtype=D.float32, custom_op_name="", compute_dtype=None):
        super().__init__(dtype)

    def forward(self, x):
        return x

    def calculate_qparams(self):
        raise Exception("calculate_qparams should not be called for PlaceholderObserver")


class NoopObserver(PlaceholderObserver):
    def __init__(self, dtype=D.float16, custom_op_name=""):
        super().__init__(dtype)


class FixedQParamsObserver(ObserverBase):
    """A fixed scale and zero point (sigmoid's [0, 1), tanh's [-1, 1])."""

    def __init__(self, scale, zero_point, dtype=Q.quint8, qscheme=Q.per_tensor_affine, quant_min=0, quant_max=255):
        super().__init__(dtype)
        self.quant_min, self.quant_max, self.qscheme = quant_min, quant_max, qscheme
        self.register_buffer("scale", T.tensor([scale]))
        self.register_buffer("zero_point", T.tensor([zero_point], dtype=D.int32))

    def forward(self, x):
        return x

    def calculate_qparams(self):
        return self.scale, self.zero_point


default_observer = MinMaxObserver.with_args(quant_min=0, quant_max=127)
default_weight_observer = MinMaxObserver.with_args(dtype=Q.qint8, qscheme=Q.per_tensor_symmetric)
default_per_channel_weight_observer = PerChannelMinMaxObserver.with_args(dtype=Q.qint8,
                                                                         qscheme=Q.per_channel_symmetric)
weight_observer_range_neg_127_to_127 = MinMaxObserver.with_args(dtype=Q.qint8, qscheme=Q.per_tensor_symmetric,
                                                                quant_min=-127, quant_max=127, eps=2 ** -12)
default_placeholder_observer = PlaceholderObserver
default_debug_observer = None
default_float_qparams_observer = PerChannelMinMaxObserver.with_args(
    dtype=Q.quint8, qscheme=Q.per_channel_affine_float_qparams, ch_axis=0)
default_fixed_qparams_range_0to1_observer = FixedQParamsObserver.with_args(scale=1.0 / 256.0, zero_point=0)
default_fixed_qparams_range_neg1to1_observer = FixedQParamsObserver.with_args(scale=2.0 / 256.0, zero_point=128)
default_dynamic_quant_observer = PlaceholderObserver.with_args(dtype=Q.quint8)


class HistogramObserver(_UniformObserver):
    """torch's histogram observer: a 2048-bin histogram of everything observed (re-binned onto a
    common grid when the range grows), then the range [min, max] chosen by torch's greedy search,
    which trims bins from the end holding less mass while the L2 error of quantizing the histogram
    with dst_nbins levels falls. As torch 1.13, each batch is binned over int(min)..int(max) (its
    histc call truncates the range): kept for torch's numbers."""

    def __init__(self, bins=2048, upsample_rate=128, dtype=Q.quint8, qscheme=Q.per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS):
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps)
        self.bins, self.upsample_rate = bins, upsample_rate
        self.register_buffer("histogram", T.zeros(bins))
        self.register_buffer("min_val", T.tensor(math.inf))
        self.register_buffer("max_val", T.tensor(-math.inf))
        self.dst_nbins = 2 ** (8 * dtype.itemsize)

    def forward(self, x_orig):
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach().to(D.float32)
        lo, hi = self.min_val.item(), self.max_val.item()
        if (lo == math.inf and hi == -math.inf) or lo == hi:
            self.min_val, self.max_val = T.amin(x), T.amax(x)
            self.histogram = T.histc(x, self.bins, min=int(self.min_val.item()), max=int(self.max_val.item()))
            return x_orig
        new_min, new_max = T.amin(x), T.amax(x)
        lo_t, hi_t = T.minimum(new_min, self.min_val), T.maximum(new_max, self.max_val)
        lo_t, hi_t, downsample, start = self._adjust_min_max(lo_t, hi_t)
        hist = T.histc(x, self.bins, min=int(lo_t.item()), max=int(hi_t.item()))
        if lo_t.item() == lo and hi_t.item() == hi:
            hist = hist + self.histogram
        else:
            hist = self._combine(hist, self.histogram, downsample, start)
        self.histogram, self.min_val, self.max_val = hist, lo_t, hi_t
        return x_orig

    def _adjust_min_max(self, lo, hi):
        """the combined range widened at the top so that the old bins, cut upsample_rate times finer,
        fall on whole cells of it: (min, max, downsample rate, the old min's cell)"""
        cell = (self.max_val - self.min_val) / (self.bins * self.upsample_rate)
        downsample = int(math.ceil(((hi - lo) / (self.bins * cell)).item()))
        hi = hi + (downsample * (self.bins * cell) - (hi - lo))
        start = int(T.round((self.min_val - lo) / cell).item())
        return lo, hi, downsample, start

    def _combine(self, hist, old, downsample, start):
        """the old histogram spread evenly over upsample_rate cells per bin, placed at its offset on
        the combined grid, summed back per downsample cells (in float64: the sums are long), added"""
        up = self.upsample_rate
        fine = T.zeros(self.bins * downsample)
        fine[start:self.bins * up + start] = T.repeat_interleave(old, up)
        integral = T.cumsum(fine, 0, dtype=D.float64)[downsample - 1::downsample]
        shifted = T.zeros(self.bins, dtype=D.float64)
        shifted[1:self.bins] = integral[0:-1]
        return hist + ((integral - shifted) / up).to(D.float32)

    @staticmethod
    def _norm(delta_begin, delta_end, density):
        """L2 error of values spread evenly with this density between the two offsets from a level"""
        return density * ((delta_end * delta_end * delta_end - delta_begin * delta_begin * delta_begin) / 3)

    def _error(self, start_bin, end_bin):
        """the L2 error of quantizing the histogram with dst_nbins levels over bins start..end"""
        bin_width = (self.max_val.item() - self.min_val.item()) / self.bins
        dst = bin_width * (end_bin - start_bin + 1) / self.dst_nbins
        if dst == 0.0:
            return 0.0
        begin = (T.arange(self.bins) - start_bin) * bin_width
        end = begin + bin_width
        dst_of_begin = T.clamp(T.div(begin, dst, rounding_mode="floor"), 0, self.dst_nbins - 1)
        dst_of_end = T.clamp(T.div(end, dst, rounding_mode="floor"), 0, self.dst_nbins - 1)
        density = self.histogram / bin_width
        half = T.tensor(dst / 2)
        norm = self._norm(begin - (dst_of_begin + 0.5) * dst, T.ones(self.bins) * (dst / 2), density)
        norm = norm + (dst_of_end - dst_of_begin - 1) * self._norm(-half, half, density)
        norm = norm + self._norm(T.tensor(-dst / 2), end - (dst_of_end * dst + dst / 2), density)
        return norm.sum().item()

    def _search(self):
        """torch's greedy trim: step the quantile bounds by 1e-5, move the end whose bin moves further,
        stop when the error rises"""
        bin_width = (self.max_val - self.min_val) / self.bins
        total = self.histogram.sum().item()
        csum = T.cumsum(self.histogram, 0).tolist()
        f32 = lambda v: float(T.tensor(v).item())  # torch compares the float32 sums with float32 bounds
        alpha, beta, start, end, best = 0.0, 1.0, 0, self.bins - 1, math.inf
        while alpha < beta:
            next_alpha, next_beta = alpha + 1e-5, beta - 1e-5
            lo, hi = start, end
            while lo < end and csum[lo] < f32(next_alpha * total):
                lo += 1
            while hi > start and csum[hi] > f32(next_beta * total):
                hi -= 1
            next_start, next_end = start, end
            if lo - start > end - hi:
                next_start, alpha = lo, next_alpha
            else:
                next_end, beta = hi, next_beta
            if next_start == start and next_end == end:
                continue
            norm = self._error(next_start, next_end)
            if norm > best:
                break
            best, start, end = norm, next_start, next_end
        return self.min_val + bin_width * start, self.min_val + bin_width * (end + 1)

    def calculate_qparams(self):
        if self.min_val.item() == math.inf and self.max_val.item() == -math.inf:
            warnings.warn("must run observer before calling calculate_qparams. Returning default scale and zero point")
            return T.tensor([1.0]), T.tensor([0])
        return self._calculate_qparams(*self._search())

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


default_histogram_observer = HistogramObserver.with_args(quant_min=0, quant_max=127)
