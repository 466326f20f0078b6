"""oar.nn.init: torch.nn.init's initializers (in place, outside autograd, from oar's generator)."""
import math

from .. import _C
from .._grad_mode import no_grad


def calculate_gain(nonlinearity, param=None):
    linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    rf = 1
    for s in tensor.shape[2:]:
        rf *= s
    return tensor.shape[1] * rf, tensor.shape[0] * rf


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fi, fo = _calculate_fan_in_and_fan_out(tensor)
    return fi if mode == "fan_in" else fo


def uniform_(tensor, a=0.0, b=1.0):
    """U[a, b) from the C core's initializer: the same draws as the C layers for the same seed."""
    if not tensor.is_floating_point():
        raise TypeError(f"uniform_: expected a floating tensor, got {tensor.dtype}")
    return _C.init_("uniform", tensor, float(a), float(b))


def normal_(tensor, mean=0.0, std=1.0):
    if not tensor.is_floating_point():
        raise TypeError(f"normal_: expected a floating tensor, got {tensor.dtype}")
    return _C.init_("normal", tensor, float(mean), float(std))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """N(mean, std) restricted to [a, b]: values outside are drawn again (rejection)."""
    from .._creation import randn

    normal_(tensor, mean, std)
    arr = tensor.detach().numpy()  # shares tensor's memory
    bad = (arr < a) | (arr > b)
    while bad.any():
        redo = randn(int(bad.sum()), dtype=tensor.dtype).numpy() * std + mean
        arr[bad] = redo
        bad = (arr < a) | (arr > b)
    return tensor


def constant_(tensor, val):
    return _C.init_("constant", tensor, float(val), 0.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def eye_(tensor):
    from .._creation import eye

    with no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def xavier_uniform_(tensor, gain=1.0):
    fi, fo = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / float(fi + fo))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    fi, fo = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fi + fo)))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if 0 in tensor.shape:
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0, std)


def orthogonal_(tensor, gain=1):
    import numpy as np

    from .._creation import from_numpy, randn

    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = randn(rows, cols, dtype=tensor.dtype).numpy().astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q *= np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        tensor.copy_(from_numpy(np.ascontiguousarray(q * gain)).reshape(tensor.shape).to(tensor.dtype))
    return tensor


def dirac_(tensor, groups=1):
    """The identity of a convolution: 1 at the kernel's centre where output channel (within its
    group) equals input channel, 0 elsewhere."""
    d = tensor.ndim
    if d not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = tensor.shape[0] // groups
    centre = tuple(s // 2 for s in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for c in range(min(per_group, tensor.shape[1])):
                tensor[(g * per_group + c, c) + centre] = 1
    return tensor


def sparse_(tensor, sparsity, std=0.01):
    """N(0, std) with ceil(sparsity * rows) entries of each column zeroed (rows drawn at random)."""
    from .._creation import randperm

    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))
    with no_grad():
        normal_(tensor, 0, std)
        for c in range(cols):
            tensor[randperm(rows)[:zeros], c] = 0
    return tensor


uniform, normal, constant = uniform_, normal_, constant_
xavier_uniform, xavier_normal, kaiming_uniform, kaiming_normal = (xavier_uniform_, xavier_normal_, kaiming_uniform_,
                                                                  kaiming_normal_)
