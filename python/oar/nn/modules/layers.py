"""The common layers with torch's constructor signatures, parameter names and default
initialisation (from oar's generator, so values differ from torch's for the same seed)."""
import math
import numbers
from collections import OrderedDict

from ... import _creation as C
from ... import _dtype as D
from ... import _functions as F
from ..._ops import call
from ..._ops import default as _d  # defaults from the op table (src/ops)
from .. import functional as NF
from .. import init
from ..parameter import Parameter
from .module import Module


def _dt(dtype):
    return D.float32 if dtype is None else D.to_dtype(dtype)


def _ones_as_c_layers(shape, dtype):
    """Ones written by the C core's constant initializer, as the C norm layers write theirs: it
    reserves counters of the generator, so a model built here draws the values the same C model
    (the zoo's) draws for the same seed."""
    return init.ones_(C.empty(*shape, dtype=_dt(dtype)))


def _norm_affine(module, affine, shape, dtype):
    """A norm layer's weight (ones) and bias (zeros) of the given shape, or both None, as torch."""
    if isinstance(shape, numbers.Integral):
        shape = (shape,)
    if affine:
        module.weight = Parameter(_ones_as_c_layers(shape, dtype))
        module.bias = Parameter(C.zeros(*shape, dtype=_dt(dtype)))
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _pair(v):
    return (v, v) if isinstance(v, numbers.Integral) else tuple(v)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


def _weight_and_bias(module, weight_shape, out_features, bias, dtype):
    """module.weight and module.bias (or a None bias) of a linear or convolution layer, initialised."""
    module.weight = Parameter(C.empty(*weight_shape, dtype=_dt(dtype)))
    if bias:
        module.bias = Parameter(C.empty(out_features, dtype=_dt(dtype)))
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()


def _reset_weight_and_bias(weight, bias):
    """torch's default for linear and convolution layers: kaiming_uniform_(a=sqrt(5)) weights and
    biases uniform within 1/sqrt(fan_in)."""
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        _weight_and_bias(self, (out_features, in_features), out_features, bias, dtype)

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        return NF.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class _ConvNd(Module):
    _dims = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, transposed=False, output_padding=0):
        super().__init__()
        n = self._dims
        tup = (lambda v: (v,) * n if isinstance(v, numbers.Integral) else tuple(v))
        if in_channels % groups:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', 'circular'], but got "
                             f"padding_mode='{padding_mode}'")
        if transposed and padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = tup(kernel_size), tup(stride), tup(dilation)
        self.padding = padding if isinstance(padding, str) else tup(padding)
        self.output_padding, self.transposed, self.padding_mode = tup(output_padding), transposed, padding_mode
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        _weight_and_bias(self, (*shape, *self.kernel_size), out_channels, bias, dtype)

    def reset_parameters(self):
        _reset_weight_and_bias(self.weight, self.bias)

    def _conv(self, fn, input):
        """fn with the layer's geometry; a padding_mode other than zeros pads explicitly first, as torch's."""
        if self.padding_mode == "zeros":
            return fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        if isinstance(self.padding, str):
            raise NotImplementedError(f"{type(self).__name__}: padding='{self.padding}' with padding_mode="
                                      f"'{self.padding_mode}' is not offered; give the padding as numbers")
        pads = [p for p in reversed(self.padding) for _ in range(2)]
        return fn(NF.pad(input, pads, mode=self.padding_mode), self.weight, self.bias, self.stride, 0,
                  self.dilation, self.groups)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding) if not isinstance(self.padding, str) else True:
            s += f", padding={self.padding if not isinstance(self.padding, str) else repr(self.padding)}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _dims = 1

    def forward(self, input):
        return self._conv(NF.conv1d, input)


class Conv3d(_ConvNd):
    _dims = 3

    def forward(self, input):
        return self._conv(NF.conv3d, input)


class MaxPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride or kernel_size, padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return NF.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                             self.return_indices)


