"""torch.nn.utils.fusion: a convolution or linear layer followed by batch norm in eval mode, as
one layer (the norm's affine map, from its running statistics, folded into weight and bias)."""
import copy

from ..parameter import Parameter


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """w' = w * gamma / sqrt(var + eps) per output channel (dim 0, or dim 1 of a transposed
    convolution's weight); b' = (b - mean) * gamma / sqrt(var + eps) + beta."""
    from ... import ones_like, rsqrt, zeros_like

    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    inv_std = rsqrt(bn_rv + bn_eps)
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (len(conv_w.shape) - 2)
    w = conv_w * (bn_w * inv_std).reshape(shape)
    b = (conv_b - bn_rm) * inv_std * bn_w + bn_b
    return Parameter(w), Parameter(b)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    assert not (conv.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    from ... import rsqrt, zeros_like

    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * rsqrt(bn_rv + bn_eps)
    return Parameter(linear_w * scale.unsqueeze(-1)), Parameter((linear_b - bn_rm) * scale + bn_b)


def fuse_linear_bn_eval(linear, bn):
    assert not (linear.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
