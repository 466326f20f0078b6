"""oar.nn.functional with torch.nn.functional's signatures and defaults."""
import builtins
import math
import numbers

from .. import _C
from .. import _creation as _CR
from .. import _dtype as D
from .. import _functions as F
from .._ops import call
from .._kinds import CLASSES as _OTHER, other as _other
from .._ops import default as _d  # defaults come from the op table (src/ops)

sigmoid, tanh = F.sigmoid, F.tanh


def relu(input, inplace=False):
    if type(input) in _OTHER:
        return _other("relu", input)
    return input.relu_() if inplace else F.relu(input)


def silu(input, inplace=False):
    return F.silu(input)
_REDUCTION = {"mean": 0, "sum": 1, "none": 2}


def _pair(v, name, fn):
    if isinstance(v, numbers.Integral):
        return [int(v), int(v)]
    v = list(v)
    if len(v) == 1:
        return [int(v[0])] * 2
    if len(v) != 2:
        raise ValueError(f"{fn}: expected {name} to be an int or a pair, got {v}")
    return [int(x) for x in v]


def _reduction(reduction, size_average=None, reduce=None, fn="loss"):
    if size_average is not None or reduce is not None:  # torch's deprecated flags
        if reduce is False:
            reduction = "none"
        else:
            reduction = "mean" if size_average in (None, True) else "sum"
    if reduction not in _REDUCTION:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTION[reduction]


def relu_(input):
    return input.relu_()


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """clamp, but with torch's hardtanh gradient: zero at the bounds too (clamp's passes there).
    It matters: ReLU6 after a batch norm sees many exact zeros."""
    out = F.clamp(input, min_val, max_val)
    if not (input.requires_grad and _C.is_grad_enabled()):
        return out
    inside = F.logical_and(input > min_val, input < max_val)
    return F.where(inside, input, out.detach())


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)


def prelu(input, weight):
    """x where x >= 0, else weight * x, weight per channel (dim 1) or one for all."""
    if weight.ndim != 1 or weight.shape[0] not in (1, input.shape[1] if input.ndim > 1 else 1):
        raise RuntimeError(f"prelu: expected weight of 1 or {input.shape[1] if input.ndim > 1 else 1} elements "
                           f"(one per channel, dim 1), got shape {list(weight.shape)}")
    w = weight.reshape(-1, *([1] * (input.ndim - 2))) if input.ndim > 1 and weight.shape[0] > 1 else weight.reshape(())
    return F.where(input >= 0, input, input * w)


def glu(input, dim=-1):
    """The gated linear unit: the first half of dim times the sigmoid of the second."""
    if input.ndim == 0 or input.shape[dim] % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim} is size "
                           f"{input.shape[dim] if input.ndim else 0}")
    a, b = F.chunk(input, 2, dim)
    return a * F.sigmoid(b)


def leaky_relu(input, negative_slope=_d("leaky_relu", "negative_slope"), inplace=False):
    return call("leaky_relu", (input,), {"negative_slope": negative_slope})


def elu(input, alpha=_d("elu", "alpha"), inplace=False):
    return call("elu", (input,), {"alpha": alpha})


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate}")
    return call("gelu", (input,), {"approximate": approximate == "tanh"})


def softplus(input, beta=_d("softplus", "beta"), threshold=_d("softplus", "threshold")):
    return call("softplus", (input,), {"beta": beta, "threshold": threshold})


def hardsigmoid(input, inplace=False):
    if type(input) in _OTHER:
        return _other("hardsigmoid", input)
    return F.clamp(input / 6.0 + 0.5, 0.0, 1.0)


def hardswish(input, inplace=False):
    return input * hardsigmoid(input)


def mish(input, inplace=False):
    return input * F.tanh(softplus(input))


def logsigmoid(input):
    return -softplus(-input)


def _softmax_dim(input, dim, fn):
    if dim is None:  # torch's legacy implicit choice
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return call("softmax", (input,), {"dim": _softmax_dim(input, dim, "softmax")})


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return call("log_softmax", (input,), {"dim": _softmax_dim(input, dim, "log_softmax")})


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return softmax(-input, dim, dtype=dtype)


def linear(input, weight, bias=None):
    return call("linear", (input, weight, bias))


