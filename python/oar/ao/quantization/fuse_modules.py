"""fuse_modules: runs of layers become one module before quantization, as in torch. In eval mode a
conv (or linear) and the BatchNorm after it fold into one conv (w * gamma / sqrt(var + eps), with
the bias shifted the same way); a ReLU after them joins as nn.intrinsic.ConvReLU2d / LinearReLU.
The other modules of the run become nn.Identity, so the model's structure keeps its names."""
import copy

import oar as T
from ... import nn
from ..nn import intrinsic as nni


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """torch's fold, in its order of operations: w * (gamma * rsqrt(var + eps)), (b - mean) * rsqrt * gamma + beta."""
    if conv_b is None:
        conv_b = T.zeros_like(bn_rm)
    if bn_w is None:
        bn_w = T.ones_like(bn_rm)
    if bn_b is None:
        bn_b = T.zeros_like(bn_rm)
    rsqrt = T.rsqrt(bn_rv + bn_eps)
    shape = [1] * conv_w.ndim
    shape[1 if transpose else 0] = -1
    w = conv_w * (bn_w * rsqrt).reshape(shape)
    b = (conv_b - bn_rm) * rsqrt * bn_w + bn_b
    return nn.Parameter(w.detach(), conv_w.requires_grad), nn.Parameter(b.detach(), conv_w.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_eval(linear, bn):
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    rsqrt = T.rsqrt(bn.running_var + bn.eps)
    scale = bn.weight * rsqrt
    b = linear.bias if linear.bias is not None else T.zeros_like(bn.running_mean)
    fused.weight = nn.Parameter((linear.weight * scale.unsqueeze(-1)).detach())
    fused.bias = nn.Parameter(((b - bn.running_mean) * scale + bn.bias).detach())
    return fused


def _conv_bn(is_qat, conv, bn):
    if is_qat:
        return nni.ConvBn2d(conv, bn)
    return fuse_conv_bn_eval(conv, bn)


def _conv_bn_relu(is_qat, conv, bn, relu):
    if is_qat:
        return nni.ConvBnReLU2d(conv, bn, relu)
    return nni.ConvReLU2d(fuse_conv_bn_eval(conv, bn), relu)


def _linear_bn(is_qat, linear, bn):
    if is_qat:
        return nni.LinearBn1d(linear, bn)
    return fuse_linear_bn_eval(linear, bn)


_PATTERNS = {
    ("Conv2d", "BatchNorm2d"): _conv_bn,
    ("Conv2d", "BatchNorm2d", "ReLU"): _conv_bn_relu,
    ("Conv1d", "ReLU"): lambda q, c, r: nni.ConvReLU1d(c, r),
    ("Conv2d", "ReLU"): lambda q, c, r: nni.ConvReLU2d(c, r),
    ("Conv3d", "ReLU"): lambda q, c, r: nni.ConvReLU3d(c, r),
    ("Linear", "BatchNorm1d"): _linear_bn,
    ("Linear", "ReLU"): lambda q, l, r: nni.LinearReLU(l, r),
    ("BatchNorm2d", "ReLU"): lambda q, b, r: nni.BNReLU2d(b, r),
    ("BatchNorm3d", "ReLU"): lambda q, b, r: nni.BNReLU3d(b, r),
}


def get_fuser_method(op_list, additional_fuser_method_mapping=None):
    return _PATTERNS.get(tuple(t.__name__ for t in op_list))


def fuse_known_modules(mod_list, is_qat, additional_fuser_method_mapping=None):
    """The fused module first, then nn.Identity for each other one (forward hooks move along as torch's do)."""
    key = tuple(type(m).__name__ for m in mod_list)
    fuser = (additional_fuser_method_mapping or {}).get(tuple(type(m) for m in mod_list)) or _PATTERNS.get(key)
    if fuser is None:
        raise NotImplementedError(f"Cannot fuse modules: {key}; the runs oar fuses are "
                                  f"{', '.join('+'.join(p) for p in _PATTERNS)}")
    fused = fuser(is_qat, *mod_list)
    for pre in mod_list[0]._forward_pre_hooks.values():
        fused.register_forward_pre_hook(pre)
    for hook in mod_list[-1]._forward_hooks.values():
        fused.register_forward_hook(hook)
    out = [fused]
    for _ in mod_list[1:]:
        ident = nn.Identity()
        ident.training = mod_list[0].training
        out.append(ident)
    return out


def _get(model, dotted):
    for part in dotted.split("."):
        model = getattr(model, part)
    return model


def _set(model, dotted, module):
    *path, last = dotted.split(".")
    for part in path:
        model = getattr(model, part)
    setattr(model, last, module)


def _fuse(model, names, is_qat, inplace, fuser_func, fuse_custom_config_dict):
    if not inplace:
        model = copy.deepcopy(model)
    groups = names if names and all(isinstance(g, (list, tuple)) for g in names) else [names]
    extra = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping")
    for group in groups:
        mods = [_get(model, n) for n in group]
        fused = fuser_func(mods, is_qat, extra) if fuser_func is fuse_known_modules else fuser_func(mods, is_qat)
        for n, m in zip(group, fused):
            _set(model, n, m)
    return model


def fuse_modules(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules, fuse_custom_config_dict=None):
    """Fuses each run of named modules (a list of names, or a list of such lists) for inference."""
    return _fuse(model, modules_to_fuse, False, inplace, fuser_func, fuse_custom_config_dict)


def fuse_modules_qat(model, modules_to_fuse, inplace=False, fuser_func=fuse_known_modules,
                     fuse_custom_config_dict=None):
    """The same runs kept trainable (ConvBn2d, ...), for quantization-aware training."""
    return _fuse(model, modules_to_fuse, True, inplace, fuser_func, fuse_custom_config_dict)
