"""oar.cpu.amp (torch.cpu.amp): autocast with the CPU's defaults (bfloat16)."""
from ...amp import autocast_mode
from ..._dtype import bfloat16


class autocast(autocast_mode.autocast):
    """torch.cpu.amp.autocast(args...) is oar.autocast("cpu", args...)."""

    def __init__(self, enabled=True, dtype=bfloat16, cache_enabled=True):
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)
