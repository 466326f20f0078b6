"""torch.nn.quantized: the modules convert() puts in place of float ones. Each runs one of oar's
int8 ops (docs/quant.md): qconv2d and qlinear sum in int32 exactly and requantize in f32 with
the bias in the epilogue; qadd adds two quantized tensors; qmax_pool2d pools codes. Weights are
quantized once, when the module is made from its float form (from_float)."""
import oar as T
from .... import _dtype as D
from .... import _qtensor as Q
from ...._ops import call
from ....nn.modules.module import Module
from . import _state as S

_NONE, _RELU = 0, 1


def _qparams(observer):
    scale, zero_point = observer.calculate_qparams()
    return float(scale.reshape(-1)[0].item()), int(zero_point.reshape(-1)[0].item())


def _quantize_weight(weight, observer):
    """The float weight's codes with the weight observer's parameters (per tensor or per channel)."""
    observer(weight)
    scale, zero_point = observer.calculate_qparams()
    if observer.dtype is not Q.qint8:
        raise ValueError(f"quantized weights must be torch.qint8, got {observer.dtype!r} from {type(observer).__name__}")
    if bool((zero_point != 0).any().item()):
        raise ValueError("oar's int8 kernels take symmetric weights (zero point 0): use a symmetric weight observer "
                         "(default_weight_observer or default_per_channel_weight_observer)")
    if observer.qscheme in (Q.per_channel_affine, Q.per_channel_symmetric):
        return Q.quantize_per_channel(weight.detach(), scale, zero_point, observer.ch_axis, Q.qint8)
    return Q.quantize_per_tensor(weight.detach(), float(scale.item()), int(zero_point.item()), Q.qint8)


def _input(x, what):
    if type(x) is not Q.QTensor:
        raise TypeError(f"{what}: expected a quantized tensor (from a QuantStub / quantize_per_tensor), got "
                        f"{type(x).__name__}; a float model needs torch.ao.quantization.convert() first")
    x._per_tensor(what)
    if x.dtype is not Q.quint8:
        raise TypeError(f"{what}: expected a torch.quint8 input, got {x.dtype!r}")
    return x


class _Named:
    """torch prints a converted model's layers as Quantized<Name>(...) (DeQuantize and Quantize keep theirs)"""

    def _get_name(self):
        return "Quantized" + type(self).__name__


class Quantize(Module):
    def __init__(self, scale, zero_point, dtype, factory_kwargs=None):
        super().__init__()
        self.register_buffer("scale", T.tensor([float(scale)]))
        self.register_buffer("zero_point", T.tensor([int(zero_point)], dtype=D.int64))
        self.dtype = dtype

    def forward(self, X):
        return Q.quantize_per_tensor(X, self.scale, self.zero_point, self.dtype)

    @staticmethod
    def from_float(mod):
        scale, zero_point = _qparams(mod.activation_post_process)
        return Quantize(scale, zero_point, mod.activation_post_process.dtype)

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(Module):
    def forward(self, Xq):
        return Xq.dequantize()

    @staticmethod
    def from_float(mod):
        return DeQuantize()


class _OutParamsState:
    """torch keeps these modules' output scale and zero point in the state_dict (0-d float32 / int64)"""

    def _out_param_tensors(self):
        return T.tensor(float(self.scale)), T.tensor(int(self.zero_point), dtype=D.int64)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "scale"], destination[prefix + "zero_point"] = self._out_param_tensors()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        S.load_out_params(self, state_dict, prefix, missing_keys, error_msgs)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _WeightedModule(_Named, Module):
    """Shared by Conv2d and Linear: a qint8 weight, a float bias, the output's scale and zero point."""

    _activation = _NONE

    def _set(self, qweight, bias, scale, zero_point):
        self._qweight, self.bias_ = qweight, bias
        self.scale, self.zero_point = float(scale), int(zero_point)

    def weight(self):
        return self._qweight

    def bias(self):
        return self.bias_

    def _out_params(self):
        return T.tensor(self.scale), T.tensor(self.zero_point, dtype=D.int32)

    def _load_weight_bias(self, weight, bias, weight_key, bias_key, error_msgs):
        """the checkpoint's weight and bias, each checked against this layer's geometry (both or neither taken)"""
        w = S.qweight(weight, weight_key, self._qweight.shape, error_msgs)
        ok, b = S.bias(bias, bias_key, self._qweight.shape[0], error_msgs)
        if w is not None and ok:
            self._qweight, self.bias_ = w, b

    @classmethod
    def _from_float(cls, mod, float_types):
        """(the module with the layer's geometry, its quantized weight, float bias, output scale, zero point)
        from a prepared float module, a fused one, or a QAT one (whose weight quantizer has learned its grid;
        a trained BatchNorm is folded in first)."""
        if not hasattr(mod, "qconfig") or mod.qconfig is None:
            raise AssertionError("Input float module must have qconfig defined")
        if not hasattr(mod, "activation_post_process"):
            raise AssertionError("Input float module must have observer attached: run "
                                 "torch.ao.quantization.prepare() and calibrate before convert()")
        if hasattr(mod, "weight_fake_quant"):
            inner = mod
            weight, bias = mod.folded() if hasattr(mod, "folded") else (mod.weight, mod.bias)
            weight_observer = mod.weight_fake_quant
        else:
            inner = mod[0] if type(mod).__name__ in ("ConvReLU2d", "LinearReLU") else mod
            if type(inner).__name__ not in float_types:
                raise TypeError(f"{cls.__name__}.from_float: expected {' or '.join(float_types)}, got "
                                f"{type(inner).__name__}")
            weight, bias, weight_observer = inner.weight, inner.bias, mod.qconfig.weight()
        qweight = _quantize_weight(weight.detach(), weight_observer)
        scale, zero_point = _qparams(mod.activation_post_process)
        return inner, qweight, None if bias is None else bias.detach().to(D.float32), scale, zero_point