def _conv_padding(padding, weight, dilation, fn):
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * len(dilation)
        if padding == "same":
            k = weight.shape[2:]
            pads = [d * (s - 1) for d, s in zip(dilation, k)]
            if builtins.any(p % 2 for p in pads):
                raise NotImplementedError(f"{fn}: padding='same' with an even total padding per side is not offered")
            return [p // 2 for p in pads]
        raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    return padding


def conv2d(input, weight, bias=None, stride=_d("conv2d", "stride"), padding=_d("conv2d", "padding"),
           dilation=_d("conv2d", "dilation"), groups=_d("conv2d", "groups")):
    if input.dim() == 3:  # unbatched [C, H, W], as torch takes it
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    dilation = _pair(dilation, "dilation", "conv2d")
    padding = _pair(_conv_padding(padding, weight, dilation, "conv2d"), "padding", "conv2d")
    return call("conv2d", (input, weight, bias), {"stride": _pair(stride, "stride", "conv2d"), "padding": padding,
                                                  "dilation": dilation, "groups": groups})


def _triple(v, what, fn):
    t = (int(v),) * 3 if isinstance(v, numbers.Integral) else tuple(int(e) for e in v)
    if len(t) != 3:
        raise ValueError(f"{fn}: expected {what} as an int or 3 ints, got {v}")
    return t


def conv3d(input, weight, bias=None, stride=_d("conv3d", "stride"), padding=_d("conv3d", "padding"),
           dilation=_d("conv3d", "dilation"), groups=_d("conv3d", "groups")):
    """The conv3d op (src/ops/conv.c; oneDNN's 3-d convolution on the CPU)."""
    if input.dim() not in (4, 5):
        raise RuntimeError(f"conv3d: expected a 5-D input (N, C, D, H, W) or a 4-D unbatched one, got {input.dim()}-D")
    if input.dim() == 4:  # unbatched [C, D, H, W], as torch takes it
        return conv3d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    if weight.dim() != 5:
        raise RuntimeError(f"conv3d: expected a 5-D weight (out, in/groups, kD, kH, kW), got {weight.dim()}-D")
    s, d = _triple(stride, "stride", "conv3d"), _triple(dilation, "dilation", "conv3d")
    if isinstance(padding, str):
        padding = _conv_padding(padding, weight, d, "conv3d")
    return call("conv3d", (input, weight, bias), {"stride": list(s), "padding": list(_triple(padding, "padding", "conv3d")),
                                                  "dilation": list(d), "groups": groups})


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The max_pool3d op (src/ops/pool.c); indices as max_pool2d's, over each D x H x W volume."""
    k = _triple(kernel_size, "kernel_size", "max_pool3d")
    s = k if stride is None or stride == [] else _triple(stride, "stride", "max_pool3d")
    attrs = {"kernel": list(k), "stride": list(s), "padding": list(_triple(padding, "padding", "max_pool3d")),
             "dilation": list(_triple(dilation, "dilation", "max_pool3d")), "ceil_mode": builtins.bool(ceil_mode)}
    y = call("max_pool3d", (input,), attrs)
    return (y, _max_pool_indices("max_pool3d_gather", input, attrs, 3)) if return_indices else y


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """The avg_pool3d op (src/ops/pool.c), with all of torch's options."""
    k = _triple(kernel_size, "kernel_size", "avg_pool3d")
    s = k if stride is None or stride == [] else _triple(stride, "stride", "avg_pool3d")
    if divisor_override is not None and int(divisor_override) < 1:
        raise RuntimeError(f"avg_pool3d: divisor must be not zero, got {divisor_override}")
    return call("avg_pool3d", (input,), {"kernel": list(k), "stride": list(s),
                                         "padding": list(_triple(padding, "padding", "avg_pool3d")),
                                         "ceil_mode": builtins.bool(ceil_mode),
                                         "count_include_pad": builtins.bool(count_include_pad),
                                         "divisor_override": int(divisor_override or 0)})


def adaptive_avg_pool3d(input, output_size):
    """avg_pool3d with window = stride = input / output size: the output size must divide the
    input's (as the global pool (1, 1, 1) of the video models does)."""
    size = (output_size,) * 3 if isinstance(output_size, numbers.Integral) or output_size is None else \
        tuple(output_size)
    dims = input.shape[-3:]
    size = tuple(dims[i] if o is None else int(o) for i, o in enumerate(size))
    if any(o < 1 or n % o for n, o in zip(dims, size)):
        raise NotImplementedError(f"adaptive_avg_pool3d: output size {size} must divide the input's {tuple(dims)} "
                                  f"(uneven windows are not offered)")
    window = [n // o for n, o in zip(dims, size)]
    return avg_pool3d(input, window, window)


def conv1d(input, weight, bias=None, stride=_d("conv1d", "stride"), padding=_d("conv1d", "padding"),
           dilation=_d("conv1d", "dilation"), groups=_d("conv1d", "groups")):
    if input.dim() == 2:  # unbatched [C, L]
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups).squeeze(0)
    one = lambda v: [int(v if isinstance(v, numbers.Integral) else v[0])]
    if isinstance(padding, str):
        padding = _conv_padding(padding, weight, one(dilation), "conv1d")[0]
    return call("conv1d", (input, weight, bias), {"stride": one(stride), "padding": one(padding),
                                                  "dilation": one(dilation), "groups": groups})


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return call("conv_transpose2d", (input, weight, bias), {
        "stride": _pair(stride, "stride", "conv_transpose2d"), "padding": _pair(padding, "padding", "conv_transpose2d"),
        "output_padding": _pair(output_padding, "output_padding", "conv_transpose2d"),
        "dilation": _pair(dilation, "dilation", "conv_transpose2d"), "groups": groups})


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The conv_transpose3d op: conv3d's adjoint in its input (src/ops/conv.c)."""
    if input.dim() == 4:  # unbatched [C, D, H, W]
        return conv_transpose3d(input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups,
                                dilation).squeeze(0)
    if input.dim() != 5 or weight.dim() != 5:
        raise RuntimeError(f"conv_transpose3d: expected a 5-D input and weight, got {input.dim()}-D and "
                           f"{weight.dim()}-D")
    s, p, op, d = (list(_triple(v, what, "conv_transpose3d")) for v, what in
                   ((stride, "stride"), (padding, "padding"), (output_padding, "output_padding"),
                    (dilation, "dilation")))
    return call("conv_transpose3d", (input, weight, bias), {"stride": s, "padding": p, "output_padding": op,
                                                            "dilation": d, "groups": groups})


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The 2-d transposed convolution over [N, C, 1, L] with a kernel of height 1."""
    one = lambda v: int(v if isinstance(v, numbers.Integral) else v[0])
    batched = input.ndim == 3
    x = input.unsqueeze(-2) if batched else input.unsqueeze(0).unsqueeze(-2)
    y = conv_transpose2d(x, weight.unsqueeze(-2), bias, (1, one(stride)), (0, one(padding)),
                         (0, one(output_padding)), groups, (1, one(dilation))).squeeze(-2)
    return y if batched else y.squeeze(0)


def max_pool2d(input, kernel_size, stride=None, padding=_d("max_pool2d", "padding"),
               dilation=_d("max_pool2d", "dilation"), ceil_mode=_d("max_pool2d", "ceil_mode"), return_indices=False):
    if type(input) in _OTHER:
        return _other("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)
    k = _pair(kernel_size, "kernel_size", "max_pool2d")
    s = k if stride is None or stride == [] else _pair(stride, "stride", "max_pool2d")
    attrs = {"kernel": k, "stride": s, "padding": _pair(padding, "padding", "max_pool2d"),
             "dilation": _pair(dilation, "dilation", "max_pool2d"), "ceil_mode": builtins.bool(ceil_mode)}
    y = call("max_pool2d", (input,), attrs)
    return (y, _max_pool_indices("max_pool2d_gather", input, attrs, 2)) if return_indices else y


def _max_pool_indices(gather, input, attrs, nsp):
    """torch's indices: each window's maximum as a flat index into its H x W plane (D x H x W
    volume for 3-d), read by the gather op (max pooling's derivative) from a map of the plane's
    indices, so the maximum chosen is the pooling's own (the first, NaN counting as the largest).
    The map is f32 (exact up to 2^24 elements per plane) or f64 for f64 inputs; 16-bit inputs
    widen exactly. No gradient: indices are integers."""
    dt = D.float64 if input.dtype == D.float64 else D.float32
    x = input.detach().to(dt)
    dims = x.shape[-nsp:]
    plane = _CR.arange(math.prod(dims), dtype=dt).reshape(*dims).expand(*x.shape).contiguous()
    return call(gather, (plane, x), attrs).to(D.int64)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d(return_indices=True): each value written at its index in a zero
    plane of the pooling's input size (default (H - 1) stride - 2 padding + kernel, or
    output_size's last two). Indices that repeat (overlapping windows choosing one element) write
    the same value; the gradient reads the output's gradient at the indices, as torch's."""
    if input.ndim not in (3, 4) or tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"max_unpool2d: expected 3D or 4D input and indices of its shape, got input "
                           f"{list(input.shape)} and indices {list(indices.shape)}")
    k = _pair(kernel_size, "kernel_size", "max_unpool2d")
    s = k if stride is None else _pair(stride, "stride", "max_unpool2d")
    p = _pair(padding, "padding", "max_unpool2d")
    h, w = input.shape[-2], input.shape[-1]
    size = [(h - 1) * s[0] - 2 * p[0] + k[0], (w - 1) * s[1] - 2 * p[1] + k[1]]
    if output_size is not None:
        size = [int(v) for v in list(output_size)[-2:]]
    lead = list(input.shape[:-2])
    flat = indices.reshape(*lead, h * w)  # an index outside the output: scatter_add's error names it
    return _Unpool.apply(input.reshape(*lead, h * w), flat, size[0] * size[1]).reshape(*lead, *size)


def _unpool_class():
    from ..autograd import Function

    class Unpool(Function):
        """Values written at their indices along the last dim of n zeros. Repeated indices carry
        one element's value (overlapping windows choosing it): the sum over them divided by their
        count, in f64 (exact for f32 and 16-bit values); the gradient reads the output's at the
        indices, each repeat the whole of it, as torch's."""

        @staticmethod
        def forward(ctx, values, indices, n):
            ctx.save_for_backward(indices)
            shape = list(values.shape[:-1]) + [n]
            wide = values.to(D.float64)
            placed = _CR.zeros(*shape, dtype=D.float64).scatter_add(-1, indices, wide)
            hits = _CR.zeros(*shape, dtype=D.float64).scatter_add(-1, indices, _CR.ones_like(wide))
            return F.where(hits > 0, placed / hits.clamp(min=1), placed).to(values.dtype)

        @staticmethod
        def backward(ctx, grad):
            (indices,) = ctx.saved_tensors
            return grad.gather(-1, indices), None, None

    return Unpool


class _LazyUnpool:
    def apply(self, *args):
        global _Unpool
        _Unpool = _unpool_class()
        return _Unpool.apply(*args)


_Unpool = _LazyUnpool()  # autograd imports nn.functional: the class is made at first use


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    one = lambda v: v if v is None or isinstance(v, numbers.Integral) else list(v)[0]
    size = None if output_size is None else (1, list(output_size)[-1])
    y = max_unpool2d(input.unsqueeze(-2), indices.unsqueeze(-2), (1, one(kernel_size)),
                     None if stride is None else (1, one(stride)), (0, one(padding)), size)
    return y.squeeze(-2)


def avg_pool2d(input, kernel_size, stride=None, padding=_d("avg_pool2d", "padding"),
               ceil_mode=_d("avg_pool2d", "ceil_mode"), count_include_pad=_d("avg_pool2d", "count_include_pad"),
               divisor_override=None):
    if type(input) in _OTHER:
        return _other("avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                      divisor_override)
    if divisor_override is not None:
        raise NotImplementedError("avg_pool2d: divisor_override is not offered")
    k = _pair(kernel_size, "kernel_size", "avg_pool2d")
    s = k if stride is None or stride == [] else _pair(stride, "stride", "avg_pool2d")
    return call("avg_pool2d", (input,), {"kernel": k, "stride": s, "padding": _pair(padding, "padding", "avg_pool2d"),
                                         "ceil_mode": builtins.bool(ceil_mode),
                                         "count_include_pad": builtins.bool(count_include_pad)})


def _pool1d(name, input, kernel_size, stride, padding, **kw):
    """A 1-d pool as the 2-d one over [N, C, 1, L] (a kernel of height 1)."""
    one = lambda v, what: int(v if isinstance(v, numbers.Integral) else (list(v) + [None])[0]) if v is not None else None
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{name}: expected 2D or 3D (batch mode) tensor for input, got {input.ndim}D")
    k = one(kernel_size, "kernel_size")
    s = k if stride is None or stride == [] else one(stride, "stride")
    pool = max_pool2d if name == "max_pool1d" else avg_pool2d
    y = pool(input.unsqueeze(-2), (1, k), (1, s), (0, one(padding, "padding")), **kw)
    if kw.get("return_indices"):  # a plane of height 1: the 2-d indices are the 1-d ones
        return y[0].squeeze(-2), y[1].squeeze(-2)
    return y.squeeze(-2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _pool1d("max_pool1d", input, kernel_size, stride, padding, dilation=(1, int(dilation if isinstance(
        dilation, numbers.Integral) else dilation[0])), ceil_mode=ceil_mode, return_indices=return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _pool1d("avg_pool1d", input, kernel_size, stride, padding, ceil_mode=ceil_mode,
                   count_include_pad=count_include_pad)


def adaptive_avg_pool2d(input, output_size):
    if type(input) in _OTHER:
        return _other("adaptive_avg_pool2d", input, output_size)
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    size = [input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(output_size)]
    return call("adaptive_avg_pool2d", (input,), {"output_size": size})


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """the max over torch's adaptive windows (rows floor(i*H/oh) to ceil((i+1)*H/oh), columns alike):
    one max pooling when the sizes divide, else a max per output cell; indices flat over H*W"""
    if isinstance(output_size, numbers.Integral):
        output_size = (output_size, output_size)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    h, w = input.shape[-2:]
    oh, ow = [input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(output_size)]
    if not return_indices and h % oh == 0 and w % ow == 0:
        return max_pool2d(input, (h // oh, w // ow))
    rows = [(i * h // oh, -(-(i + 1) * h // oh)) for i in range(oh)]
    cols = [(j * w // ow, -(-(j + 1) * w // ow)) for j in range(ow)]
    values, indices = [], []
    for r0, r1 in rows:
        for c0, c1 in cols:
            win = F.narrow(F.narrow(input, -2, r0, r1 - r0), -1, c0, c1 - c0).flatten(-2)
            values.append(F.amax(win, -1) if not return_indices else None)
            if return_indices:
                at = F.argmax(win, -1, True)
                values[-1] = F.gather(win, -1, at).squeeze(-1)
                cw = c1 - c0
                indices.append(F.add(F.mul(F.add(F.floor_divide(at, cw), r0), w), F.add(F.remainder(at, cw), c0))
                               .squeeze(-1))
    out = F.stack(values, -1).reshape(*input.shape[:-2], oh, ow)
    if not return_indices:
        return out
    return out, F.stack(indices, -1).reshape(*input.shape[:-2], oh, ow)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """adaptive_max_pool2d over (*, C, 1, L)"""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got: {list(input.shape)}")
    o = output_size if isinstance(output_size, numbers.Integral) else output_size[0]
    res = adaptive_max_pool2d(input.unsqueeze(-2), (1, o), return_indices)
    return tuple(r.squeeze(-2) for r in res) if return_indices else res.squeeze(-2)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=_d("batch_norm", "training"),
               momentum=_d("batch_norm", "momentum"), eps=_d("batch_norm", "eps")):
    if momentum is None:
        momentum = -1.0
    return call("batch_norm", (input, weight, bias, running_mean, running_var, None),
                {"training": builtins.bool(training), "momentum": momentum, "eps": eps})


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=_d("layer_norm", "eps")):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (normalized_shape,)
    n = len(normalized_shape)
    if tuple(input.shape[input.ndim - n:]) != tuple(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in normalized_shape)}], but got input of size"
                           f"{list(input.shape)}")
    return call("layer_norm", (input, weight, bias), {"normalized_ndim": n, "eps": eps})


def group_norm(input, num_groups, weight=None, bias=None, eps=_d("group_norm", "eps")):
    return call("group_norm", (input, weight, bias), {"groups": num_groups, "eps": eps})


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=_d("batch_norm", "momentum"), eps=_d("group_norm", "eps")):
    """Each sample's channels normalized over their positions (group_norm with a group per channel). With
    running_mean/running_var and use_input_stats, those are updated in place by momentum with the batch's
    mean of the instances' means and unbiased variances (torch's rule); use_input_stats=False normalizes
    with them instead."""
    if (running_mean is None) != (running_var is None):
        raise ValueError("instance_norm: expected running_mean and running_var together, or neither")
    if not use_input_stats:
        if running_mean is None:
            raise ValueError("Expected running_mean and running_var to be defined when use_input_stats is false")
        return batch_norm(input, running_mean, running_var, weight, bias, False, 0.0, eps)
    if running_mean is not None:
        from .._grad_mode import no_grad

        if momentum is None:
            raise ValueError("instance_norm: momentum=None (a cumulative average) is not offered with running "
                             "statistics; pass a number")
        with no_grad():
            x = input.detach().reshape(input.shape[0], input.shape[1], -1)
            n = x.shape[2]
            mean = x.mean(dim=2)
            var = x.var(dim=2, unbiased=False) * (n / max(n - 1, 1))
            running_mean.mul_(1 - momentum).add_(mean.mean(dim=0).to(running_mean.dtype) * momentum)
            running_var.mul_(1 - momentum).add_(var.mean(dim=0).to(running_var.dtype) * momentum)
    return call("group_norm", (input, weight, bias), {"groups": input.shape[1], "eps": eps})


def _source_positions(n_in, n_out, align_corners, scale_factor):
    """torch's source coordinate of each output position (area_pixel_compute_source_index)."""
    import numpy as np

    if align_corners:
        return np.arange(n_out) * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    scale = 1.0 / scale_factor if scale_factor else n_in / n_out
    return (np.arange(n_out) + 0.5) * scale - 0.5


def _linear_weights(n_in, n_out, align_corners, scale_factor, wide=False):
    """The (n_out, n_in) matrix of 1-d linear interpolation, with torch's source positions; the
    weights in float32, or float64 when wide (torch interpolates float64 data in float64)."""
    import numpy as np

    src = _source_positions(n_in, n_out, align_corners, scale_factor)
    if not align_corners:
        src = np.maximum(src, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    kind = np.float64 if wide else np.float32
    lam = (src - i0).astype(kind)
    w = np.zeros((n_out, n_in), kind)
    np.add.at(w, (np.arange(n_out), i0), 1.0 - lam)
    np.add.at(w, (np.arange(n_out), i1), lam)
    return w


def _cubic_weights(n_in, n_out, align_corners, scale_factor):
    """The (n_out, n_in) matrix of 1-d cubic convolution (Keys, A = -0.75, as torch), the four taps
    clamped to the border (so a border tap gathers the weights of the taps past it)."""
    import numpy as np

    a = -0.75
    src = _source_positions(n_in, n_out, align_corners, scale_factor)  # not clamped for cubic
    i0 = np.floor(src).astype(np.int64)
    t = src - i0
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1            # |x| <= 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a       # 1 < |x| < 2
    taps = [far(t + 1), near(t), near(1 - t), far(2 - t)]
    w = np.zeros((n_out, n_in), np.float64)
    for k, wk in enumerate(taps):
        np.add.at(w, (np.arange(n_out), np.clip(i0 - 1 + k, 0, n_in - 1)), wk)
    return w.astype(np.float32)


def _nearest_index(n_in, n_out, scale_factor, exact):
    """torch's nearest source index: floor(dst * scale), or floor((dst + 0.5) * scale) for
    'nearest-exact', clamped to the input."""
    import numpy as np

    scale = np.float32(1.0 / scale_factor if scale_factor else n_in / n_out)
    src = (np.arange(n_out, dtype=np.float32) + np.float32(0.5 if exact else 0.0)) * scale  # in f32, as torch
    return np.minimum(np.floor(src).astype(np.int64), n_in - 1)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None,
                antialias=False):
    """'nearest' and 'nearest-exact' (repeats for whole factors, else a gather per dim), 'linear',
    'bilinear', 'trilinear' and 'bicubic' (separable: a matrix product per spatial dim, the
    interpolation weights as matrices), 'area' (adaptive average pooling to the output size);
    antialias is not offered."""
    spatial = list(input.shape[2:])
    if size is not None:
        size = [size] * len(spatial) if isinstance(size, int) else list(size)
        factors = [o / i for o, i in zip(size, spatial)]
        given = [None] * len(spatial)
    elif scale_factor is not None:
        factors = [scale_factor] * len(spatial) if isinstance(scale_factor, (int, float)) else list(scale_factor)
        size = [int(math.floor(i * f)) for i, f in zip(spatial, factors)]
        given = [None] * len(spatial) if recompute_scale_factor else factors
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if len(factors) != len(spatial):
        raise ValueError(f"interpolate: expected {len(spatial)} sizes or factors for input of shape "
                         f"{list(input.shape)}, got {len(factors)}")
    dims_of = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
    if mode in dims_of:
        if input.ndim != dims_of[mode]:
            raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {dims_of[mode]}D input")
        if antialias:
            raise NotImplementedError(f"interpolate: antialias=True is not offered for '{mode}'")
        wide = input.dtype == D.float64
        weights = _cubic_weights if mode == "bicubic" else \
            (lambda *a: _linear_weights(*a, wide=wide))
        out = input
        for k in range(len(spatial)):   # separable: one matrix product per spatial dim
            w = _CR.tensor(weights(spatial[k], size[k], bool(align_corners), given[k]).T.copy(), dtype=input.dtype,
                           device=input.device)
            out = F.matmul(out.movedim(2 + k, -1), w).movedim(-1, 2 + k)
        return out
    if mode == "area":   # torch's area mode is adaptive average pooling to the output size
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear "
                             "| bicubic | trilinear")
        pool = {3: adaptive_avg_pool1d, 4: adaptive_avg_pool2d, 5: adaptive_avg_pool3d}.get(input.ndim)
        if pool is None:
            raise NotImplementedError(f"interpolate: 'area' takes 3-5D inputs, got {input.ndim}D")
        return pool(input, size if len(size) > 1 else size[0])
    if mode not in ("nearest", "nearest-exact"):
        raise NotImplementedError(f"interpolate: mode '{mode}' is not offered ('nearest', 'nearest-exact', "
                                  "'linear', 'bilinear', 'bicubic', 'trilinear' and 'area' are)")
    out = input
    for k, f in enumerate(factors):
        d = 2 + k
        if f == 1 and size[k] == spatial[k]:
            continue
        if mode == "nearest" and f == int(f) and f >= 1 and given[k] in (None, f):  # whole factor: repeat
            f = int(f)
            shape = list(out.shape)
            out = out.unsqueeze(d + 1)
            expanded = shape[:d + 1] + [f] + shape[d + 1:]
            out = out.expand(*expanded).reshape(*shape[:d], shape[d] * f, *shape[d + 1:])
        else:
            idx = _nearest_index(spatial[k], size[k], given[k], mode == "nearest-exact")
            out = F.index_select(out, d, _CR.tensor(idx, dtype=D.int64, device=input.device))
    return out


from .._vision import affine_grid, grid_sample  # noqa: E402,F401  (defaults from the op table)


def dropout(input, p=_d("dropout", "p"), training=_d("dropout", "training"), inplace=False):
    if type(input) in _OTHER:
        return _other("dropout", input, p, training)
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return call("dropout", (input,), {"p": p, "training": builtins.bool(training)})


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """weight's rows at input. padding_idx: that row is looked up but gets no gradient; max_norm: the
    rows looked up are first renormalized in place to that norm (norm_type), as torch's; scale_grad_by_freq:
    each row's gradient divided by how often the batch looks it up."""
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    out = call("embedding", (weight, input))
    if not (out.requires_grad and (padding_idx is not None or scale_grad_by_freq)):
        return out
    # the value stays out's exactly (out - held is 0); the gradient is scaled per looked-up position
    held = out.detach()
    scale = _CR.ones(tuple(input.shape), dtype=out.dtype)
    if scale_grad_by_freq:
        from .._compositions import bincount

        counts = bincount(input.reshape(-1).to(D.int64), minlength=n)
        scale = scale / counts[input.to(D.int64)].to(out.dtype)
    if padding_idx is not None:
        scale = F.where(input == padding_idx, _CR.zeros_like(scale), scale)
    return held + (out - held) * scale.unsqueeze(-1)


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """torch.embedding_renorm_: rows of weight that input names and whose norm exceeds max_norm scaled
    down to it (by max_norm / (norm + 1e-7)), in place and outside autograd."""
    from .._grad_mode import no_grad

    with no_grad():
        rows = F.unique(input.reshape(-1).to(D.int64))
        picked = weight[rows]
        norms = F.norm(picked, norm_type, dim=1, keepdim=True)
        factor = F.where(norms > max_norm, max_norm / (norms + 1e-7), _CR.ones_like(norms))
        weight.detach()[rows] = picked * factor   # the storage itself, as torch renormalizes in place
    return weight


def one_hot(tensor, num_classes=-1):
    return call("one_hot", (tensor,), {"num_classes": num_classes})


def pad(input, pad, mode="constant", value=None):
    if type(input) in _OTHER:
        return _other("pad", input, pad, mode, value)
    if mode == "circular":
        return _pad_circular(input, list(pad))
    modes = {"constant": 0, "reflect": 1, "replicate": 2}
    if mode not in modes:
        raise NotImplementedError(f"pad: mode '{mode}' is not offered (constant, reflect, replicate, circular are)")
    return call("pad", (input,), {"pads": list(pad), "mode": modes[mode], "value": 0.0 if value is None else value})


def _pad_circular(input, pads):
    """Each padded dim (pairs from the last dim backwards) wrapped around: the last `before` elements
    ahead, the first `after` behind; so the gradient of a wrapped element adds up, as torch's."""
    if len(pads) % 2 or len(pads) // 2 > input.ndim - 2:
        raise ValueError(f"Padding length should be even and at most twice the number of spatial dims, got "
                         f"{len(pads)} for a {input.ndim}D input")
    out = input
    for k in range(len(pads) // 2):
        d, before, after = input.ndim - 1 - k, pads[2 * k], pads[2 * k + 1]
        n = out.shape[d]
        if before > n or after > n or before < 0 or after < 0:
            raise ValueError(f"Padding value causes wrapping around more than once: expected 0 <= padding <= "
                             f"{n} at dim {d}, got ({before}, {after})")
        parts = [F.narrow(out, d, n - before, before)] if before else []
        parts.append(out)
        if after:
            parts.append(F.narrow(out, d, 0, after))
        out = F.cat(parts, d) if len(parts) > 1 else out
    return out


def _fold_geometry(fn, kernel_size, dilation, padding, stride):
    g = [_pair(v, name, fn) for v, name in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                            (padding, "padding"), (stride, "stride"))]
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = g
    if min(kh, kw, dh, dw, sh, sw) <= 0 or min(ph, pw) < 0:
        raise RuntimeError(f"{fn}: expected kernel_size, dilation and stride > 0 and padding >= 0, got "
                           f"kernel_size={g[0]}, dilation={g[1]}, padding={g[2]}, stride={g[3]}")
    return g


def _blocks(fn, size, k, d, p, s):
    n = (size + 2 * p - d * (k - 1) - 1) // s + 1
    if n <= 0:
        raise RuntimeError(f"{fn}: the {size}-long side padded by {p} holds no {k}-tap window of dilation {d}: "
                           f"expected size + 2 * padding >= dilation * (kernel_size - 1) + 1")
    return n


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """torch's im2col: [N, C, H, W] -> [N, C*kh*kw, L] (channels first, then the kernel taps, then
    the L sliding positions), composed from strided slices of the padded input, so its gradient
    is theirs."""
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _fold_geometry("unfold", kernel_size, dilation, padding, stride)
    batched = input.ndim == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    oh, ow = _blocks("unfold", h, kh, dh, ph, sh), _blocks("unfold", w, kw, dw, pw, sw)
    if ph or pw:
        x = pad(x, [pw, pw, ph, ph])
    taps = [x[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    cols = F.stack(taps, 2).reshape(n, c * kh * kw, oh * ow)
    return cols if batched else cols.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """torch's col2im, unfold's adjoint: [N, C*kh*kw, L] -> [N, C, H, W], every column's values
    added at their window's places. Each kernel tap's blocks are spread by the stride (zeros
    between), shifted into place by padding, and the taps summed."""
    if input.ndim not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {input.ndim}D)")
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _fold_geometry("fold", kernel_size, dilation, padding, stride)
    h, w = _pair(output_size, "output_size", "fold")
    batched = input.ndim == 3
    cols = input if batched else input.unsqueeze(0)
    n, ck, length = cols.shape
    nh, nw = _blocks("fold", h, kh, dh, ph, sh), _blocks("fold", w, kw, dw, pw, sw)
    if ck % (kh * kw) or length != nh * nw:
        raise RuntimeError(f"fold: expected input of shape [N, C * {kh * kw}, {nh * nw}] (C times the kernel's "
                           f"{kh}x{kw} taps; {nh}x{nw} blocks fit output_size {[h, w]}), got {list(input.shape)}")
    c = ck // (kh * kw)
    hp, wp = h + 2 * ph, w + 2 * pw
    cols = cols.reshape(n * c, kh * kw, nh, nw)
    out = None
    for t in range(kh * kw):
        i, j = divmod(t, kw)
        blk = cols[:, t]                                   # [n*c, nh, nw]
        if sw > 1:                                         # sw-1 zeros after each column
            blk = pad(blk.reshape(n * c, nh, nw, 1), [0, sw - 1]).reshape(n * c, nh, nw * sw)
        if sh > 1:                                         # sh-1 zero rows after each row
            blk = pad(blk.reshape(n * c, nh, 1, nw * sw), [0, 0, 0, sh - 1]).reshape(n * c, nh * sh, nw * sw)
        top, left = i * dh, j * dw
        blk = blk[:, :hp - top, :wp - left]                # the trailing zeros may overhang
        blk = pad(blk, [left, wp - left - blk.shape[2], top, hp - top - blk.shape[1]])
        out = blk if out is None else out + blk
    out = out[:, ph:ph + h, pw:pw + w].reshape(n, c, h, w)
    return out if batched else out.squeeze(0)


def _class_last(input, target):
    """(N, C, d1, ...) scores and (N, d1, ...) targets as (M, C) and (M,): one row per sample."""
    if input.ndim <= 2:
        return (input.unsqueeze(0) if input.ndim == 1 else input), target.reshape(-1)
    c = input.shape[1]
    return input.permute(0, *range(2, input.ndim), 1).reshape(-1, c), target.reshape(-1)


def _weighted_nll(logp, target, weight, ignore_index, r, label_smoothing, fn):
    """torch's class-weighted negative log-likelihood (with label smoothing), composed from
    differentiable ops: sample i weighs weight[target_i]; 'mean' divides by the summed weights
    of the samples not ignored."""
    shape = target.shape
    rows, tgt = _class_last(logp, target)
    c = rows.shape[1]
    if weight is not None and (weight.ndim != 1 or weight.shape[0] != c):
        raise ValueError(f"{fn}: expected a weight of shape [{c}] (one per class), got {list(weight.shape)}")
    keep = tgt != ignore_index
    hot = one_hot(F.where(keep, tgt, _CR.zeros_like(tgt)), c).to(rows.dtype) * keep.unsqueeze(1).to(rows.dtype)
    w_rows = hot if weight is None else hot * weight.to(rows.dtype)
    w_sample = w_rows.sum(1)                      # weight[target_i], 0 when ignored
    loss = -(rows * w_rows).sum(1)
    if label_smoothing:
        cls_w = keep.unsqueeze(1).to(rows.dtype) if weight is None else keep.unsqueeze(1).to(rows.dtype) * weight
        smooth = -(rows * cls_w).sum(1)
        loss = loss * (1 - label_smoothing) + smooth * (label_smoothing / c)
    if r == 0:
        return loss.sum() / w_sample.sum()
    if r == 1:
        return loss.sum()
    return loss.reshape(shape)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=_d("cross_entropy", "ignore_index"),
                  reduce=None, reduction="mean", label_smoothing=_d("cross_entropy", "label_smoothing")):
    r = _reduction(reduction, size_average, reduce)
    cdim = 1 if input.ndim > 1 else 0
    if target.is_floating_point():
        # class probabilities (torch >= 1.10)
        logp = log_softmax(input, cdim)
        if label_smoothing:
            c = input.shape[cdim]
            target = target * (1 - label_smoothing) + label_smoothing / c
        if weight is not None:
            shape = [1] * input.ndim
            shape[cdim] = -1
            target = target * weight.reshape(shape)
        loss = -(logp * target).sum(cdim)
        return loss.mean() if r == 0 else loss.sum() if r == 1 else loss
    if weight is not None:
        return _weighted_nll(log_softmax(input, cdim), target, weight, ignore_index, r, label_smoothing,
                             "cross_entropy")
    return call("cross_entropy", (input, target), {"reduction": r, "ignore_index": ignore_index,
                                                   "label_smoothing": label_smoothing})


def nll_loss(input, target, weight=None, size_average=None, ignore_index=_d("nll_loss", "ignore_index"), reduce=None,
             reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    if weight is not None:
        return _weighted_nll(input, target, weight, ignore_index, r, 0.0, "nll_loss")
    return call("nll_loss", (input, target), {"reduction": r, "ignore_index": ignore_index, "label_smoothing": 0.0})


def _pair_loss(name):
    def f(input, target, size_average=None, reduce=None, reduction="mean"):
        return call(name, (input, target), {"reduction": _reduction(reduction, size_average, reduce)})

    f.__name__ = name
    return f


mse_loss = _pair_loss("mse_loss")
l1_loss = _pair_loss("l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=_d("smooth_l1_loss", "beta")):
    return call("smooth_l1_loss", (input, target), {"reduction": _reduction(reduction, size_average, reduce),
                                                    "beta": beta})


def huber_loss(input, target, reduction="mean", delta=1.0):
    return smooth_l1_loss(input, target, reduction=reduction, beta=delta) * delta


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    r = _reduction(reduction, size_average, reduce)
    if weight is None and pos_weight is None:
        return call("bce_with_logits", (input, target), {"reduction": r})
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size(target)}) must be the same as input size ({_size(input)})")
    # -[p y log s(x) + (1 - y) log(1 - s(x))] = (1 - y) x + (1 + (p - 1) y) softplus(-x), stable for any x
    sp = softplus(-input)
    loss = (1 - target) * input + (sp if pos_weight is None else (1 + (pos_weight - 1) * target) * sp)
    return _reduce(loss if weight is None else loss * weight, r)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size(target)}) that is different to the input size "
                         f"({_size(input)}) is deprecated. Please ensure they have the same size.")
    eps_log = lambda x: F.clamp(F.log(x), min=-100.0)  # torch clamps the logs at -100
    loss = -(target * eps_log(input) + (1 - target) * eps_log(1 - input))
    return _reduce(loss if weight is None else loss * weight, _reduction(reduction, size_average, reduce))