class AvgPool3d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad, self.divisor_override = ceil_mode, count_include_pad, divisor_override

    def forward(self, input):
        return NF.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return NF.adaptive_avg_pool3d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class Conv2d(_ConvNd):
    def forward(self, input):
        return self._conv(NF.conv2d, input)


class ConvTranspose2d(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, transposed=True, output_padding=output_padding)

    def forward(self, input, output_size=None):
        return NF.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                   self.groups, self.dilation)


class ConvTranspose3d(_ConvNd):
    _dims = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, transposed=True, output_padding=output_padding)

    def forward(self, input, output_size=None):
        return NF.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                   self.groups, self.dilation)


class ConvTranspose1d(_ConvNd):
    _dims = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype, transposed=True, output_padding=output_padding)

    def forward(self, input, output_size=None):
        return NF.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                   self.groups, self.dilation)


class _NormBase(Module):
    """What batch and instance norms share (torch's _NormBase): the affine parameters, the running
    statistics as buffers (None when not tracked), and their resets."""

    def __init__(self, num_features, eps, momentum, affine, track_running_stats, dtype):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _norm_affine(self, affine, num_features, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", C.zeros(num_features, dtype=_dt(dtype)))
            self.register_buffer("running_var", _ones_as_c_layers((num_features,), dtype))
            self.register_buffer("num_batches_tracked", C.tensor(0, dtype=D.int64))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)


class _BatchNorm(_NormBase):
    _expect = (2, 3)

    def __init__(self, num_features, eps=_d("batch_norm", "eps"), momentum=_d("batch_norm", "momentum"), affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype)

    def forward(self, input):
        if input.dim() not in self._expect:
            raise ValueError(f"expected {' or '.join(f'{d}D' for d in self._expect)} input (got {input.dim()}D input)")
        counting = self.training and self.track_running_stats
        use_batch = self.training or self.running_mean is None
        stats = not self.training or self.track_running_stats
        # momentum=None (a cumulative average) hands the counter to the op, which reads its factor
        # 1/(count + 1) when it runs, and the increment op then advances it: both are ops, so a
        # compiled step counts as eager code does (as the C layer)
        counter = self.num_batches_tracked if counting and self.momentum is None else None
        out = call("batch_norm", (input, self.weight, self.bias, self.running_mean if stats else None,
                                  self.running_var if stats else None, counter),
                   {"training": use_batch, "momentum": -1.0 if self.momentum is None else self.momentum,
                    "eps": self.eps})
        if counting:
            from ... import ops

            ops.increment(self.num_batches_tracked)
        return out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    _expect = (2, 3)


class BatchNorm2d(_BatchNorm):
    _expect = (4,)


class BatchNorm3d(_BatchNorm):
    _expect = (5,)


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return NF.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=_d("layer_norm", "eps"), elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps, self.elementwise_affine = tuple(normalized_shape), eps, elementwise_affine
        _norm_affine(self, elementwise_affine, self.normalized_shape, dtype)

    def forward(self, input):
        return NF.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=_d("group_norm", "eps"), affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _norm_affine(self, affine, num_channels, dtype)

    def forward(self, input):
        return NF.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(_NormBase):
    """Each sample's channels normalized over their own positions: group_norm with one group per
    channel (torch's defaults: no affine, no running statistics)."""
    _expect = (4,)

    def __init__(self, num_features, eps=_d("group_norm", "eps"), momentum=_d("batch_norm", "momentum"), affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype)

    def forward(self, input):
        if input.dim() not in self._expect and input.dim() != self._expect[0] - 1:
            raise ValueError(f"{type(self).__name__}: expected a {self._expect[0]}D input (N, C, ...) or "
                             f"{self._expect[0] - 1}D (C, ...), got {input.dim()}D")
        if input.dim() == self._expect[0] - 1:   # one sample without its batch dim
            return self.forward(input.unsqueeze(0)).squeeze(0)
        if input.shape[1] != self.num_features and self.affine:
            raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), but "
                             f"got: {input.shape[1]}.")
        # (torch's instance norms leave num_batches_tracked at 0: the buffer exists for the state_dict)
        use_running = self.track_running_stats and not self.training
        return NF.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                                not use_running, self.momentum, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    _expect = (3,)


