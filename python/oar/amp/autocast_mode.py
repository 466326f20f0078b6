"""torch.autocast over oar's autocast regions (include/oar/amp.h). torch keeps one state per
device type (CPU: enabled, dtype; CUDA: enabled, dtype), set by the context manager on entry
and restored on exit, with the set_autocast_* functions below; oar's C core has one region
stack per thread whose innermost region casts the ops of every device. This module keeps
torch's per-device state for torch's queries and mirrors it into one C region it holds
(closed and reopened whenever the state changes), so a region's casts are ordinary ops that
autograd records and oar.jit traces."""
import functools
import threading
import warnings

from .. import _C
from .._dtype import bfloat16, float16

_POLICIES = {"table": 1, "auto": 0}  # oar_amp_cpu_policy: TABLE is torch's (the class table on any CPU)
# oar's fp32 ops that torch 1.13's CPU bf16 autocast runs in their input's dtype (it keeps only
# prod, losses, linalg and a few more in fp32; oar's table follows the CUDA lists, where
# reductions and softmax are fp32): under lists="torch" a CPU bf16 region lets them follow
_TORCH_CPU_BF16_FOLLOW = ("sum", "mean", "var", "std", "logsumexp", "norm", "vector_norm", "cumsum", "cumprod",
                          "softmax", "log_softmax")


class _State(threading.local):  # torch's autocast state is per thread, as oar's C regions are
    def __init__(self):
        self.cpu, self.cpu_dtype = False, bfloat16
        self.gpu, self.gpu_dtype = False, float16
        self.last = "cpu"       # the device type enabled last: its dtype rules when both are on
        self.cache = True
        self.nesting = 0
        self.extra = {}         # oar's options of the innermost region (cpu_policy, custom lists)
        self.held = False       # this thread holds an oar region


_state = _State()


def _cuda_available():
    from .._device import cuda

    return cuda.is_available()


def _apply():
    """Closes the C region this module holds and opens the one the state asks for."""
    s = _state
    if s.held:
        _C.autocast_end()
        s.held = False
    on = {"cpu": s.cpu, "cuda": s.gpu and _cuda_available()}
    if not (on["cpu"] or on["cuda"]):
        return
    dev = s.last if on[s.last] else ("cpu" if on["cpu"] else "cuda")
    dt = s.cpu_dtype if dev == "cpu" else s.gpu_dtype
    if dt not in (bfloat16, float16):
        return  # torch's CPU autocast of another dtype casts nothing either
    x = s.extra
    low, fp32, follow = (list(x.get(k) or ()) for k in ("custom_low", "custom_fp32", "custom_follow"))
    if dev == "cpu" and dt is bfloat16 and x.get("lists", "torch") == "torch":
        follow = [n for n in _TORCH_CPU_BF16_FOLLOW if n not in low and n not in fp32] + follow
    _C.autocast_begin(True, dt.code, x.get("level", 1), _POLICIES[x.get("cpu_policy", "table")], low, fp32, follow)
    s.held = True


def _state_key():
    """What a compiled function's cache keys on: the region this thread holds (None: none)."""
    s = _state
    if not s.held:
        return None
    x = s.extra
    return (_C.autocast_dtype(), x.get("level", 1), x.get("cpu_policy"), x.get("lists"), *(tuple(x.get(k) or ()) for k in
                                                       ("custom_low", "custom_fp32", "custom_follow")))


def is_autocast_enabled():
    """torch's: whether CUDA autocast is on."""
    return _state.gpu


def is_autocast_cpu_enabled():
    return _state.cpu


def get_autocast_cpu_dtype():
    return _state.cpu_dtype


def get_autocast_gpu_dtype():
    return _state.gpu_dtype


def set_autocast_enabled(enabled):
    _state.gpu = bool(enabled)
    if enabled:
        _state.last = "cuda"
    _apply()


def set_autocast_cpu_enabled(enabled):
    _state.cpu = bool(enabled)
    if enabled:
        _state.last = "cpu"
    _apply()


def _checked_dtype(dt, fn):
    from .._dtype import dtype

    if not isinstance(dt, dtype):
        raise TypeError(f"{fn}(): argument 'dtype' must be oar.dtype, not {type(dt).__name__}")
    return dt


def set_autocast_cpu_dtype(dtype):
    _state.cpu_dtype = _checked_dtype(dtype, "set_autocast_cpu_dtype")
    _apply()


