"""torch.distributed.algorithms.ddp_comm_hooks: DistributedDataParallel's communication hooks
(docs/dist.md, "Communication hooks"): default_hooks (allreduce, fp16 and bf16 compression),
powerSGD_hook (low-rank compression: per matrix, or the whole bucket batched), ddp_zero_hook
(ZeroRedundancyOptimizer's step inside the hook, at the end or bucket by bucket), post_localSGD_hook
(global averaging, then local SGD), quantization_hooks (8-bit codes all-gathered) and debugging_hooks
(noop_hook); DDPCommHookType names them for register_ddp_comm_hook, as torch's enum does."""
from enum import Enum
from functools import partial

from . import debugging_hooks as debugging
from . import default_hooks as default
from . import powerSGD_hook as powerSGD
from . import quantization_hooks as quantization

__all__ = ["DDPCommHookType", "register_ddp_comm_hook"]


def _ddp_comm_hook_wrapper(comm_hook, model, state):
    model.register_comm_hook(state, comm_hook)


def _powerSGD_comm_hook_wrapper(comm_hook, model, state, matrix_approximation_rank, start_powerSGD_iter=1_000):
    """state is the process group here, as for the other types; PowerSGD's own state is made from it."""
    powerSGD_state = powerSGD.PowerSGDState(process_group=state, matrix_approximation_rank=matrix_approximation_rank,
                                            start_powerSGD_iter=start_powerSGD_iter)
    model.register_comm_hook(powerSGD_state, comm_hook)


class DDPCommHookType(Enum):
    """The hooks by name; each value registers its hook: DDPCommHookType.X.value(model=ddp, state=group)."""
    ALLREDUCE = partial(_ddp_comm_hook_wrapper, comm_hook=default.allreduce_hook)
    FP16_COMPRESS = partial(_ddp_comm_hook_wrapper, comm_hook=default.fp16_compress_hook)
    BF16_COMPRESS = partial(_ddp_comm_hook_wrapper, comm_hook=default.bf16_compress_hook)
    QUANTIZE_PER_TENSOR = partial(_ddp_comm_hook_wrapper, comm_hook=quantization.quantization_pertensor_hook)
    QUANTIZE_PER_CHANNEL = partial(_ddp_comm_hook_wrapper, comm_hook=quantization.quantization_perchannel_hook)
    POWER_SGD = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.powerSGD_hook, matrix_approximation_rank=1)
    POWER_SGD_RANK2 = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.powerSGD_hook,
                              matrix_approximation_rank=2)
    BATCHED_POWER_SGD = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.batched_powerSGD_hook,
                                matrix_approximation_rank=1)
    BATCHED_POWER_SGD_RANK2 = partial(_powerSGD_comm_hook_wrapper, comm_hook=powerSGD.batched_powerSGD_hook,
                                      matrix_approximation_rank=2)
    NOOP = partial(_ddp_comm_hook_wrapper, comm_hook=debugging.noop_hook)


def register_ddp_comm_hook(comm_hook_type, model, state=None):
    """Registers the hook comm_hook_type names on the DDP model, state (a process group or None) given to it."""
    comm_hook_type.value(model=model, state=state)