class Conv2d(_WeightedModule):
    """An int8 convolution: quint8 input, qint8 weight (per tensor or per output channel), float
    bias, quint8 output with the observed scale and zero point."""

    _FLOAT_MODULE = ("Conv2d",)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)
        if padding_mode != "zeros":
            raise NotImplementedError(f"quantized Conv2d: padding_mode '{padding_mode}' is not offered")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.padding, self.dilation = (pair(kernel_size), pair(stride), pair(padding),
                                                                      pair(dilation))
        self.padding_mode = padding_mode
        w = Q.quantize_per_tensor(T.zeros(out_channels, in_channels // groups, *self.kernel_size), 1.0, 0, Q.qint8)
        self._set(w, T.zeros(out_channels) if bias else None, 1.0, 0)

    def forward(self, input):
        x = _input(input, type(self).__name__)
        w = self._qweight
        ys, yzp = self._out_params()
        codes = call("qconv2d", (x.codes, x._scale, x._zero_point, w.codes, w._scale, self.bias_, ys, yzp, None),
                     {"stride": self.stride, "padding": self.padding, "dilation": self.dilation,
                      "groups": self.groups, "activation": self._activation, "dtype": D.uint8.code})
        return Q.QTensor(codes, ys, yzp, None, Q.quint8)

    @classmethod
    def from_float(cls, mod):
        conv, qweight, bias, scale, zero_point = cls._from_float(mod, cls._FLOAT_MODULE)
        if isinstance(conv.padding, str):
            raise NotImplementedError(f"quantized Conv2d: padding='{conv.padding}' is not offered; give the padding "
                                      "as numbers")
        q = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                conv.groups, conv.bias is not None, conv.padding_mode)
        q._set(qweight, bias, scale, zero_point)
        return q

    # torch's keys: weight (quantized), bias, scale, zero_point
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "weight"], destination[prefix + "bias"] = self._qweight, self.bias_
        S.save_out_params(destination, prefix, self.scale, self.zero_point)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        weight, bias = (S.take(state_dict, prefix + k, missing_keys) for k in ("weight", "bias"))
        self._load_weight_bias(weight, bias, prefix + "weight", prefix + "bias", error_msgs)
        S.load_out_params(self, state_dict, prefix, missing_keys, error_msgs)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self):  # torch's order; padding, dilation and groups only where not the default
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
             f"scale={self.scale}, zero_point={self.zero_point}")
        if any(self.padding):
            s += f", padding={self.padding}"
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + (", bias=False" if self.bias_ is None else "")