def set_autocast_gpu_dtype(dtype):
    _state.gpu_dtype = _checked_dtype(dtype, "set_autocast_gpu_dtype")
    _apply()


def is_autocast_cache_enabled():
    return _state.cache


def set_autocast_cache_enabled(enabled):
    _state.cache = bool(enabled)  # oar keeps no cache of cast weights: each cast is an op of the step


def clear_autocast_cache():
    pass


def autocast_increment_nesting():
    _state.nesting += 1
    return _state.nesting


def autocast_decrement_nesting():
    _state.nesting -= 1
    return _state.nesting


def autocast_decorator(autocast_instance, func):
    @functools.wraps(func)
    def decorate_autocast(*args, **kwargs):
        with autocast_instance:
            return func(*args, **kwargs)

    return decorate_autocast


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a context
    manager or decorator in whose region ops run in f16/bf16 or f32 per oar's class table
    (docs/amp.md), which follows torch's lists. Beyond torch: "cpu" takes float16 as well as
    bfloat16, and the keyword-only oar options cpu_policy ("table": the class table on any CPU,
    torch's; "auto": oar_amp_cpu_policy's AUTO, low ops stay f32 on CPUs without native bf16),
    lists ("torch": a CPU bf16 region makes torch 1.13's CPU choices, reductions and softmax
    following their input; "oar": oar's class table, as `oar train --amp`) and custom_low /
    custom_fp32 / custom_follow (op names moved between classes)."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None, *, cpu_policy="table",
                 lists="torch", custom_low=None, custom_fp32=None, custom_follow=None):
        if not isinstance(device_type, str):
            raise TypeError(f"autocast: expected device_type 'cuda' or 'cpu' (a str), got {type(device_type).__name__}")
        self.device = device_type
        if device_type == "cuda":
            self.fast_dtype = get_autocast_gpu_dtype()
        elif device_type == "cpu":
            self.fast_dtype = get_autocast_cpu_dtype()
        else:
            raise RuntimeError("User specified autocast device_type must be 'cuda' or 'cpu'")
        if cpu_policy not in _POLICIES:
            raise ValueError(f"autocast: expected cpu_policy 'table' or 'auto', got {cpu_policy!r}")
        if lists not in ("torch", "oar"):
            raise ValueError(f"autocast: expected lists 'torch' or 'oar', got {lists!r}")
        self._extra = {"cpu_policy": cpu_policy, "lists": lists, "custom_low": custom_low, "custom_fp32": custom_fp32,
                       "custom_follow": custom_follow}
        for k in ("custom_low", "custom_fp32", "custom_follow"):
            v = self._extra[k]
            if v is not None and (isinstance(v, str) or not all(isinstance(n, str) for n in v)):
                raise TypeError(f"autocast: expected {k} to be a list of op names, got {v!r}")
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled and device_type == "cuda" and not _cuda_available():
            warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling")
            enabled = False
        if dtype is not None:
            self.fast_dtype = dtype
        if self.fast_dtype not in (bfloat16, float16):
            warnings.warn(f"In {device_type.upper()} autocast, but the target dtype is not supported. Disabling "
                          f"autocast.\noar's autocast supports dtypes oar.bfloat16 and oar.float16.")
            enabled = False
        self._enabled = bool(enabled)

    def __enter__(self):
        s = _state
        self.prev_cache_enabled = s.cache
        self.prev_extra = s.extra
        s.extra = self._extra
        if self.device == "cpu":
            self.prev, self.prev_fastdtype = s.cpu, s.cpu_dtype
            s.cpu, s.cpu_dtype = self._enabled, self.fast_dtype
        else:
            self.prev, self.prev_fastdtype = s.gpu, s.gpu_dtype
            s.gpu, s.gpu_dtype = self._enabled, self.fast_dtype
        self.prev_last = s.last
        if self._enabled:
            s.last = self.device
        autocast_increment_nesting()
        s.cache = self._cache_enabled
        try:
            _apply()
        except BaseException:  # a bad op name: leave the state as it was (__exit__ will not run)
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        s = _state
        autocast_decrement_nesting()
        if self.device == "cpu":
            s.cpu, s.cpu_dtype = self.prev, self.prev_fastdtype
        else:
            s.gpu, s.gpu_dtype = self.prev, self.prev_fastdtype
        s.last, s.extra, s.cache = self.prev_last, self.prev_extra, self.prev_cache_enabled
        _apply()
        return False

    def __call__(self, func):
        return autocast_decorator(self, func)