def _reduce(loss, r):
    """Elementwise losses by a reduction code (0 mean, 1 sum, 2 none); the mean is over elements, as
    torch's binary cross-entropies with weights."""
    return loss.mean() if r == 0 else loss.sum() if r == 1 else loss


def _size(t):
    return "torch.Size([" + ", ".join(str(d) for d in t.shape) + "])"


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    loss = F.exp(target) * (target - input) if log_target else \
        F.where(target > 0, target * (F.log(F.clamp(target, min=1e-38)) - input), _CR.zeros_like(target))
    if reduction == "batchmean":
        return loss.sum() / input.shape[0]
    r = _reduction(reduction, size_average, reduce)
    return loss.mean() if r == 0 else loss.sum() if r == 1 else loss


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    return input / F.clamp(F.norm(input, p, dim, keepdim=True), min=eps).expand_as(input)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    n1 = F.clamp(F.norm(x1, 2, dim), min=eps)
    n2 = F.clamp(F.norm(x2, 2, dim), min=eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False):
    if dropout_p:
        raise NotImplementedError("scaled_dot_product_attention: dropout_p is not offered")
    scale = 1.0 / math.sqrt(query.shape[-1])
    if attn_mask is not None and attn_mask.dtype is not D.bool_:
        raise NotImplementedError("scaled_dot_product_attention: only bool masks (True = keep) are offered")
    mask = None if attn_mask is None else F.logical_not(attn_mask)
    return call("fused_attention", (query, key, value, mask), {"scale": scale, "causal": builtins.bool(is_causal)})


