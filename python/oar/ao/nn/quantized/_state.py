"""The state_dict of quantized modules, with torch 1.13's keys and meaning: a layer's output scale
and zero point as 0-d tensors (`scale` float32, `zero_point` int64), its weight as a quantized
tensor, its bias as a float tensor or None. Loading checks each entry against what oar's int8
kernels run (qint8 weights, symmetric, per tensor or per output channel) and reports every
problem in load_state_dict's error, in torch's words, instead of failing later in a kernel."""
import oar as T
from .... import _C
from .... import _dtype as D
from .... import _qtensor as Q

_MISSING = object()


def save_out_params(destination, prefix, scale, zero_point):
    destination[prefix + "scale"] = T.tensor(float(scale))
    destination[prefix + "zero_point"] = T.tensor(int(zero_point), dtype=D.int64)


def take(state_dict, key, missing_keys):
    """state_dict[key], taken out (so the generic step does not see it again), or _MISSING recorded"""
    if key not in state_dict:
        missing_keys.append(key)
        return _MISSING
    return state_dict.pop(key)


def number(value, key, kind, error_msgs):
    """a float or int from a one-element tensor (any shape: torch's converted BatchNorm keeps [1]) or a number"""
    if value is _MISSING:
        return None
    if isinstance(value, _C.TensorBase) or hasattr(value, "numel"):
        if value.numel() != 1:
            error_msgs.append(f'While copying the parameter named "{key}", expected one value, got a tensor of shape '
                              f"{tuple(value.shape)}.")
            return None
        value = value.item()
    if not isinstance(value, (int, float)):
        error_msgs.append(f'While copying the parameter named "{key}", expected a number or a one-element tensor, got '
                          f"{type(value).__name__}.")
        return None
    return kind(value)


def load_out_params(module, state_dict, prefix, missing_keys, error_msgs):
    """module.scale / module.zero_point from their keys (each set only when it is valid)"""
    scale = number(take(state_dict, prefix + "scale", missing_keys), prefix + "scale", float, error_msgs)
    zero_point = number(take(state_dict, prefix + "zero_point", missing_keys), prefix + "zero_point", int, error_msgs)
    if scale is not None:
        module.scale = scale
    if zero_point is not None:
        module.zero_point = zero_point


def qweight(value, key, shape, error_msgs):
    """value as a weight oar's int8 kernels take (a copy), or None with the reason in error_msgs"""
    if value is _MISSING:
        return None
    if type(value) is not Q.QTensor:
        got = f"a {value.dtype} tensor" if isinstance(value, _C.TensorBase) else type(value).__name__
        error_msgs.append(f'While copying the parameter named "{key}", expected a quantized tensor (torch.qint8: '
                          f"the state_dict of a converted model) but received {got}; a float model's weights load "
                          "before convert(), or quantize them with torch.quantize_per_tensor/quantize_per_channel.")
        return None
    if value.dtype is not Q.qint8:
        error_msgs.append(f"dtype mismatch for {key}: copying a quantized tensor of dtype torch.{value.dtype.name} "
                          "from checkpoint, the current model takes torch.qint8 weights.")
        return None
    if tuple(value.shape) != tuple(shape):
        error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from checkpoint, "
                          f"the shape in current model is {tuple(shape)}.")
        return None
    if value._axis not in (None, 0):
        error_msgs.append(f"qscheme mismatch for {key}: the checkpoint's weight is quantized per channel along axis "
                          f"{value._axis}; oar's int8 kernels take weights quantized per tensor or per output channel "
                          "(axis 0).")
        return None
    if bool((value._zero_point != 0).any().item()):
        error_msgs.append(f"qscheme mismatch for {key}: the checkpoint's weight has zero points "
                          f"{value._zero_point.reshape(-1).tolist()[:4]}...; oar's int8 kernels take symmetric weights "
                          "(zero point 0).")
        return None
    return Q.QTensor(value.codes.contiguous().clone(), value._scale.to(D.float32).clone(),
                     value._zero_point.to(D.int32).clone(), value._axis, Q.qint8)


def bias(value, key, n, error_msgs):
    """(ok, value): a float32 copy of shape [n], or None (a layer without bias)"""
    if value is _MISSING:
        return False, None
    if value is None:
        return True, None
    if not isinstance(value, _C.TensorBase):
        error_msgs.append(f'While copying the parameter named "{key}", expected a Tensor or None from checkpoint but '
                          f"received {type(value).__name__}.")
        return False, None
    if tuple(value.shape) != (n,):
        error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(value.shape)} from checkpoint, "
                          f"the shape in current model is ({n},).")
        return False, None
    return True, value.detach().to(D.float32).clone()


def is_qint8(value):
    """a dtype entry naming torch.qint8 (oar's, or torch's own when a state dict is moved over)"""
    return value is Q.qint8 or str(value) == "torch.qint8"
