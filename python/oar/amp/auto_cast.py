"""paddle.amp.auto_cast over oar's autocast regions: level "O1" is autocast with oar's class table
(which follows Paddle's O1 lists); "O2" is the C core's level O2, for models decorated by
oar.amp.decorate: with f16/bf16 parameters an op whose float inputs are all low runs low, fp32
ops (reductions, softmax, losses) still run in f32 and promote ops meeting an f32 input promote.
custom_white_list / custom_black_list move ops (by oar's op names) to the low / f32 class."""
from .._dtype import bfloat16, float16
from .autocast_mode import autocast

_LEVELS = {"O0": 0, "O1": 1, "O2": 2}
_DTYPES = {"float16": float16, "bfloat16": bfloat16}


class auto_cast(autocast):
    """auto_cast(enable=True, custom_white_list=None, custom_black_list=None, level='O1',
    dtype='float16', use_promote=True): a context manager (and decorator), nestable; enable=False
    or level "O0" opens a region without casts."""

    def __init__(self, enable=True, custom_white_list=None, custom_black_list=None, level="O1", dtype="float16",
                 use_promote=True):
        if level not in _LEVELS:
            raise ValueError(f"auto_cast: expected level 'O0', 'O1' or 'O2', got {level!r}")
        if dtype not in _DTYPES and dtype not in (float16, bfloat16):
            raise ValueError(f"auto_cast: expected dtype 'float16' or 'bfloat16', got {dtype!r}")
        if not use_promote:
            raise ValueError("auto_cast: use_promote=False is not offered: oar's regions always promote an op's "
                             "float inputs to the widest (leave use_promote True)")
        white, black = (None if v is None else sorted(v) for v in (custom_white_list, custom_black_list))
        both = set(white or ()) & set(black or ())
        if both:
            raise ValueError(f"auto_cast: ops {sorted(both)} are in both custom_white_list and custom_black_list")
        super().__init__("cpu", _DTYPES.get(dtype, dtype), enabled=bool(enable) and level != "O0", lists="oar",
                         custom_low=white, custom_fp32=black)
        self._extra["level"] = _LEVELS[level]
        self.level = level


amp_guard = auto_cast  # Paddle's older name