class Linear(_WeightedModule):
    """An int8 linear layer: quint8 input, qint8 weight, float bias, quint8 output."""

    _FLOAT_MODULE = ("Linear",)

    def __init__(self, in_features, out_features, bias_=True, dtype=Q.qint8):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        w = Q.quantize_per_tensor(T.zeros(out_features, in_features), 1.0, 0, Q.qint8)
        self._set(w, T.zeros(out_features) if bias_ else None, 1.0, 0)

    def forward(self, x):
        x = _input(x, type(self).__name__)
        w = self._qweight
        ys, yzp = self._out_params()
        codes = call("qlinear", (x.codes, x._scale, x._zero_point, w.codes, w._scale, self.bias_, ys, yzp, None),
                     {"activation": self._activation, "dtype": D.uint8.code})
        return Q.QTensor(codes, ys, yzp, None, Q.quint8)

    @classmethod
    def from_float(cls, mod):
        lin, qweight, bias, scale, zero_point = cls._from_float(mod, cls._FLOAT_MODULE)
        q = cls(lin.in_features, lin.out_features, lin.bias is not None)
        q._set(qweight, bias, scale, zero_point)
        return q

    # torch's keys: scale, zero_point, then its LinearPackedParams' dtype and (weight, bias) under _packed_params
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        S.save_out_params(destination, prefix, self.scale, self.zero_point)
        destination[prefix + "_packed_params.dtype"] = Q.qint8
        destination[prefix + "_packed_params._packed_params"] = (self._qweight, self.bias_)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        S.load_out_params(self, state_dict, prefix, missing_keys, error_msgs)
        key = prefix + "_packed_params."
        dtype = S.take(state_dict, key + "dtype", missing_keys)
        if dtype is not S._MISSING and not S.is_qint8(dtype):
            error_msgs.append(f"dtype mismatch for {key}dtype: the checkpoint's packed weights are {dtype}, oar's "
                              "quantized Linear takes torch.qint8 (float16 dynamic quantization is not offered).")
        packed = S.take(state_dict, key + "_packed_params", missing_keys)
        if packed is not S._MISSING:
            if isinstance(packed, (tuple, list)) and len(packed) == 2:
                self._load_weight_bias(packed[0], packed[1], key + "_packed_params[0] (weight)",
                                       key + "_packed_params[1] (bias)", error_msgs)
            else:
                error_msgs.append(f'While copying the parameter named "{key}_packed_params", expected a (weight, bias) '
                                  f"pair from checkpoint but received {type(packed).__name__}.")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, scale={self.scale}, "
                f"zero_point={self.zero_point}, qscheme={self._qweight.qscheme()!r}")


class _Lut(_Named, Module):
    """An elementwise function of a quantized tensor as a 256-entry table (oar's qlut): each code's
    value through the float function, quantized with the output's parameters, as torch computes it."""

    def __init__(self, scale, zero_point):
        super().__init__()
        self.scale, self.zero_point = float(scale), int(zero_point)

    def forward(self, input):
        return Q.lut(_input(input, type(self).__name__), self._float, self.scale, self.zero_point,
                     key=(type(self), self._lut_args()))

    def _lut_args(self):
        """what the table depends on besides the grids (a cached table is reused only when these match)"""
        return ()

    @classmethod
    def from_float(cls, mod):
        return cls(*_qparams(mod.activation_post_process))

    def extra_repr(self):  # torch shows the float module's arguments, not the output grid
        return ""


class Hardswish(_Lut):
    _float = staticmethod(lambda v: T.nn.functional.hardswish(v))


class ReLU6(_Lut):
    def __init__(self, inplace=False):
        super().__init__(1.0, 0)

    def forward(self, input):
        x = _input(input, "ReLU6")
        lo = x.q_zero_point()
        hi = min(255, lo + int(round(6.0 / x.q_scale())))  # the code of 6 (torch rounds the same way)
        return x._like(T.clamp(x.codes.to(D.int32), lo, hi).to(D.uint8))

    @classmethod
    def from_float(cls, mod):
        return cls()


class ELU(_Lut):
    def __init__(self, scale, zero_point, alpha=1.0):
        super().__init__(scale, zero_point)
        self.alpha = alpha

    def _float(self, v):
        return T.nn.functional.elu(v, self.alpha)

    def _lut_args(self):
        return (self.alpha,)

    def extra_repr(self):
        return f"alpha={self.alpha}"

    @classmethod
    def from_float(cls, mod):
        return cls(*_qparams(mod.activation_post_process), mod.alpha)


class LeakyReLU(_OutParamsState, _Lut):  # torch keeps its scale in the state (Hardswish and ELU do not)
    def __init__(self, scale, zero_point, negative_slope=0.01, inplace=False, device=None, dtype=None):
        super().__init__(scale, zero_point)
        self.negative_slope = negative_slope

    def _float(self, v):
        return T.nn.functional.leaky_relu(v, self.negative_slope)

    def _lut_args(self):
        return (self.negative_slope,)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"

    @classmethod
    def from_float(cls, mod):
        return cls(*_qparams(mod.activation_post_process), mod.negative_slope)


