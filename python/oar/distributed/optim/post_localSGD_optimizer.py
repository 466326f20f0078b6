"""PostLocalSGDOptimizer (torch 1.13's torch.distributed.optim.PostLocalSGDOptimizer): a local optimizer
whose step() is followed by a model averager's average_parameters, so post-local SGD needs no averaging
call in the training loop; the averager's step count travels in the state dict ('step')."""
import warnings

from ...optim.optimizer import Optimizer

__all__ = ["PostLocalSGDOptimizer"]


class PostLocalSGDOptimizer(Optimizer):
    """optim: the local optimizer (its param_groups are this one's); averager: a ModelAverager (e.g.
    PeriodicModelAverager(period, warmup_steps=start_localSGD_iter))."""

    def __init__(self, optim, averager):   # the local optimizer holds the parameters: no Optimizer.__init__
        self.optim = optim
        self.param_groups = self.optim.param_groups
        self.averager = averager

    @property
    def state(self):
        return self.optim.state

    def __repr__(self):
        return self.optim.__repr__()

    def state_dict(self):
        """The local optimizer's state dict with the averager's step count as 'step'."""
        sd = self.optim.state_dict()
        sd["step"] = self.averager.step
        return sd

    def load_state_dict(self, state_dict):
        """The local optimizer's state, and the averager's step count (0, with a warning, when absent)."""
        self.optim.load_state_dict(state_dict)
        if "step" in state_dict:
            self.averager.step = state_dict["step"]
        else:
            warnings.warn("Loaded state dict does not contain a step counter for an averager. Setting step "
                          "counter to 0.")
            self.averager.step = 0

    def step(self):
        """The local optimizer's step, then the averager's average_parameters over the param groups."""
        self.optim.step()
        self.averager.average_parameters(params=self.param_groups)

    def zero_grad(self, set_to_none=True):
        self.optim.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group):
        self.optim.add_param_group(param_group)
