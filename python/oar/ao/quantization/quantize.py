"""PyTorch's eager quantization flow: propagate_qconfig_, prepare (observers on the modules that
will be quantized), calibration by running the model, convert (each observed module replaced by
its quantized form, made by from_float). The module types and what they become follow torch's
default static mappings for the layers oar's int8 ops cover."""
import copy

from ... import nn
from ..nn import intrinsic as nni
from ..nn import quantized as nnq
from ..nn.quantized import dynamic as nnqd
from ..nn import qat as nnqat
from ..nn.intrinsic import qat as nniqat
from ..nn.intrinsic import quantized as nniq
from . import fake_quantize as FQ
from .stubs import DeQuantStub, QuantStub


def _static_mappings():
    return {QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize, nn.Conv2d: nnq.Conv2d, nn.Linear: nnq.Linear,
            nn.BatchNorm2d: nnq.BatchNorm2d, nn.Dropout: nnq.Dropout, nn.Hardswish: nnq.Hardswish,
            nn.ReLU6: nnq.ReLU6, nn.ELU: nnq.ELU, nn.LeakyReLU: nnq.LeakyReLU, nni.ConvReLU2d: nniq.ConvReLU2d,
            nni.LinearReLU: nniq.LinearReLU, nni.BNReLU2d: nniq.BNReLU2d, nnq.FloatFunctional: nnq.QFunctional,
            nnqat.Conv2d: nnq.Conv2d, nnqat.Linear: nnq.Linear, nniqat.ConvBn2d: nnq.Conv2d,
            nniqat.ConvBnReLU2d: nniq.ConvReLU2d, nniqat.ConvReLU2d: nniq.ConvReLU2d,
            nniqat.LinearReLU: nniq.LinearReLU}


def _qat_mappings():
    return {nn.Conv2d: nnqat.Conv2d, nn.Linear: nnqat.Linear, nni.ConvBn2d: nniqat.ConvBn2d,
            nni.ConvBnReLU2d: nniqat.ConvBnReLU2d, nni.ConvReLU2d: nniqat.ConvReLU2d,
            nni.LinearReLU: nniqat.LinearReLU}


# QAT: the outputs of these keep a fixed grid ([0, 1] or [-1, 1]), not an observed one
def _special_act_post_process():
    return {nn.Hardsigmoid: FQ.default_fixed_qparams_range_0to1_fake_quant,
            nn.Sigmoid: FQ.default_fixed_qparams_range_0to1_fake_quant,
            nn.Softmax: FQ.default_fixed_qparams_range_0to1_fake_quant,
            nn.Tanh: FQ.default_fixed_qparams_range_neg1to1_fake_quant}


def _dynamic_mappings():
    return {nn.Linear: nnqd.Linear, nni.LinearReLU: nnqd.LinearReLU, nn.LSTM: nnqd.LSTM, nn.GRU: nnqd.GRU,
            nn.LSTMCell: nnqd.LSTMCell, nn.GRUCell: nnqd.GRUCell, nn.RNNCell: nnqd.RNNCell}


def get_default_dynamic_quant_module_mappings():
    return _dynamic_mappings()


def get_default_static_quant_module_mappings():
    return _static_mappings()


def get_default_qat_module_mappings():
    return _qat_mappings()


def get_default_qconfig_propagation_list():
    """the modules prepare() observes: the recurrent layers only quantize dynamically (their outputs are tuples
    an observer cannot take), and the dynamic Linear types are static ones too"""
    return set(_static_mappings()) | set(_qat_mappings()) | {nn.Sequential}


_NO_OBSERVER = (nn.Dropout,)


def propagate_qconfig_(module, qconfig_dict=None, prepare_custom_config_dict=None):
    """Gives each submodule the qconfig of its nearest configured ancestor (its own, or one named in
    qconfig_dict by type or by qualified name, comes first)."""
    def walk(m, parent_qconfig, prefix):
        q = parent_qconfig
        if qconfig_dict:
            q = qconfig_dict.get(type(m), q)
            q = qconfig_dict.get(prefix, q)
        q = getattr(m, "qconfig", q)
        m.qconfig = q
        for name, child in m.named_children():
            walk(child, q, prefix + "." + name if prefix else name)

    walk(module, None, "")


def _observer_hook(module, input, output):
    return module.activation_post_process(output)


def _needs_observer(m):
    return getattr(m, "qconfig", None) is not None


def _add_observers(module, allow, non_leaf):
    special = _special_act_post_process()
    for child in module.children():
        if isinstance(child, _NO_OBSERVER):
            continue
        if isinstance(child, nnq.FloatFunctional):
            if _needs_observer(child):
                child.activation_post_process = child.qconfig.activation()
        elif isinstance(child, nni._FusedModule) or type(child) in non_leaf:
            if _needs_observer(child):  # a fused run or a QAT layer: observe what the whole module gives
                _insert_observer(child)
        elif child.training and type(child) in special:
            if _needs_observer(child):
                _insert_observer(child, special[type(child)])
        else:
            _add_observers(child, allow, non_leaf)
    if not list(module.children()) and not isinstance(module, nn.Sequential) and type(module) in allow \
            and _needs_observer(module) and not isinstance(module, DeQuantStub):  # its output is float: no observer
        _insert_observer(module)


