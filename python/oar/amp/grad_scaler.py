"""torch.cuda.amp.GradScaler over oar's dynamic loss scaler (oar_grad_scaler_*: the scale and its
counters are 0-d tensors, one fused pass unscales the gradients and notes inf/nan, the update is
one op). torch 1.13's scaler disables itself without CUDA; oar's runs on any device (an fp16
region on the CPU needs it as much as one on a GPU). The optimizer must be an oar.optim
optimizer: the scaler steps the C optimizer it holds."""
from collections import abc
from enum import Enum

from .. import _C
from .paddle_scaler import PaddleScalerNames, scaler_options


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _c_optimizer(optimizer, fn):
    c = getattr(optimizer, "_c", None)
    if isinstance(c, _C.Optimizer):
        return c
    if c is None and hasattr(optimizer, "_c_groups"):
        return None  # an oar.optim optimizer without parameters: nothing to unscale or step
    raise TypeError(f"GradScaler.{fn}: expected an oar.optim optimizer (its update runs in oar's C core, where the "
                    f"scaler unscales and skips), got {type(optimizer).__name__}")


def _sync_grads(optimizer):
    """O2 (oar.amp.decorate): the low gradients, widened, to the f32 masters the C optimizer holds."""
    amp = getattr(optimizer, "_amp", None)
    if amp is not None:
        amp.sync_grads()