class InstanceNorm2d(_InstanceNorm):
    _expect = (4,)


class InstanceNorm3d(_InstanceNorm):
    _expect = (5,)


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.sparse = sparse
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx is not None and padding_idx < 0:
            self.padding_idx = num_embeddings + padding_idx
        if _weight is None:
            self.weight = Parameter(C.randn(num_embeddings, embedding_dim, dtype=_dt(dtype)))
            if self.padding_idx is not None:
                from ..._grad_mode import no_grad

                with no_grad():
                    self.weight[self.padding_idx].fill_(0)
        else:
            self.weight = Parameter(_weight)

    def forward(self, input):
        return NF.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                            self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            s += ", scale_grad_by_freq=True"
        return s + (", sparse=True" if self.sparse else "")

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        m = cls(embeddings.shape[0], embeddings.shape[1], padding_idx=padding_idx, max_norm=max_norm,
                norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=embeddings)
        m.weight.requires_grad = not freeze
        return m


class Dropout(Module):
    def __init__(self, p=_d("dropout", "p"), inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return NF.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


def _activation(name, fn, params=(), repr_fmt=""):
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        names = [p for p, _ in params]
        vals = dict(params)
        for k, v in zip(names, args):
            vals[k] = v
        for k, v in kwargs.items():
            if k != "inplace" and k not in vals:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument '{k}'")
            vals[k] = v
        vals.setdefault("inplace", False)
        for k, v in vals.items():
            object.__setattr__(self, k, v)

    def forward(self, input):
        return fn(self, input)

    def extra_repr(self):
        return repr_fmt.format(**{k: getattr(self, k) for k, _ in params}) if repr_fmt else \
            ("inplace=True" if getattr(self, "inplace", False) else "")

    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr})


ReLU = _activation("ReLU", lambda s, x: F.relu(x), [("inplace", False)])
ReLU6 = _activation("ReLU6", lambda s, x: NF.relu6(x), [("inplace", False)])
SiLU = _activation("SiLU", lambda s, x: F.silu(x), [("inplace", False)])
Sigmoid = _activation("Sigmoid", lambda s, x: F.sigmoid(x))
Tanh = _activation("Tanh", lambda s, x: F.tanh(x))
GELU = _activation("GELU", lambda s, x: NF.gelu(x, s.approximate), [("approximate", "none")],
                   "approximate='{approximate}'")
LeakyReLU = _activation("LeakyReLU", lambda s, x: NF.leaky_relu(x, s.negative_slope),
                        [("negative_slope", _d("leaky_relu", "negative_slope")), ("inplace", False)], "negative_slope={negative_slope}")
ELU = _activation("ELU", lambda s, x: NF.elu(x, s.alpha), [("alpha", _d("elu", "alpha")), ("inplace", False)], "alpha={alpha}")
Softplus = _activation("Softplus", lambda s, x: NF.softplus(x, s.beta, s.threshold), [("beta", 1), ("threshold", 20)],
                       "beta={beta}, threshold={threshold}")
Hardswish = _activation("Hardswish", lambda s, x: NF.hardswish(x), [("inplace", False)])
Hardsigmoid = _activation("Hardsigmoid", lambda s, x: NF.hardsigmoid(x), [("inplace", False)])
Hardtanh = _activation("Hardtanh", lambda s, x: NF.hardtanh(x, s.min_val, s.max_val),
                       [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)], "min_val={min_val}, max_val={max_val}")