# ---- activations and shape functions (nnact)
from .._tensor import _inplace  # noqa: E402  (torch's in-place rules: no leaf, autograd sees the new value)
from .._compositions import bernoulli as _bernoulli  # noqa: E402  (oar's generator)
import warnings as _warnings  # noqa: E402

_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    out = elu(input, _SELU_ALPHA) * _SELU_SCALE
    return _inplace(input, out) if inplace else out


def celu(input, alpha=1.0, inplace=False):
    """alpha * elu(x / alpha): x above zero, alpha * (exp(x / alpha) - 1) below."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: celu's alpha must not be 0")
    out = elu(input / alpha, 1.0) * alpha
    return _inplace(input, out) if inplace else out


def softsign(input):
    return input / (F.abs(input) + 1)


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be greater or equal to 0, but found to be {lambd}.")
    zero = _CR.zeros_like(input)
    return F.where(input > lambd, input - lambd, F.where(input < -lambd, input + lambd, zero))


def hardshrink(input, lambd=0.5):
    return F.where(F.logical_or(input > lambd, input < -lambd), input, _CR.zeros_like(input))


def tanhshrink(input):
    return input - F.tanh(input)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    out = F.where(input > threshold, input, _CR.full_like(input, value))
    return _inplace(input, out) if inplace else out


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with the mean slope (lower + upper) / 2 in eval mode; in training, each negative
    element gets its own slope, uniform in [lower, upper), from oar's generator."""
    if training:
        slope = _CR.rand_like(input) * (upper - lower) + lower
        out = F.where(input >= 0, input, input * slope.detach())
    else:
        out = leaky_relu(input, (lower + upper) / 2)
    return _inplace(input, out) if inplace else out


