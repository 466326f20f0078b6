"""Model averagers (torch 1.13's model_averaging.averagers): PeriodicModelAverager averages the
parameters across the group every `period` steps once `warmup_steps` steps have passed; with
post_localSGD_hook (whose start_localSGD_iter should equal warmup_steps) it is post-local SGD."""
import warnings
from abc import ABC, abstractmethod

from ... import GroupMember
from . import utils

__all__ = ["ModelAverager", "PeriodicModelAverager"]


class ModelAverager(ABC):
    """Base of the averagers: process_group (None: the world) and a step counter."""

    def __init__(self, process_group=None):
        self.process_group = process_group if process_group is not None else GroupMember.WORLD
        self.step = 0

    @abstractmethod
    def average_parameters(self, params):
        raise NotImplementedError


class PeriodicModelAverager(ModelAverager):
    """average_parameters(params), called once per training step after optimizer.step(), averages params
    (model.parameters() or optimizer.param_groups; those with a gradient) when step >= warmup_steps and
    (step - warmup_steps) % period == 0, then counts the step."""

    def __init__(self, period, warmup_steps=0, process_group=None):
        super().__init__(process_group)
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        self.warmup_steps = warmup_steps
        if period < 1:
            raise ValueError("Arg ``period`` must be a positive value.")
        if period == 1:
            warnings.warn("When period is 1, no need to use model averaging because the communication cost of "
                          "all-reducing parameters will be no less than the cost of all-reducing gradients by "
                          "DistributedDataParallel in the backward pass. Therefore, only DistributedDataParallel "
                          "should be used for this case.")
        self.period = period

    def average_parameters(self, params):
        if self.step >= self.warmup_steps and (self.step - self.warmup_steps) % self.period == 0:
            utils.average_parameters_or_parameter_groups(params, self.process_group)
        self.step += 1
