"""paddle.amp.decorate over oar's O2 machinery (oar_amp_decorate_params, docs/amp.md "O2 from
Python"): the models' parameters become f16/bf16 in place (norm layers and excluded_layers keep
f32), and each optimizer is rebuilt over f32 master copies, so its update runs in f32 and is
rounded back into the parameters after every step."""
from .. import _C
from .._dtype import bfloat16, float16, float32, float64

_DTYPES = {"float16": float16, "bfloat16": bfloat16}
_SAVE_DTYPES = {"float16": float16, "bfloat16": bfloat16, "float32": float32, "float64": float64}


def _is_norm(layer):
    """Norm layers keep f32 parameters (Paddle's O2 keeps them, oar's C decorate too)."""
    return "Norm" in type(layer).__name__


def _excluded(excluded_layers):
    """excluded_layers as (instances, types): a layer, a layer type, or a list of them."""
    from ..nn.modules.module import Module

    if excluded_layers is None:
        return [], ()
    items = excluded_layers if isinstance(excluded_layers, (list, tuple)) else [excluded_layers]
    layers, types = [], []
    for x in items:
        if isinstance(x, Module):
            layers.append(x)
        elif isinstance(x, type) and issubclass(x, Module):
            types.append(x)
        else:
            raise TypeError(f"decorate: expected excluded_layers to be a layer, a layer type or a list of them, got "
                            f"{type(x).__name__}")
    return layers, tuple(types)


def _plan(models, excluded_layers):
    """(params, names, keep): the models' trainable parameters, each once, and whether it stays f32."""
    layers, types = _excluded(excluded_layers)
    params, names, keep, seen = [], [], [], set()
    for i, model in enumerate(models):
        prefix = f"{i}." if len(models) > 1 else ""
        for mname, layer in model.named_modules():
            stays = _is_norm(layer) or isinstance(layer, types) or any(layer is x for x in layers)
            for pname, p in layer.named_parameters(recurse=False):
                if p is None or not p.requires_grad or id(p) in seen:
                    continue
                seen.add(id(p))
                params.append(p)
                names.append(prefix + (f"{mname}.{pname}" if mname else pname))
                keep.append(stays)
    return params, names, keep


def _check_optimizer(optimizer, param_ids):
    """Refusals before anything is converted: not an oar.optim optimizer, stepped already, or
    holding a parameter of none of the models."""
    from ..optim.optimizer import _KINDS, Optimizer

    if not isinstance(optimizer, Optimizer) or optimizer._kind not in _KINDS:
        raise TypeError(f"decorate: expected oar.optim optimizers (SGD, Adam, AdamW...), got "
                        f"{type(optimizer).__name__}")
    if optimizer._amp is not None:
        raise RuntimeError(f"decorate: {type(optimizer).__name__} is decorated already; decorate each optimizer once")
    if optimizer._c is not None and optimizer._c.steps() > 0:
        raise RuntimeError("decorate: the optimizer has stepped already; decorate the models and optimizers before "
                           "the first step (its state would belong to the f32 parameters)")
    if any(id(p) not in param_ids for g in optimizer.param_groups for p in g["params"]):
        raise ValueError("decorate: the optimizer holds a parameter that is not one of the decorated models' "
                         "trainable parameters; pass every model whose parameters it updates")


def _attach(optimizer, masters, master_of):
    """Rebuilds optimizer's C optimizer over the masters of its parameters, group by group."""
    from ..optim.optimizer import _KINDS

    c, ids = None, []
    for g in optimizer.param_groups:
        if not g["params"]:
            ids.append(None)
            continue
        ms = [master_of[id(p)] for p in g["params"]]
        if c is None:
            c = _C.Optimizer(ms, _KINDS[optimizer._kind], optimizer._c_options(g))
            ids.append(0)
        else:
            ids.append(c.add_group(ms, optimizer._c_options(g)))
    optimizer._c, optimizer._c_groups = c, ids
    optimizer._amp = masters


def _checked_dtype(dtype):
    if isinstance(dtype, str):
        if dtype not in _DTYPES:
            raise ValueError(f"decorate: expected dtype 'float16' or 'bfloat16', got {dtype!r}")
        return _DTYPES[dtype]
    if dtype in (float16, bfloat16):
        return dtype
    raise ValueError(f"decorate: expected dtype 'float16' or 'bfloat16', got {dtype!r}")