def _inplace_form(fn):
    def f(input, *args, **kwargs):
        return _inplace(input, fn(input, *args, **kwargs))

    f.__name__ = fn.__name__ + "_"
    return f


selu_ = _inplace_form(selu)
celu_ = _inplace_form(celu)
elu_ = _inplace_form(elu)
leaky_relu_ = _inplace_form(leaky_relu)
hardtanh_ = _inplace_form(hardtanh)
threshold_ = _inplace_form(threshold)
rrelu_ = _inplace_form(rrelu)


def _check_factor(input, factor, fn, what):
    if not isinstance(factor, numbers.Integral) or factor <= 0:
        raise RuntimeError(f"{fn}: expected {what} to be a positive int, got {factor}")
    if input.ndim < 3:
        raise RuntimeError(f"{fn}: expected an input of at least 3 dims (*, C, H, W), got {input.ndim}-D")


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): channel c*r*r + i*r + j becomes pixel (h*r + i, w*r + j)."""
    r = upscale_factor
    _check_factor(input, r, "pixel_shuffle", "upscale_factor")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """pixel_shuffle's inverse: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = downscale_factor
    _check_factor(input, r, "pixel_unshuffle", "downscale_factor")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height ({h}) and width ({w}) to be divisible by "
                           f"downscale_factor ({r})")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, g * k, *) -> channels reordered as a (k, g) transpose of the (g, k) grid."""
    if input.ndim < 3:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"sizes {list(input.shape)}")
    n, c = input.shape[0], input.shape[1]
    if not isinstance(groups, numbers.Integral) or groups <= 0 or c % groups:
        raise RuntimeError(f"channel_shuffle: expected groups to be a positive int dividing the {c} channels, "
                           f"got {groups}")
    rest = list(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


native_channel_shuffle = channel_shuffle


def _deprecated(fn):
    _warnings.warn(f"nn.functional.{fn} is deprecated. Use nn.functional.interpolate instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def adaptive_avg_pool1d(input, output_size):
    """adaptive_avg_pool2d over (*, C, 1, L)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_avg_pool1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got "
                           f"{input.ndim}-D")
    o = output_size if isinstance(output_size, numbers.Integral) else output_size[0]
    x = input.unsqueeze(-2)
    y = adaptive_avg_pool2d(x if x.ndim == 4 else x.unsqueeze(0), (1, o)).squeeze(-2)
    return y if input.ndim == 3 else y.squeeze(0)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_noise(input, p, batched):
    """Bernoulli(1 - p) per channel (dim 1, or 0 unbatched), as the input's dtype, broadcast over the
    features."""
    lead = 2 if batched else 1
    shape = list(input.shape[:lead]) + [1] * (input.ndim - lead)
    return _bernoulli(_CR.full(shape, 1.0 - p, dtype=input.dtype, device=input.device))