class GradScaler(PaddleScalerNames):
    """torch.cuda.amp.GradScaler(init_scale=65536.0, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True), also paddle.amp.GradScaler(enable=True,
    init_loss_scaling=65536.0, incr_ratio=2.0, decr_ratio=0.5, incr_every_n_steps=2000,
    decr_every_n_nan_or_inf=1, use_dynamic_loss_scaling=True): either's keywords; positional
    arguments in torch's order, or Paddle's when the first is a bool (enable)."""

    def __init__(self, *args, **kwargs):
        o = scaler_options(args, kwargs)
        init_scale, growth_factor, backoff_factor = o["init_scale"], o["growth_factor"], o["backoff_factor"]
        growth_interval = o["growth_interval"]
        self._enabled = bool(o["enabled"])
        self._dynamic = bool(o["use_dynamic_loss_scaling"])
        self._paddle_keys = o["paddle"]  # state_dict with Paddle's keys (made with Paddle's names)
        self._decr_every_n = o["decr_every_n_nan_or_inf"]
        self._decr_count = 0      # inf/nan steps since the last backoff (decr_every_n_nan_or_inf > 1)
        self._skipped_seen = 0    # the C scaler's skipped count at the last update
        if self._enabled:
            assert growth_factor > 1.0, "The growth factor must be > 1.0."
            assert backoff_factor < 1.0, "The backoff factor must be < 1.0."
            self._init_scale = init_scale
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._c = _C.GradScaler(float(init_scale), float(growth_factor), float(backoff_factor),
                                    int(growth_interval), self._dynamic)
            self._stages = {}            # id(optimizer) -> OptState since the last update()
            self._last_unscaled = None   # the C scaler remembers only the optimizer it unscaled last

    def scale(self, outputs):
        """outputs (a tensor, or lists/tuples/iterables of them) multiplied by the scale; f16/bf16
        tensors come back f32, as torch's (an f32 scale tensor promotes them)."""
        if not self._enabled:
            return outputs
        from .._tensor import Tensor
        from .._dtype import bfloat16, float16

        def apply(v):
            if isinstance(v, Tensor):
                if v.dtype in (float16, bfloat16):
                    v = v.float()
                return self._c.scale(v)
            if isinstance(v, abc.Iterable):
                it = map(apply, v)
                return type(v)(it) if isinstance(v, (list, tuple)) else it
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def unscale_(self, optimizer):
        if not self._enabled:
            return
        stage = self._stages.get(id(optimizer), OptState.READY)
        if stage is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if stage is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        c = _c_optimizer(optimizer, "unscale_")
        if c is not None:
            _sync_grads(optimizer)
            self._c.unscale(c)
        self._stages[id(optimizer)] = OptState.UNSCALED
        self._last_unscaled = id(optimizer)

    def step(self, optimizer, *args, **kwargs):
        """Unscales (unless unscale_ did), then steps the optimizer unless a gradient is inf/nan;
        returns what optimizer.step returns, None when the step was skipped."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        stage = self._stages.get(id(optimizer), OptState.READY)
        if stage is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        c = _c_optimizer(optimizer, "step")
        if c is None:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        if stage is OptState.UNSCALED and self._last_unscaled != id(optimizer):
            raise RuntimeError("GradScaler.step: another optimizer was unscaled after this one; with several "
                               "optimizers, call unscale_ and step for one before unscale_ of the next")
        from ..optim.optimizer import Optimizer

        if args or type(optimizer).step is not Optimizer.step:
            return self._step_python(optimizer, stage, c, *args, **kwargs)
        optimizer._sync_groups()  # what Optimizer.step does before the C step
        from .. import jit

        jit._note_optimizer(optimizer)
        _sync_grads(optimizer)
        skipped = self._c.step(c)
        amp = getattr(optimizer, "_amp", None)
        if amp is not None and not skipped:  # traced, a skip is the program's: the sync rounds unchanged masters
            amp.sync_params()
        self._stages[id(optimizer)] = OptState.STEPPED
        return None

    def _step_python(self, optimizer, stage, c, *args, **kwargs):
        """An optimizer whose step() is its own (a subclass, extra arguments): unscaled in C, then
        its step runs unless a gradient is inf/nan."""
        from .. import isfinite

        if stage is OptState.READY:
            self.unscale_(optimizer)
        amp = getattr(optimizer, "_amp", None)
        grads = ([m.grad for _, m in amp.named_masters()] if amp is not None else
                 [p.grad for g in optimizer.param_groups for p in g["params"]])
        finite = all(bool(isfinite(t).all()) for t in grads if t is not None)
        self._stages[id(optimizer)] = OptState.STEPPED
        return optimizer.step(*args, **kwargs) if finite else None

    def update(self, new_scale=None):
        if not self._enabled:
            return
        if new_scale is not None:
            from .._tensor import Tensor
            import oar

            if isinstance(new_scale, Tensor):
                reason = "new_scale should be a float or a 1-element oar.FloatTensor with requires_grad=False."
                assert new_scale.numel() == 1 and new_scale.dtype == oar.float32, reason
                assert new_scale.requires_grad is False, reason
                new_scale = new_scale.item()
            elif not isinstance(new_scale, float):
                raise TypeError(f"new_scale should be a float or a 1-element tensor, got {type(new_scale).__name__}")
            tracker = self._c.counts()[0]
            self._c.update()  # clears the step's record (its growth or backoff is then overwritten)
            self._c.load_state("scale", oar.tensor(new_scale, dtype=oar.float32))
            self._c.load_state("growth_tracker", oar.tensor(tracker, dtype=oar.int64))
        else:
            assert self._stages, "No inf checks were recorded prior to update."
            if self._decr_every_n > 1 and self._dynamic:
                self._update_every_n()
            else:
                self._c.update()
        self._stages = {}
        self._last_unscaled = None

    def get_scale(self):
        return self._c.get_scale() if self._enabled else 1.0

    def _set_options(self, growth_factor, backoff_factor, growth_interval):
        """The C scaler's options are fixed at creation: a change makes a new one that takes the
        old one's state (a compiled step that used the old one must be compiled again)."""
        new = (float(growth_factor), float(backoff_factor), int(growth_interval))
        if new != (float(self._growth_factor), float(self._backoff_factor), int(self._growth_interval)):
            self._c.set_options(*new)
        self._growth_factor, self._backoff_factor, self._growth_interval = growth_factor, backoff_factor, \
            growth_interval

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._set_options(new_factor, self._backoff_factor, self._growth_interval)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._set_options(self._growth_factor, new_factor, self._growth_interval)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._set_options(self._growth_factor, self._backoff_factor, new_interval)

    def _get_growth_tracker(self):
        return self._c.counts()[0] if self._enabled else 0

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._get_growth_tracker(),
                **(self._paddle_state() if self._paddle_keys else {})}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        import oar

        if "growth_factor" not in state_dict and "incr_ratio" in state_dict:  # saved by Paddle's names only
            return self._load_paddle_state(state_dict)
        if "decr_every_n_nan_or_inf" in state_dict:
            self.set_decr_every_n_nan_or_inf(int(state_dict["decr_every_n_nan_or_inf"]))
            self._decr_count = int(state_dict.get("decr_count", 0))
        self._init_scale = state_dict["scale"]
        self._set_options(state_dict["growth_factor"], state_dict["backoff_factor"], state_dict["growth_interval"])
        self._c.load_state("scale", oar.tensor(float(state_dict["scale"]), dtype=oar.float32))
        self._c.load_state("growth_tracker", oar.tensor(int(state_dict["_growth_tracker"]), dtype=oar.int64))
