"""nn.DataParallel: torch's single-process wrapper that splits a batch over GPUs. oar's tensors here
live on the host, so the wrapped module runs the whole batch (torch does the same when no GPU is
visible); the wrapper keeps torch's "module." parameter names and its errors. Multi-device training
is DistributedDataParallel's (docs/dist.md)."""
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        from ... import cuda

        if device_ids and cuda.is_available() and len(device_ids) > 1:
            raise NotImplementedError("DataParallel over several GPUs is not offered: use "
                                      "DistributedDataParallel (one process per GPU), as torch recommends")
        self.module, self.device_ids, self.output_device, self.dim = module, list(device_ids or []), output_device, dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """torch.nn.parallel.data_parallel: module(*inputs) here (see DataParallel)."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    return module(*inputs, **(module_kwargs or {}))