def _feature_dropout(input, p, training, inplace, batched):
    _check_p(p)
    if not training or p == 0:
        return input
    out = input * 0.0 if p == 1 else input * (_feature_noise(input, p, batched) / (1.0 - p))
    return _inplace(input, out) if inplace else out


def _feature_dims(input, dims, fn):
    if input.ndim not in (dims + 1, dims + 2):
        raise RuntimeError(f"{fn}: Expected {dims + 1}D or {dims + 2}D input, but received a {input.ndim}D input. "
                           f"Note that {fn} exists to provide channel-wise dropout on inputs with {dims} spatial "
                           f"dimension(s), a channel dimension, and an optional batch dimension")
    return input.ndim == dims + 2


def dropout1d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, _feature_dims(input, 1, "dropout1d"))


def dropout2d(input, p=0.5, training=True, inplace=False):
    # torch 1.13 reads a 3-D input as (N, C, L) (1-d channel dropout), with a warning
    if input.ndim not in (3, 4):
        _feature_dims(input, 2, "dropout2d")
    return _feature_dropout(input, p, training, inplace, True)


def dropout3d(input, p=0.5, training=True, inplace=False):
    return _feature_dropout(input, p, training, inplace, _feature_dims(input, 3, "dropout3d"))


_ALPHA_PRIME = 1.7580993408473766  # SELU's scale * alpha: the value a dropped unit takes is -this


