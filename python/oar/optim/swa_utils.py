"""torch.optim.swa_utils (torch 1.13): stochastic weight averaging (Izmailov et al. 2018) and
exponential averages of a model's weights, the SWA learning rate schedule, and the pass that
recomputes batch-norm statistics for averaged weights."""
import copy
import math

from .. import nn
from .._grad_mode import no_grad
from .lr_scheduler import LRScheduler


class AveragedModel(nn.Module):
    """A copy of model whose parameters (and buffers with use_buffers) are the average of the
    model's at each update_parameters call: by default the running equal-weight mean, or
    avg_fn(averaged, current, n_averaged) (an exponential average, say)."""

    def __init__(self, model, device=None, avg_fn=None, use_buffers=False):
        super().__init__()
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        from .. import tensor, int64

        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn = avg_fn if avg_fn is not None else _mean_update
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        """What is averaged: the parameters, and the buffers too with use_buffers."""
        return list(model.parameters()) + (list(model.buffers()) if self.use_buffers else [])

    def update_parameters(self, model):
        with no_grad():
            for avg, cur in zip(self._tensors(self.module), self._tensors(model)):
                cur = cur.detach().to(avg.device)
                if int(self.n_averaged) == 0:
                    avg.copy_(cur)
                else:
                    avg.copy_(self.avg_fn(avg.detach(), cur, self.n_averaged.to(avg.device)))
            self.n_averaged.add_(1)


def _mean_update(averaged, current, n):
    return averaged + (current - averaged) / (n + 1)


@no_grad()
def update_bn(loader, model, device=None):
    """One pass over loader in training mode with every batch norm's running statistics reset and
    its momentum None (a cumulative average), so they become the averages over the data for the
    model's current (averaged) weights. Batches that are lists or tuples give their first item."""
    from ..nn.modules.layers import _BatchNorm

    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm) and m.running_mean is not None:
            m.running_mean.zero_()
            m.running_var.fill_(1)
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
        m.num_batches_tracked.zero_()
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's lr from its value to swa_lr over anneal_epochs steps ('cos' or
    'linear'), then holds it: torch 1.13's SWALR, whose lr at each step is recovered from the
    previous one so it composes with other changes to the lr."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1, verbose=False):
        n = len(optimizer.param_groups)
        lrs = list(swa_lr) if isinstance(swa_lr, (list, tuple)) else [swa_lr] * n
        if len(lrs) != n:
            raise ValueError(f"swa_lr must have the same length as optimizer.param_groups: swa_lr has {len(lrs)}, "
                             f"optimizer.param_groups has {n}")
        for lr, g in zip(lrs, optimizer.param_groups):
            g["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        self.anneal_func = _cos_anneal if anneal_strategy == "cos" else _linear_anneal
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)   # (LRScheduler counts the steps, as torch's)

    @staticmethod
    def _from(lr, swa_lr, alpha):
        """The lr before annealing by alpha that gives lr after it."""
        return swa_lr if alpha == 1 else (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        span = max(1, self.anneal_epochs)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / span)))
        alpha = self.anneal_func(max(0, min(1, step / span)))
        groups = self.optimizer.param_groups
        return [g["swa_lr"] * alpha + self._from(g["lr"], g["swa_lr"], prev_alpha) * (1 - alpha) for g in groups]


def _cos_anneal(t):
    return (1 - math.cos(math.pi * t)) / 2


def _linear_anneal(t):
    return t
