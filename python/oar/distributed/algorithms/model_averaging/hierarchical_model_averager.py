"""Hierarchical model averaging (torch 1.13's hierarchical_model_averager; hierarchical SGD): groups of
growing size average the parameters with growing periods. After the warm-up, a step divisible by
several periods averages only in the group of the largest of them, which contains the smaller ones'."""
import logging
import warnings
from collections import OrderedDict

from ... import get_world_size, new_subgroups
from . import utils
from .averagers import ModelAverager

__all__ = ["HierarchicalModelAverager"]

logger = logging.getLogger(__name__)


class HierarchicalModelAverager(ModelAverager):
    """period_group_size_dict: an ordered mapping period -> group size, periods increasing; the last
    size must be process_group's (None: the world), the others are cut by new_subgroups(group_size)
    (consecutive ranks). average_parameters(params), called after each optimizer.step(), averages params
    in the group of the largest period dividing `step` once step >= warmup_steps, then counts the step."""

    def __init__(self, period_group_size_dict=None, warmup_steps=0, process_group=None):
        super().__init__(process_group)
        if not period_group_size_dict:
            raise ValueError("Arg ``period_group_size_dict`` must not be empty.")
        self._periods = list(period_group_size_dict.keys())
        if self._periods[0] <= 0:
            raise ValueError("The minimum period in arg ``period_group_size_dict`` must be a positive value.")
        if self._periods[-1] == 1:
            warnings.warn("When the maximum period in arg ``period_group_size_dict`` is 1, no need to use model "
                          "averaging because the communication cost of all-reducing parameters will be no less "
                          "than the cost of all-reducing gradients by DistributedDataParallel in the backward "
                          "pass. Therefore, only DistributedDataParallel should be used for this case.")
        whole = get_world_size(group=self.process_group)
        sizes = list(period_group_size_dict.values())
        if sizes[-1] != whole:
            raise ValueError(f"The last value in arg ``period_process_group_dict`` {sizes[-1]} must be equal to "
                             f"the size of arg ``process_group`` {whole}.")
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        self.warmup_steps = warmup_steps
        self.period_process_group_dict = OrderedDict()
        for period, size in period_group_size_dict.items():
            logger.info("each group of %d processes averages the parameters every %d iterations, "
                        "unless a larger group averages them then", size, period)
            if size == whole:
                self.period_process_group_dict[period] = self.process_group
            else:
                self.period_process_group_dict[period], _ = new_subgroups(group_size=size, group=self.process_group)

    def _find_process_group(self):
        """The group of the largest period that divides step, or None."""
        for period in reversed(self._periods):
            if self.step % period == 0:
                return self.period_process_group_dict[period]
        return None

    def average_parameters(self, params):
        """params: model.parameters() or an optimizer's param_groups (those holding a gradient are averaged)."""
        if self.step >= self.warmup_steps:
            group = self._find_process_group()
            if group is not None:
                utils.average_parameters_or_parameter_groups(params, group)
        self.step += 1