def _alpha_dropout(input, p, training, inplace, feature):
    """Dropped units set to SELU's negative saturation, then an affine map a x + b that keeps zero mean
    and unit variance (torch's formula)."""
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        out = input * 0.0
    else:
        if feature:
            if input.ndim < 2:
                raise RuntimeError("feature_alpha_dropout: expected an input of at least 2 dims (N, C, *)")
            noise = _feature_noise(input, p, True)
        else:
            noise = _bernoulli(_CR.full_like(input, 1.0 - p))
        a = 1.0 / math.sqrt((_ALPHA_PRIME ** 2 * p + 1) * (1 - p))
        b = (noise - 1) * (_ALPHA_PRIME * a) + _ALPHA_PRIME * a * p
        out = input * (noise * a) + b
    return _inplace(input, out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha_dropout(input, p, training, inplace, True)


def _lp_finish(out, norm_type, taps):
    # torch's sign(out) * relu(|out|): out itself, with the same (zero-at-zero) gradient
    return (F.sign(out) * relu(F.abs(out)) * taps).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over the window of x^p)^(1/p), as the window's mean of x^p times its size."""
    k = kernel_size if isinstance(kernel_size, numbers.Integral) else kernel_size[0]
    out = avg_pool1d(input.pow(norm_type), k, k if stride is None else stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    kh, kw = _pair(kernel_size, "kernel_size", "lp_pool2d")
    out = avg_pool2d(input.pow(norm_type), (kh, kw), (kh, kw) if stride is None else stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


# ---- losses and distances (nnloss)
# torch 1.13's formulas (aten/src/ATen/native/Loss.cpp, Distance.cpp, torch/nn/functional.py) composed from
# differentiable oar ops, so autograd gives their gradients.

def _same_ndim(fn, **tensors):
    dims = {k: t.ndim for k, t in tensors.items()}
    if len(set(dims.values())) != 1:
        raise RuntimeError(f"{fn}: expected inputs with the same number of dimensions, got "
                           + ", ".join(f"{k}: {d}D" for k, d in dims.items()))


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return _reduce(softplus(-target * input), _reduction(reduction, size_average, reduce))


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    _same_ndim("margin_ranking_loss", input1=input1, input2=input2, target=target)
    loss = F.clamp_min(-target * (input1 - input2) + margin, 0)
    return _reduce(loss, _reduction(reduction, size_average, reduce))


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    zero = _CR.zeros_like(input)
    loss = F.where(target != 1, F.clamp_min(margin - input, 0), zero) + F.where(target != -1, input, zero)
    return _reduce(loss, _reduction(reduction, size_average, reduce))


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    if input1.ndim not in (1, 2) or tuple(input1.shape) != tuple(input2.shape):
        raise RuntimeError(f"cosine_embedding_loss: expected two 1D or 2D inputs of one shape, got "
                           f"{list(input1.shape)} and {list(input2.shape)}")
    d = input1.ndim - 1
    eps = 1e-12  # torch's EPSILON on the squared magnitudes
    cos = (input1 * input2).sum(d) / F.sqrt(((input1 * input1).sum(d) + eps) * ((input2 * input2).sum(d) + eps))
    zero = _CR.zeros_like(cos)
    loss = F.where(target == 1, 1 - cos, zero) + F.where(target == -1, F.clamp_min(cos - margin, 0), zero)
    return _reduce(loss, _reduction(reduction, size_average, reduce))


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(input.ndim - 1) / input.shape[-1]
    return _reduce(loss, _reduction(reduction, size_average, reduce))


def _rows(input, fn):
    """(C,) or (N, C) scores as (N, C)"""
    if input.ndim not in (1, 2):
        raise ValueError(f"{fn}: expected a 1D or 2D input (C) or (N, C), got {input.ndim}D; "
                         f"reshape the scores to (N, C)")
    return input.unsqueeze(0) if input.ndim == 1 else input


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    if p not in (1, 2):
        raise ValueError(f"multi_margin_loss: only p == 1 and p == 2 supported, got p={p}")
    r = _reduction(reduction, size_average, reduce)
    rows = _rows(input, "multi_margin_loss")
    n, c = rows.shape
    if target.numel() != n or target.ndim > 1:
        raise ValueError(f"multi_margin_loss: expected one class index per sample ({n}), got a target of shape "
                         f"{list(target.shape)}")
    tgt = target.reshape(n, 1)
    z = F.clamp_min(rows - rows.gather(1, tgt) + margin, 0)
    h = (z if p == 1 else z * z) * (1 - one_hot(tgt.reshape(-1), c).to(rows.dtype))  # the target's own term is out
    if weight is not None:
        h = h * weight.to(rows.dtype).index_select(0, tgt.reshape(-1)).unsqueeze(1)
    loss = h.sum(1) / c
    # torch's: the losses of a 1D input take the target's shape
    return _reduce(loss.reshape(target.shape) if input.ndim == 1 else loss, r)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    rows = _rows(input, "multilabel_margin_loss")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"multilabel_margin_loss: expected a target of the input's shape {list(input.shape)}, "
                         f"got {list(target.shape)}")
    tgt = target.reshape(rows.shape)
    n, c = rows.shape
    valid = (tgt == -1).to(D.int64).cumsum(1) == 0  # the targets before the first -1
    safe = F.where(valid, tgt, _CR.zeros_like(tgt))
    fvalid = valid.to(rows.dtype)
    is_target = F.clamp_max((one_hot(safe, c).to(rows.dtype) * fvalid.unsqueeze(2)).sum(1), 1)
    xy = rows.gather(1, safe)                    # score of each target j
    pair = F.clamp_min(1 - xy.unsqueeze(2) + rows.unsqueeze(1), 0)  # [n, j, i]
    loss = (pair * fvalid.unsqueeze(2) * (1 - is_target).unsqueeze(1)).sum(2).sum(1) / c
    return _reduce(loss if input.ndim == 2 else loss.reshape(()), r)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)  # one variance per sample: homoscedastic
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    r = _reduction(reduction)
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    var = var + (F.clamp_min(var, eps) - var).detach()  # torch clamps under no_grad: the gradient passes through
    loss = 0.5 * (F.log(var) + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, r)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    r = _reduction(reduction, size_average, reduce)
    loss = F.exp(input) - target * input if log_input else input - target * F.log(input + eps)
    if full:  # Stirling's approximation of log(target!), for targets above 1
        big = target > 1
        t = F.where(big, target, _CR.ones_like(target))
        loss = loss + F.where(big, t * F.log(t) - t + 0.5 * F.log(2 * math.pi * t), _CR.zeros_like(t))
    return _reduce(loss, r)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return F.norm(x1 - x2 + eps, p, builtins.max(x1.ndim, x2.ndim) - 1, keepdim)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    _same_ndim("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    return _triplet(anchor, positive, negative, lambda a, b: pairwise_distance(a, b, p, eps), margin, swap,
                    _reduction(reduction, size_average, reduce))


def _triplet(anchor, positive, negative, dist, margin, swap, r):
    d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        d_neg = F.minimum(d_neg, dist(positive, negative))
    return _reduce(F.clamp_min(margin + d_pos - d_neg, 0), r)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    _same_ndim("triplet_margin_with_distance_loss", anchor=anchor, positive=positive, negative=negative)
    return _triplet(anchor, positive, negative, distance_function or pairwise_distance, margin, swap,
                    _reduction(reduction))