Mish = _activation("Mish", lambda s, x: NF.mish(x), [("inplace", False)])
Softmax = _activation("Softmax", lambda s, x: NF.softmax(x, s.dim), [("dim", None)], "dim={dim}")
LogSoftmax = _activation("LogSoftmax", lambda s, x: NF.log_softmax(x, s.dim), [("dim", None)], "dim={dim}")


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return F.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return NF.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, stride={self.stride}"


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return NF.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        return F.unflatten(input, self.dim, self.unflattened_size)


class PReLU(Module):
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(C.full((num_parameters,), init, dtype=dtype, device=device))

    def forward(self, input):
        return NF.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return NF.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.dilation, self.ceil_mode, self.return_indices = padding, dilation, ceil_mode, return_indices

    def forward(self, input):
        return NF.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                             self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad

    def forward(self, input):
        return NF.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.dilation, self.ceil_mode, self.return_indices = padding, dilation, ceil_mode, return_indices

    def forward(self, input):
        return NF.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                             self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxUnpool2d(Module):
    _n = 2   # the sizes are kept as tuples of this many values, as torch's (and its repr) keep them

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._n
        as_tuple = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * n
        self.kernel_size = as_tuple(kernel_size)
        self.stride = self.kernel_size if stride is None else as_tuple(stride)
        self.padding = as_tuple(padding)

    def forward(self, input, indices, output_size=None):
        return NF.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(MaxUnpool2d):
    _n = 1

    def forward(self, input, indices, output_size=None):
        return NF.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return NF.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                             self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return NF.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(AdaptiveAvgPool2d):
    def __init__(self, output_size, return_indices=False):
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input):
        return NF.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool1d(AdaptiveMaxPool2d):
    def forward(self, input):
        return NF.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(AdaptiveMaxPool2d):
    def forward(self, input):
        return NF.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class MaxUnpool3d(MaxUnpool2d):
    _n = 3

    def forward(self, input, indices, output_size=None):
        return NF.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


# ---------------------------------------------------------------- containers
class _OrderedContainer(Module):
    """What Sequential and ModuleList share: their modules in order, indexed like a list."""

    def _from_slice(self, items):
        raise NotImplementedError

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._from_slice(list(self._modules.items())[idx])
        mods = list(self._modules.values())
        if not -len(mods) <= idx < len(mods):
            raise IndexError(f"index {idx} is out of range")
        return mods[idx]

    def __setitem__(self, idx, module):
        self.add_module(list(self._modules.keys())[idx], module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class Sequential(_OrderedContainer):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def _from_slice(self, items):
        return Sequential(OrderedDict(items))

    def __delitem__(self, idx):
        for k in (list(self._modules.keys())[idx] if isinstance(idx, slice) else [list(self._modules.keys())[idx]]):
            del self._modules[k]


class ModuleList(_OrderedContainer):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _from_slice(self, items):
        return ModuleList([m for _, m in items])

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __iadd__(self, modules):
        return self.extend(modules)


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for k, m in (modules.items() if hasattr(modules, "items") else modules):
            self[k] = m

    def pop(self, key):
        return self._modules.pop(key)


# ---------------------------------------------------------------- losses
class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = "none" if reduce is False else ("mean" if size_average in (None, True) else "sum")
        self.reduction = reduction


class MSELoss(_Loss):
    def forward(self, input, target):
        return NF.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return NF.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=_d("smooth_l1_loss", "beta")):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return NF.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input, target):
        return NF.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                   pos_weight=self.pos_weight)


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight

    def forward(self, input, target):
        return NF.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=_d("nll_loss", "ignore_index"), reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input, target):
        return NF.nll_loss(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


NLLLoss2d = type("NLLLoss2d", (NLLLoss,), {"__doc__": "torch's older name of NLLLoss for images"})


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=_d("cross_entropy", "ignore_index"), reduce=None,
                 reduction="mean", label_smoothing=_d("cross_entropy", "label_smoothing")):
        super().__init__(size_average, reduce, reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def forward(self, input, target):
        return NF.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index, reduction=self.reduction,
                                label_smoothing=self.label_smoothing)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return NF.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
