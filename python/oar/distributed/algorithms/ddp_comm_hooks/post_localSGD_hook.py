"""Post-local SGD as a DDP communication hook (torch 1.13's PostLocalSGDState and post_localSGD_hook;
Lin et al., ICLR 2020, arXiv 1808.07217): gradients are averaged over the whole group for
start_localSGD_iter steps, then only within a subgroup (or not at all), so the ranks' models drift
apart between the parameter averages that a model averager (model_averaging.averagers) runs after the
optimizer step."""
from ... import new_subgroups
from ....futures import Future
from . import default_hooks

__all__ = ["PostLocalSGDState", "post_localSGD_hook"]


class PostLocalSGDState:
    """process_group: the group of the warm-up's averages (None: the world); subgroup: the group of the
    later ones (None: new_subgroups() at the first local step, the ranks of this machine);
    start_localSGD_iter: steps of global averaging; post_local_gradient_allreduce: False sends nothing
    after the warm-up (each rank keeps its own gradients). iter counts the steps (the last bucket's call)."""

    __slots__ = ["process_group", "subgroup", "start_localSGD_iter", "post_local_gradient_allreduce", "iter"]

    def __init__(self, process_group, subgroup, start_localSGD_iter, post_local_gradient_allreduce=True):
        self.process_group = process_group
        self.subgroup = subgroup
        self.start_localSGD_iter = start_localSGD_iter
        self.post_local_gradient_allreduce = post_local_gradient_allreduce
        self.iter = 0

    def maybe_increase_iter(self, bucket):
        if bucket.is_last():
            self.iter += 1


def post_localSGD_hook(state, bucket):
    """The bucket averaged over state.process_group while state.iter < start_localSGD_iter, then over
    state.subgroup (or left as this rank's own gradients with post_local_gradient_allreduce=False)."""
    buffer = bucket.buffer()
    if state.iter < state.start_localSGD_iter:
        state.maybe_increase_iter(bucket)
        return default_hooks._allreduce_fut(state.process_group, buffer)
    if not state.post_local_gradient_allreduce:
        fut = Future()
        fut.set_result(buffer)
        return fut
    if state.subgroup is None:
        state.subgroup, _ = new_subgroups()
    return default_hooks._allreduce_fut(state.subgroup, buffer)
