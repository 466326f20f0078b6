"""oar.optim: torch.optim's classes over the C core's optimizers (one fused update op per
parameter, torch 1.13's update rules). param_groups are plain dicts as in torch: edit them
(an LR scheduler does) and the next step uses the new values."""
from .. import _C

_KINDS = {"SGD": 0, "Adam": 1, "AdamW": 2, "RMSprop": 3, "Adagrad": 4, "LAMB": 5, "Adadelta": 6, "Adamax": 7,
          "NAdam": 8, "RAdam": 9, "ASGD": 10, "Rprop": 11}


class Optimizer:
    _kind = None
    _c_keys = ("lr", "momentum", "dampening", "nesterov", "weight_decay", "eps", "amsgrad", "alpha", "centered",
               "lr_decay", "initial_accumulator_value", "rho", "momentum_decay", "lambd", "t0")
    _maximize = False   # whether the C kind offers maximize (torch 1.13 has it for more)
    _amp = None         # O2's f32 masters (oar.amp.decorate): the C optimizer updates them

    def __init__(self, params, defaults):
        if isinstance(params, _C.TensorBase):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            f"got {type(params).__name__}")
        self.defaults = dict(defaults)
        self.state = {}
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self._c = None
        self._c_groups = []   # each group's index among the C optimizer's groups (None: a group without params)
        for g in groups:
            self.add_param_group(g)

    def _c_options(self, group):
        o = {k: group[k] for k in self._c_keys if k in group}
        if "betas" in group:
            o["beta1"], o["beta2"] = group["betas"]
        if "etas" in group:
            o["etaminus"], o["etaplus"] = group["etas"]
        if "step_sizes" in group:
            o["step_size_min"], o["step_size_max"] = group["step_sizes"]
        if self._maximize:
            o["maximize"] = bool(group.get("maximize", False))
        for k in ("maximize", "foreach", "capturable", "differentiable", "fused"):
            if group.get(k) and k not in o:
                raise NotImplementedError(f"{type(self).__name__}: {k}=True is not offered")
        return o

    def add_param_group(self, param_group):
        if self._amp is not None:
            raise RuntimeError(f"{type(self).__name__}.add_param_group: this optimizer was decorated by "
                               "oar.amp.decorate (it updates f32 masters of its parameters); add every group before "
                               "decorate")
        g = self._checked_group(param_group)
        if g.get("lr") is None:
            raise ValueError(f"{type(self).__name__}: a learning rate (lr) is required")
        if not g["params"]:   # allowed, as in torch (a ZeroRedundancyOptimizer's shard may leave a group empty)
            self._c_groups.append(None)
        elif self._c is None:
            self._c = _C.Optimizer(g["params"], _KINDS[self._kind], self._c_options(g))
            self._c_groups.append(0)
        else:
            self._c_groups.append(self._c.add_group(g["params"], self._c_options(g)))
        self.param_groups.append(g)

    def _checked_group(self, param_group):
        """param_group as a dict with a list of leaf tensors not in another group and the defaults filled in."""
        g = dict(param_group)
        ps = g["params"]
        g["params"] = [ps] if isinstance(ps, _C.TensorBase) else list(ps)
        for p in g["params"]:
            if not isinstance(p, _C.TensorBase):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        seen = {id(p) for grp in self.param_groups for p in grp["params"]}
        if any(id(p) in seen for p in g["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        for k, v in self.defaults.items():
            g.setdefault(k, v)
        return g

    def zero_grad(self, set_to_none=True):
        """Drops every gradient (oar accumulates into a fresh one at the next backward)."""
        if self._c is not None:
            self._c.zero_grad()
        if self._amp is not None:  # low gradients not yet moved to the masters (a backward without a step)
            for g in self.param_groups:
                for p in g["params"]:
                    p.grad = None

    def step(self, closure=None):
        loss = None
        if closure is not None:
            from .._grad_mode import enable_grad

            with enable_grad():
                loss = closure()
        self._sync_groups()
        from .. import jit

        jit._note_optimizer(self)  # a compiled step syncs the groups before each of its runs
        if self._c is not None:
            if self._amp is not None:
                self._amp.sync_grads()   # the low gradients, widened, become the masters'
            self._c.step()
            if self._amp is not None:
                self._amp.sync_params()  # the updated masters, rounded, into the low parameters
        return loss

    def _sync_groups(self):
        """The Python groups' hyper-parameters (an lr schedule's changes) into the C groups."""
        for i, g in zip(self._c_groups, self.param_groups):
            if i is not None:
                self._c.set_group(i, self._c_options(g))

    def state_dict(self):
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.param_groups]
        if self._c is None:
            return {"state": {}, "param_groups": groups, "steps": 0}
        d = {"state": {k: v.clone() for k, v in self._c.state().items()}, "param_groups": groups,
             "steps": self._c.steps()}
        if self._amp is not None:  # O2: the f32 masters (Paddle's optimizer state_dict holds them too)
            d["master_weights"] = {n: m.detach().clone() for n, m in self._amp.named_masters()}
        return d

    def load_state_dict(self, state_dict):
        for g, saved in zip(self.param_groups, state_dict["param_groups"]):
            g.update({k: v for k, v in saved.items() if k != "params"})
        if self._c is None and state_dict["state"]:
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected no state (this optimizer has no "
                             f"parameters), got {sorted(state_dict['state'])[:4]}")
        for name, t in state_dict["state"].items():
            self._c.load_state(name, t)
        if self._amp is not None and "master_weights" in state_dict:
            self._load_masters(state_dict["master_weights"])

    def _load_masters(self, saved):
        from .._grad_mode import no_grad

        mine = dict(self._amp.named_masters())
        if set(saved) != set(mine):
            raise ValueError(f"{type(self).__name__}.load_state_dict: expected master weights for "
                             f"{sorted(mine)[:4]}..., got {sorted(saved)[:4]}...")
        with no_grad():
            for n, m in mine.items():
                if tuple(saved[n].shape) != tuple(m.shape):
                    raise ValueError(f"{type(self).__name__}.load_state_dict: master weight {n!r} has shape "
                                     f"{tuple(saved[n].shape)}, expected {tuple(m.shape)}")
                m.copy_(saved[n])
        self._amp.sync_params()

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for k in sorted(g):
                if k != "params":
                    s += f"\n    {k}: {g[k]}"
        return s + "\n)"


class SGD(Optimizer):
    _kind = "SGD"

    def __init__(self, params, lr=None, momentum=0, dampening=0, weight_decay=0, nesterov=False, *, maximize=False,
                 foreach=None, differentiable=False):
        if lr is not None and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))