def pdist(input, p=2):
    from .._compositions import pdist as _pdist  # torch.pdist, already a composition of the package
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    return _pdist(input, p)


def bilinear(input1, input2, weight, bias=None):
    """y = x1^T A x2 + b over the last dimension; any leading dimensions."""
    lead = tuple(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, input1.shape[-1]), input2.reshape(-1, input2.shape[-1])
    out = (F.einsum("bi,oij->boj", x1, weight) * x2.unsqueeze(1)).sum(2)
    if bias is not None:
        out = out + bias
    return out.reshape(*lead, weight.shape[0])


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """torch's bags of embeddings: bag b holds input[offsets[b]:offsets[b+1]] (or each row of a 2D
    input); entries equal to padding_idx are left out; an empty bag gives zeros. Composed as a
    (bags x entries) membership matrix times the looked-up rows, or a masked max over them."""
    if max_norm is not None:
        raise NotImplementedError("embedding_bag: max_norm is not offered (it renormalizes weight in place)")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}')")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ValueError(f"embedding_bag: expected per_sample_weights of the input's shape {list(input.shape)}, "
                         f"got {list(per_sample_weights.shape)}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        offsets = _CR.arange(0, input.numel(), input.shape[1])
        include_last_offset = False
    elif input.ndim == 1:
        if offsets is None or offsets.ndim != 1:
            raise ValueError("embedding_bag: a 1D input needs offsets, a 1D tensor of the bags' starts")
    else:
        raise ValueError(f"embedding_bag: input has to be 1D or 2D, got {input.ndim}D")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    idx = input.reshape(-1)
    n, dt = idx.shape[0], weight.dtype
    starts = offsets[:-1] if include_last_offset else offsets
    pos = _CR.arange(n).unsqueeze(0)
    after = (pos >= starts.unsqueeze(1)).to(D.int64)   # [bags, n]: entry i lies at or past bag b's start
    member = after - F.cat([after[1:], _CR.zeros(1, n, dtype=D.int64)], 0)  # past b's start, not past b+1's
    if include_last_offset:
        member = member * (pos < offsets[-1:].unsqueeze(1)).to(D.int64)
    keep = member.to(D.bool_)
    if padding_idx is not None:
        keep = F.logical_and(keep, (idx != padding_idx).unsqueeze(0))
    rows = weight.index_select(0, idx)                  # [n, dim]
    if mode == "max":
        big = F.where(keep.unsqueeze(2), rows.unsqueeze(0), _CR.full((1, 1, 1), -math.inf, dtype=dt))
        full = keep.any(1, keepdim=True)
        return F.where(full, F.amax(big, 1), _CR.zeros(1, 1, dtype=dt))
    m = keep.to(dt)
    if per_sample_weights is not None:
        m = m * per_sample_weights.reshape(1, n).to(dt)
    out = m @ rows
    if mode == "mean":
        out = out / F.clamp_min(keep.to(dt).sum(1, keepdim=True), 1)
    return out


from ._ctc import ctc_loss  # noqa: E402,F401  (the CTC forward recursion as a composition)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the window zero-padded
    (size // 2 channels before, (size - 1) // 2 after), as torch's"""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    sq = F.mul(input, input)
    c = input.shape[1]
    pads = [0, 0] * (input.dim() - 2) + [size // 2, (size - 1) // 2]
    padded = pad(sq, pads)
    window = None
    for j in range(size):
        part = F.narrow(padded, 1, j, c)
        window = part if window is None else F.add(window, part)
    div = F.pow(F.add(F.mul(window, alpha / size), k), beta)
    return F.div(input, div)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau) over dim; hard: the one-hot of its argmax in the forward,
    the soft sample's gradient in the backward (straight-through), as torch's"""
    u = F.clamp(_CR.rand(*logits.shape, dtype=logits.dtype), min=1e-20, max=1.0 - 1e-7)
    gumbels = F.neg(F.log(F.neg(F.log(u))))
    y_soft = softmax(F.div(F.add(logits, gumbels), tau), dim)
    if not hard:
        return y_soft
    from .._compositions import scatter

    index = F.argmax(y_soft, dim, True)
    y_hard = scatter(F.mul(y_soft.detach(), 0.0), dim, index, value=1.0)
    return F.add(F.sub(y_hard, y_soft.detach()), y_soft)
from ._mha import multi_head_attention_forward  # noqa: E402,F401

from ._fractional_pool import (fractional_max_pool2d, fractional_max_pool2d_with_indices,  # noqa: E402,F401
                               fractional_max_pool3d, fractional_max_pool3d_with_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)


def conv_tbc(input, weight, bias, pad=0):
    from .._torch_more import conv_tbc as _conv_tbc

    return _conv_tbc(input, weight, bias, pad)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """the max over torch's adaptive windows in depth, rows and columns (start floor(i*n/o), end
    ceil((i+1)*n/o)): one max pooling when the sizes divide and no indices are asked, else a max per
    output cell; indices flat over D*H*W"""
    if isinstance(output_size, numbers.Integral) or output_size is None:
        output_size = (output_size,) * 3
    if input.ndim not in (4, 5):
        raise RuntimeError(f"adaptive_max_pool3d(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    dims = tuple(input.shape[-3:])
    outs = [dims[i] if s is None else int(s) for i, s in enumerate(output_size)]
    if not return_indices and all(n % o == 0 for n, o in zip(dims, outs)):
        return max_pool3d(input, tuple(n // o for n, o in zip(dims, outs)))
    spans = [[(i * n // o, -(-(i + 1) * n // o)) for i in range(o)] for n, o in zip(dims, outs)]
    values, indices = [], []
    for d0, d1 in spans[0]:
        for r0, r1 in spans[1]:
            for c0, c1 in spans[2]:
                win = F.narrow(F.narrow(F.narrow(input, -3, d0, d1 - d0), -2, r0, r1 - r0), -1, c0, c1 - c0)
                win = win.flatten(-3)
                at = F.argmax(win, -1, True)
                values.append(F.gather(win, -1, at).squeeze(-1))
                if return_indices:   # the window's (depth, row, column) of the max, placed in the volume
                    hw = (r1 - r0) * (c1 - c0)
                    dd, rest = F.floor_divide(at, hw), F.remainder(at, hw)
                    rr, cc = F.floor_divide(rest, c1 - c0), F.remainder(rest, c1 - c0)
                    flat_at = (dd + d0) * (dims[1] * dims[2]) + (rr + r0) * dims[2] + (cc + c0)
                    indices.append(flat_at.squeeze(-1))
    out = F.stack(values, -1).reshape(*input.shape[:-3], *outs)
    if not return_indices:
        return out
    return out, F.stack(indices, -1).reshape(*input.shape[:-3], *outs)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool3d(input, output_size, True)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d(return_indices=True), as max_unpool2d over D*H*W: the default size is
    (n - 1) stride - 2 padding + kernel per dim, or output_size's last three."""
    if input.ndim not in (4, 5) or tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"max_unpool3d: expected 4D or 5D input and indices of its shape, got input "
                           f"{list(input.shape)} and indices {list(indices.shape)}")
    k = _triple(kernel_size, "kernel_size", "max_unpool3d")
    s = k if stride is None else _triple(stride, "stride", "max_unpool3d")
    p = _triple(padding, "padding", "max_unpool3d")
    dims = tuple(input.shape[-3:])
    size = [(n - 1) * s[i] - 2 * p[i] + k[i] for i, n in enumerate(dims)]
    if output_size is not None:
        size = [int(v) for v in list(output_size)[-3:]]
    lead = list(input.shape[:-3])
    n_in = dims[0] * dims[1] * dims[2]
    out = _Unpool.apply(input.reshape(*lead, n_in), indices.reshape(*lead, n_in), size[0] * size[1] * size[2])
    return out.reshape(*lead, *size)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)
