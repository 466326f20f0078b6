"""Uneven inputs across several joinables (torch 1.13's torch.distributed.algorithms.Join).

A rank that runs out of inputs leaves its loop; at the end of the `with Join([...])` block it
shadows the collectives of the ranks still training until every rank has joined: each round the
context counts the ranks still training (an allreduce to which a training rank adds 1 from the
first joinable's notify_join_context, before its step, and a joined rank adds 0), then runs
every joinable's JoinHook.main_hook, which mirrors that joinable's collectives of one step; once
the count is 0, every post_hook runs with whether this rank joined last. DistributedDataParallel
is a Joinable (its hook shadows the buffer broadcast, the backward-sync flag and the gradient
buckets, then sends the last joiner's model to all).

The context's count and early-termination flag are labelled allreduces (oar's fixed-order
allreduce with a check of their own), so a rank that runs some other collective meanwhile fails
with both named ("mismatched collective") instead of pairing wrongly or hanging, as torch would."""
import warnings
from abc import ABC, abstractmethod
from typing import NamedTuple

from ... import _C
from .. import _dense, _resolve, get_rank

_COUNT = "Join: counting the ranks still training"
_THROW = "Join: early termination (throw_on_early_termination)"


class JoinHook:
    """What a joined rank runs for one joinable: main_hook once per step of the ranks still
    training (the joinable's collectives of that step), post_hook once all have joined."""

    def main_hook(self):
        pass

    def post_hook(self, is_last_joiner):
        pass


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config():
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable(ABC):
    """A class that can run under Join: it calls Join.notify_join_context(self) before each step's
    collectives, and gives a JoinHook, the device of the context's tensors and its process group."""

    @abstractmethod
    def __init__(self):
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abstractmethod
    def join_hook(self, **kwargs):
        ...

    @property
    @abstractmethod
    def join_device(self):
        ...

    @property
    @abstractmethod
    def join_process_group(self):
        ...


def _reduce(value, group, label, async_op=False):
    """value summed over the group as a labelled protocol step: the handle and the tensor."""
    from ... import tensor

    t = tensor([float(value)])
    h = _C.dist_allreduce(_dense(t, "Join"), "sum", True, _resolve(group, "Join"), label)
    if not async_op:
        h.wait()
    return h, t


class _CountWork:
    """The training rank's count, in flight (torch's Work): wait() completes it; count() its value."""

    def __init__(self, handle, t):
        self._h, self._t = handle, t

    def wait(self, timeout=None):
        if self._h is not None:
            h, self._h = self._h, None
            h.wait()
        return True

    def is_completed(self):
        return self._h is None or self._h.is_completed()

    def result(self):
        self.wait()
        return [self._t]

    def count(self):
        self.wait()
        return int(self._t.item())


class Join:
    """Join(joinables, enable=True, throw_on_early_termination=False, **kwargs): the context manager
    around a training loop with uneven inputs (kwargs go to every joinable's join_hook, e.g.
    divide_by_initial_world_size for DistributedDataParallel). All joinables must share one
    process group. throw_on_early_termination: once a rank runs out, every rank raises
    RuntimeError (the joined one at the end of the block, the others at their next step)."""

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = bool(enable)
        self._throw_on_early_termination = bool(throw_on_early_termination)
        self._set_joinable_configs()
        self._extract_dist_info()

    def _set_joinable_configs(self):
        first = True
        for j in self._joinables:
            j._join_config = _JoinConfig(enable=self._enable, throw_on_early_termination=self._throw_on_early_termination,
                                         is_first_joinable=first)
            first = False

    def _extract_dist_info(self):
        group, device = None, None
        for j in self._joinables:
            if group is None:
                group = j.join_process_group
            elif group != j.join_process_group:
                raise ValueError("Using join context manager with multiple process groups")
            if device is None:
                device = j.join_device
        self._process_group, self._device = group, device
        self._rank = get_rank(group)

    def __enter__(self):
        return self

    def __exit__(self, type, value, traceback):
        if not self._enable or type:
            return None   # an exception propagates as it is
        all_joined, is_last_joiner, i = False, True, 0
        WARN_THRESHOLD = 1000
        while not all_joined:
            if i > WARN_THRESHOLD:
                warnings.warn(f"Detected uneven input skew of greater than {WARN_THRESHOLD}. This means that rank "
                              f"{self._rank} has at least {WARN_THRESHOLD} fewer inputs than other currently-active "
                              "ranks. This level of skew could lead to performance degradation during training.")
            count = self._get_num_nonjoined_procs()
            if count == 0:
                all_joined = True
            else:
                if self._throw_on_early_termination:
                    self._notify_procs_to_terminate()
                for hook in self._join_hooks:
                    if hasattr(hook, "_join_count"):   # oar's DDP hook: the training ranks' divisor needs it
                        hook._join_count = count
                    hook.main_hook()
                is_last_joiner = False
                i += 1
        for hook in self._join_hooks:
            hook.post_hook(is_last_joiner)
        return None

    def _get_num_nonjoined_procs(self):
        _, t = _reduce(0, self._process_group, _COUNT)
        return int(t.item())

    def _notify_procs_to_terminate(self):
        _reduce(1, self._process_group, _THROW)
        raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable):
        """Called by a joinable before its step's collectives: the first joinable of an enabled
        context adds this rank to the count (left in flight: the returned work) and, with
        throw_on_early_termination, raises if some rank has run out. None for the others."""
        assert hasattr(joinable, "_join_config"), \
            f"Check that the {type(joinable)} constructor calls the ``Joinable`` constructor"
        cfg = joinable._join_config
        if not cfg.is_first_joinable or not cfg.enable:
            return None
        group = joinable.join_process_group
        work = _CountWork(*_reduce(1, group, _COUNT, async_op=True))
        if cfg.throw_on_early_termination:
            _, flag = _reduce(0, group, _THROW)
            if flag.item():
                work.wait()
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing across all ranks.")
        return work