class Adam(Optimizer):
    _kind = "Adam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False, fused=None):
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))


class AdamW(Adam):
    _kind = "AdamW"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


class RMSprop(Optimizer):
    _kind = "RMSprop"

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, maximize=maximize))


class Adagrad(Optimizer):
    _kind = "Adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize))


class LAMB(Adam):
    """LAMB (You et al. 2019), which torch lacks; the C core defines its update."""
    _kind = "LAMB"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0):
        super().__init__(params, lr, betas, eps, weight_decay)


def _check_betas(betas):
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def _check_nonneg(**values):
    names = {"lr": "learning rate", "eps": "epsilon value", "weight_decay": "weight_decay value",
             "momentum_decay": "momentum_decay value"}
    for k, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {names[k]}: {v}")


class Adadelta(Optimizer):
    _kind = "Adadelta"
    _maximize = True

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, maximize=False):
        _check_nonneg(lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach))


class Adamax(Optimizer):
    _kind = "Adamax"
    _maximize = True

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False):
        _check_nonneg(lr=lr, eps=eps)
        _check_betas(betas)
        _check_nonneg(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))


class NAdam(Optimizer):
    _kind = "NAdam"

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 foreach=None):
        _check_nonneg(lr=lr, eps=eps)
        _check_betas(betas)
        _check_nonneg(weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, foreach=foreach))


class RAdam(Optimizer):
    _kind = "RAdam"

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None):
        _check_nonneg(lr=lr, eps=eps)
        _check_betas(betas)
        _check_nonneg(weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach))


class ASGD(Optimizer):
    _kind = "ASGD"
    _maximize = True

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False):
        _check_nonneg(lr=lr, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))


class Rprop(Optimizer):
    _kind = "Rprop"
    _maximize = True

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), foreach=None, maximize=False):
        _check_nonneg(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize))