def _insert_observer(m, factory=None):
    m.add_module("activation_post_process", (factory or m.qconfig.activation)())
    m._oar_observer_hook = m.register_forward_hook(_observer_hook)


def prepare(model, inplace=False, allow_list=None, observer_non_leaf_module_list=None,
            prepare_custom_config_dict=None):
    """Observers on every module that convert() will quantize; run calibration data through the
    model next."""
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    if not any(_needs_observer(m) for m in model.modules()):
        import warnings

        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct configuration "
                      "through `qconfig_dict` or by assigning the `.qconfig` attribute directly on submodules")
    _add_observers(model, allow_list or get_default_qconfig_propagation_list(), observer_non_leaf_module_list or ())
    return model


def _swap(module, mapping):
    if _needs_observer(module) and type(module) in mapping:
        new = mapping[type(module)].from_float(module)
        for hook_id, hook in module._forward_pre_hooks.items():
            new.register_forward_pre_hook(hook)
        observer_hook = getattr(module, "_oar_observer_hook", None)
        for hook_id, hook in module._forward_hooks.items():
            if observer_hook is None or hook_id != observer_hook.id:
                new.register_forward_hook(hook)
        new.training = module.training
        return new
    return module


def _one_unit(m):
    """fused runs, float (nn.intrinsic) or QAT (nn.intrinsic.qat), are swapped whole, as torch's"""
    return isinstance(m, nni._FusedModule) or getattr(type(m), "_FUSED", False)


def _convert(module, mapping):
    for name, child in list(module.named_children()):
        if not _one_unit(child):
            _convert(child, mapping)
        module._modules[name] = _swap(child, mapping)


def _remove_qconfig(module):
    """qconfigs, and the observers (with their hooks) left on modules convert did not swap."""
    from .observer import ObserverBase

    for m in module.modules():
        m.__dict__.pop("qconfig", None)
        app = m._modules.get("activation_post_process")
        if isinstance(app, (ObserverBase, FQ.FakeQuantizeBase)):
            del m._modules["activation_post_process"]
            hook = m.__dict__.pop("_oar_observer_hook", None)
            if hook is not None:
                hook.remove()


def convert(module, mapping=None, inplace=False, remove_qconfig=True, is_reference=False,
            convert_custom_config_dict=None):
    """Each prepared and calibrated module becomes its quantized form (weights quantized once,
    the observed scale and zero point fixed)."""
    if is_reference:
        raise NotImplementedError("convert(is_reference=True): reference quantized modules are not offered")
    if not inplace:
        module = copy.deepcopy(module)
    _convert(module, mapping or _static_mappings())
    if remove_qconfig:
        _remove_qconfig(module)
    return module


def quantize(model, run_fn, run_args, mapping=None, inplace=False):
    """prepare, run_fn(model, *run_args) to calibrate, convert."""
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    prepare(model, inplace=True)
    run_fn(model, *run_args)
    convert(model, mapping, inplace=True)
    return model


def quantize_dynamic(model, qconfig_spec=None, dtype=None, mapping=None, inplace=False):
    """Linear, LSTM, GRU and the recurrent cells (by default; or the types / qualified names in qconfig_spec)
    get int8 weights and quantize their inputs per call (nn.quantized.dynamic)."""
    from ... import _qtensor as Q
    from .qconfig import default_dynamic_qconfig

    dtype = Q.qint8 if dtype is None else dtype
    if dtype is not Q.qint8:
        raise NotImplementedError(f"quantize_dynamic: dtype {dtype!r} is not offered; oar quantizes dynamically to "
                                  "torch.qint8")
    if qconfig_spec is None:
        qconfig_spec = {nn.Linear: default_dynamic_qconfig, nn.LSTM: default_dynamic_qconfig,
                        nn.GRU: default_dynamic_qconfig, nn.LSTMCell: default_dynamic_qconfig,
                        nn.RNNCell: default_dynamic_qconfig, nn.GRUCell: default_dynamic_qconfig}
    elif isinstance(qconfig_spec, set):
        qconfig_spec = dict.fromkeys(qconfig_spec, default_dynamic_qconfig)
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping or _dynamic_mappings(), inplace=True)
    return model


def prepare_qat(model, mapping=None, inplace=False):
    """Quantization-aware training: layers become their QAT forms (weights fake-quantized in every
    forward; conv+bn runs keep training their BatchNorm) and fake quantizers observe the activations.
    The model must be in training mode; convert() after training gives the int8 model."""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    if not inplace:
        model = copy.deepcopy(model)
    mapping = mapping or _qat_mappings()
    propagate_qconfig_(model)
    _convert(model, mapping)
    prepare(model, inplace=True, observer_non_leaf_module_list=set(mapping.values()))
    return model


def quantize_qat(model, run_fn, run_args, inplace=False):
    """prepare_qat, run_fn(model, *run_args) to train, convert."""
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, *run_args)
    convert(model, inplace=True)
    return model