class _Masters:
    """One decorate call's masters: the C object, and the (name, parameter) pairs it was made of."""

    def __init__(self, params, names, keep, dtype, save_dtype):
        self._c = _C.AmpMasters(params, names, keep, dtype.code)
        self._named_params = list(zip(names, params))
        self.dtype, self.save_dtype = dtype, save_dtype
        self.master_of = {id(p): m for p, (_, m) in zip(params, self.named_masters())}

    def __deepcopy__(self, memo):
        """A deep copy of a decorated model is a plain model with low parameters: the masters (and
        the optimizer updating them) stay the original's."""
        return None

    def named_masters(self):
        return self._c.masters()

    def sync_grads(self):
        self._c.sync_grads()

    def sync_params(self):
        self._c.sync_params()


def _save_masters(model, destination, prefix):
    """Module.state_dict's hook on a decorated model with save_dtype: each low parameter's f32
    master, cast to save_dtype, in place of the parameter."""
    masters = model.__dict__.get("_amp_o2")
    if masters is None or masters.save_dtype is None:
        return
    for k, p in model.named_parameters():
        m = masters.master_of.get(id(p))
        if m is not None and prefix + k in destination:
            destination[prefix + k] = m.detach().clone().to(masters.save_dtype)


def _load_masters(model, state_dict):
    """Module.load_state_dict's hook: the masters take the loaded values exactly (f32), then are
    rounded into the low parameters (which the plain load rounded already from the same values)."""
    from .._grad_mode import no_grad

    masters = model.__dict__.get("_amp_o2")
    if masters is None:
        return
    with no_grad():
        for k, p in model.named_parameters():
            m = masters.master_of.get(id(p))
            if m is not None and k in state_dict and p.dtype != float32:
                m.copy_(state_dict[k].detach().to(float32))
    masters.sync_params()


def master_params(optimizer):
    """The f32 tensors the optimizer updates: O2's masters after decorate (where the gradients are
    after the scaler's unscale_ or the step: clip these), else its parameters."""
    amp = getattr(optimizer, "_amp", None)
    if amp is None:
        return [p for g in optimizer.param_groups for p in g["params"]]
    return [t for _, t in amp.named_masters()]


def decorate(models, optimizers=None, level="O2", dtype="float16", master_weight=None, save_dtype=None,
             master_grad=False, excluded_layers=None):
    """paddle.amp.decorate. level "O1" returns the arguments unchanged; "O2" converts the models'
    parameters to dtype in place (norm layers and excluded_layers keep f32) and gives each
    optimizer f32 master weights: its update runs on them and is written back rounded. Returns
    models, or (models, optimizers) when optimizers are given, in the structure passed."""
    from ..nn.modules.module import Module

    if level not in ("O1", "O2"):
        raise ValueError(f"decorate: expected level 'O1' or 'O2', got {level!r}")
    low = _checked_dtype(dtype)
    if save_dtype is not None and save_dtype not in _SAVE_DTYPES:
        raise ValueError(f"decorate: expected save_dtype None, 'float16', 'bfloat16', 'float32' or 'float64', got "
                         f"{save_dtype!r}")
    if master_weight is False and level == "O2" and optimizers is not None:
        raise ValueError("decorate: master_weight=False is not offered: oar's optimizers update f32 parameters, so "
                         "O2 keeps f32 master weights (leave master_weight None or True)")
    model_list = list(models) if isinstance(models, (list, tuple)) else [models]
    for m in model_list:
        if not isinstance(m, Module):
            raise TypeError(f"decorate: expected models to be a layer or a list of layers, got {type(m).__name__}")
    opt_list = [] if optimizers is None else (list(optimizers) if isinstance(optimizers, (list, tuple))
                                              else [optimizers])
    if level == "O2":
        for m in model_list:
            if getattr(m, "_amp_o2", None) is not None:
                raise RuntimeError(f"decorate: {type(m).__name__} is decorated already (its parameters are "
                                   f"{m._amp_o2.dtype}); decorate each model once")
        params, names, keep = _plan(model_list, excluded_layers)
        for o in opt_list:
            _check_optimizer(o, {id(p) for p in params})
        masters = _Masters(params, names, keep, low, _SAVE_DTYPES.get(save_dtype))
        for o in opt_list:
            _attach(o, masters, masters.master_of)
        for m in model_list:
            m.__dict__.update(_amp_o2=masters, _state_dict_hook=_save_masters, _load_state_dict_hook=_load_masters)
    if optimizers is None:
        return models
    return models, optimizers
