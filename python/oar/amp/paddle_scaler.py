"""paddle.amp.GradScaler's names on oar's GradScaler (one class serves torch's and Paddle's
scripts): Paddle's constructor keywords, minimize, the get_/set_ accessors, decr_every_n_nan_or_inf
and Paddle's state_dict keys."""

_TORCH = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
_PADDLE = ("enable", "init_loss_scaling", "incr_ratio", "decr_ratio", "incr_every_n_steps", "decr_every_n_nan_or_inf",
           "use_dynamic_loss_scaling")
# Paddle's name -> torch's (the C scaler's options)
_SAME = {"enable": "enabled", "init_loss_scaling": "init_scale", "incr_ratio": "growth_factor",
         "decr_ratio": "backoff_factor", "incr_every_n_steps": "growth_interval"}
_DEFAULTS = {"init_scale": 2.0 ** 16, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000,
             "enabled": True, "decr_every_n_nan_or_inf": 1, "use_dynamic_loss_scaling": True}


def scaler_options(args, kwargs):
    """The options of GradScaler(*args, **kwargs) under torch's names (plus decr_every_n_nan_or_inf,
    use_dynamic_loss_scaling, and paddle: whether Paddle's names were used, so state_dict gives
    Paddle's keys). Positional arguments follow torch's order, or Paddle's when the
    first is a bool (Paddle's enable; torch's init_scale is a number)."""
    order = _PADDLE if args and isinstance(args[0], bool) else _TORCH
    if len(args) > len(order):
        raise TypeError(f"GradScaler: expected at most {len(order)} positional arguments ({', '.join(order)}), got "
                        f"{len(args)}")
    given = dict(zip(order, args))
    for k, v in kwargs.items():
        if k not in _TORCH and k not in _PADDLE:
            raise TypeError(f"GradScaler: unexpected keyword argument {k!r} (torch's: {', '.join(_TORCH)}; "
                            f"Paddle's: {', '.join(_PADDLE)})")
        if k in given:
            raise TypeError(f"GradScaler: got multiple values for argument {k!r}")
        given[k] = v
    out = {}
    for k, v in given.items():
        name = _SAME.get(k, k)
        if name in out:
            raise TypeError(f"GradScaler: {name!r} given twice (as torch's and Paddle's name); give one")
        out[name] = v
    opts = dict(_DEFAULTS)
    opts.update(out)
    opts["paddle"] = order is _PADDLE or any(k in _PADDLE for k in kwargs)
    n = opts["decr_every_n_nan_or_inf"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"GradScaler: expected decr_every_n_nan_or_inf to be an int >= 1, got {n!r}")
    return opts


class PaddleScalerNames:
    """Mixed into GradScaler: Paddle's methods over torch's."""

    def minimize(self, optimizer, *args, **kwargs):
        """Paddle's minimize(optimizer, scaled_loss): step (unscaling first unless unscale_ did,
        skipped on inf/nan), then update. The loss arguments, which Paddle hands to its optimizer's
        minimize, are not needed: backward has run and the optimizer steps on the gradients."""
        self.step(optimizer)
        self.update()

    def is_enable(self):
        return self.is_enabled()

    def is_use_dynamic_loss_scaling(self):
        return self._dynamic

    def get_init_loss_scaling(self):
        return self.get_scale()

    def set_init_loss_scaling(self, new_init_loss_scaling):
        self._set_scale(float(new_init_loss_scaling))

    def get_incr_ratio(self):
        return self.get_growth_factor()

    def set_incr_ratio(self, new_incr_ratio):
        self.set_growth_factor(new_incr_ratio)

    def get_decr_ratio(self):
        return self.get_backoff_factor()

    def set_decr_ratio(self, new_decr_ratio):
        self.set_backoff_factor(new_decr_ratio)

    def get_incr_every_n_steps(self):
        return self.get_growth_interval()

    def set_incr_every_n_steps(self, new_incr_every_n_steps):
        self.set_growth_interval(new_incr_every_n_steps)

    def get_decr_every_n_nan_or_inf(self):
        return self._decr_every_n

    def set_decr_every_n_nan_or_inf(self, new_decr_every_n_nan_or_inf):
        n = new_decr_every_n_nan_or_inf
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"GradScaler: expected decr_every_n_nan_or_inf to be an int >= 1, got {n!r}")
        self._decr_every_n = n

    def _set_scale(self, value):
        import oar

        self._c.load_state("scale", oar.tensor(value, dtype=oar.float32))

    def _update_every_n(self):
        """update() with decr_every_n_nan_or_inf > 1: an inf/nan step backs off only when it is the
        n-th since the last backoff (Paddle's decr_count); the C update resets the growth count."""
        from .. import jit

        if jit._traces:
            raise RuntimeError("GradScaler.update: decr_every_n_nan_or_inf > 1 counts the inf/nan steps in Python, "
                               "so the update cannot be part of an oar.jit.to_static function; call it outside, or "
                               "use decr_every_n_nan_or_inf=1")
        skipped = self._c.counts()[1]
        found = skipped > self._skipped_seen
        self._skipped_seen = skipped
        before = self._c.get_scale()
        self._c.update()
        if not found:
            self._decr_count = 0
            return
        self._decr_count += 1
        if self._decr_count < self._decr_every_n:
            self._set_scale(before)  # not yet: keep the scale
        else:
            self._decr_count = 0

    def _load_paddle_state(self, state_dict):
        import oar

        self._set_options(state_dict["incr_ratio"], state_dict["decr_ratio"], state_dict["incr_every_n_steps"])
        self.set_decr_every_n_nan_or_inf(int(state_dict["decr_every_n_nan_or_inf"]))
        self._decr_count = int(state_dict["decr_count"])
        scale = state_dict["scale"]
        self._set_scale(float(scale.item() if hasattr(scale, "item") else scale))
        self._c.load_state("growth_tracker", oar.tensor(int(state_dict["incr_count"]), dtype=oar.int64))

    def _paddle_state(self):
        """Paddle's keys beside torch's: incr_count (good steps since the last change) and
        decr_count (inf/nan steps since the last backoff)."""
        return {"incr_ratio": self._growth_factor, "decr_ratio": self._backoff_factor,
                "incr_every_n_steps": self._growth_interval, "decr_every_n_nan_or_inf": self._decr_every_n,
                "incr_count": self._c.counts()[0], "decr_count": self._decr_count,
                "use_dynamic_loss_scaling": self._dynamic}
