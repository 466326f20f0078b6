"""Averaging parameters across a process group (torch 1.13's model_averaging.utils): the parameters
flattened into one buffer, divided by the group's size, allreduced in one message, copied back."""
from ... import GroupMember, all_reduce, get_world_size

__all__ = ["average_parameters", "get_params_to_average", "average_parameters_or_parameter_groups"]


def average_parameters(params, process_group):
    """Every parameter of params (an iterable) replaced by its average over process_group (None: the
    world); a rank outside the group leaves them alone. Mixed dtypes travel in float64 and go back to
    their own (torch packs them in the promoted type)."""
    from .... import cat, float64, no_grad

    group = process_group if process_group is not None else GroupMember.WORLD
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    params = list(params)
    if not params:
        return
    dtypes = {p.dtype for p in params}
    dtype = dtypes.pop() if len(dtypes) == 1 else float64
    with no_grad():
        flat = cat([p.detach().reshape(-1).to(dtype) for p in params])
        flat /= get_world_size(group)
        all_reduce(flat, group=process_group)
        at = 0
        for p in params:
            p.copy_(flat[at:at + p.numel()].view(tuple(p.shape)).to(p.dtype))
            at += p.numel()


def get_params_to_average(params):
    """The parameters with a gradient, from model.parameters() or an optimizer's param_groups."""
    from .... import Tensor

    out = []
    for param in params:
        if isinstance(param, Tensor):
            if param.grad is not None:
                out.append(param)
        elif isinstance(param, dict):
            out.extend(p for p in param["params"] if p.grad is not None)
        else:
            raise NotImplementedError(f"Parameter input of type {type(param)} is not supported")
    return out


def average_parameters_or_parameter_groups(params, process_group):
    """average_parameters over get_params_to_average(params)."""
    average_parameters(iter(get_params_to_average(params)), process_group)