class FloatFunctional(Module):
    """Adds, multiplies and concatenates float tensors in a model that will be quantized: the
    results pass its activation_post_process (an observer once prepared), and convert() makes it a
    QFunctional that does the same on quantized tensors with the observed scale."""

    def __init__(self):
        super().__init__()
        self.activation_post_process = T.nn.Identity()

    def forward(self, x):
        raise RuntimeError("FloatFunctional is not intended to use the 'forward'. Please use the underlying operation")

    def add(self, x, y):
        return self.activation_post_process(T.add(x, y))

    def add_scalar(self, x, y):
        return T.add(x, y)

    def mul(self, x, y):
        return self.activation_post_process(T.mul(x, y))

    def mul_scalar(self, x, y):
        return T.mul(x, y)

    def cat(self, x, dim=0):
        return self.activation_post_process(T.cat(x, dim=dim))

    def add_relu(self, x, y):
        return self.activation_post_process(T.relu(T.add(x, y)))


class FXFloatFunctional(FloatFunctional):
    def __init__(self):
        super().__init__()


class QFunctional(_OutParamsState, Module):
    """FloatFunctional on quantized tensors: the result has this module's scale and zero point."""

    def __init__(self):
        super().__init__()
        self.scale, self.zero_point = 1.0, 0
        self.activation_post_process = T.nn.Identity()

    def forward(self, x):
        raise RuntimeError("Functional is not intended to use the 'forward'. Please use the underlying operation")

    def _out(self):
        return T.tensor(self.scale), T.tensor(self.zero_point, dtype=D.int32)

    def _qadd(self, x, y, activation):
        x, y = _input(x, "QFunctional.add"), _input(y, "QFunctional.add")
        ys, yzp = self._out()
        codes = call("qadd", (x.codes, x._scale, x._zero_point, y.codes, y._scale, y._zero_point, ys, yzp),
                     {"activation": activation, "dtype": D.uint8.code})
        return Q.QTensor(codes, ys, yzp, None, Q.quint8)

    def add(self, x, y):
        return self._qadd(x, y, _NONE)

    def add_relu(self, x, y):
        return self._qadd(x, y, _RELU)

    def add_scalar(self, x, y):
        x = _input(x, "QFunctional.add_scalar")
        return Q.requantize(x.dequantize() + y, x.q_scale(), x.q_zero_point())

    def mul(self, x, y):
        x, y = _input(x, "QFunctional.mul"), _input(y, "QFunctional.mul")
        return Q.requantize(x.dequantize() * y.dequantize(), self.scale, self.zero_point)

    def mul_scalar(self, x, y):
        x = _input(x, "QFunctional.mul_scalar")
        return Q.requantize(x.dequantize() * y, x.q_scale(), x.q_zero_point())

    def cat(self, x, dim=0):
        xs = [_input(t, "QFunctional.cat") for t in x]
        return Q.requantize(T.cat([t.dequantize() for t in xs], dim=dim), self.scale, self.zero_point)

    @classmethod
    def from_float(cls, mod):
        q = cls()
        q.scale, q.zero_point = _qparams(mod.activation_post_process)
        return q

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}"


class BatchNorm2d(_Named, _OutParamsState, Module):
    """An inference BatchNorm on a quantized tensor (one left unfused): the normalization of its
    values, quantized with the observed output scale."""

    _relu = False

    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        for name, fill in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            self.register_buffer(name, T.full((num_features,), fill))
        self.register_buffer("num_batches_tracked", T.tensor(0, dtype=D.int64))  # torch's key; inference ignores it
        self.scale, self.zero_point = 1.0, 0

    def forward(self, input):
        x = _input(input, type(self).__name__)
        y = T.nn.functional.batch_norm(x.dequantize(), self.running_mean, self.running_var, self.weight, self.bias,
                                       False, 0.0, self.eps)
        return Q.requantize(T.relu(y) if self._relu else y, self.scale, self.zero_point)

    @classmethod
    def from_float(cls, mod):
        bn = mod[0] if isinstance(mod, T.nn.Sequential) else mod
        q = cls(bn.num_features, bn.eps, bn.momentum)
        for name in ("weight", "bias", "running_mean", "running_var"):
            setattr(q, name, getattr(bn, name).detach().clone())
        q.scale, q.zero_point = _qparams(mod.activation_post_process)
        return q

    def extra_repr(self):  # torch prints the float BatchNorm's arguments
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine=True, track_running_stats=True"

    def _out_param_tensors(self):
        """after the BatchNorm's buffers, torch's converted model keeps the observer's [1]-shaped qparams"""
        return T.tensor([float(self.scale)]), T.tensor([int(self.zero_point)], dtype=D.int32)


class Dropout(_Named, Module):
    """Dropout of a quantized model: the identity (quantized models only infer)."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return input

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"

    @classmethod
    def from_float(cls, mod):
        return cls(mod.p)
