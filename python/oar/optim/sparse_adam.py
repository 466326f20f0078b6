"""torch.optim.SparseAdam's interface. Its update is defined on sparse gradients only, and oar has
no sparse tensors (nn.Embedding(sparse=True) gives a dense gradient), so every step with a
gradient is refused as torch refuses a dense one."""
from .. import _C


class SparseAdam:
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        if isinstance(params, _C.TensorBase):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, but "
                            f"got {type(params).__name__}")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.defaults = dict(lr=lr, betas=betas, eps=eps, maximize=maximize)
        self.param_groups = []
        for g in groups:
            g = dict(g)
            g["params"] = list(g["params"])
            for k, v in self.defaults.items():
                g.setdefault(k, v)
            self.param_groups.append(g)
        self.state = {}

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def step(self, closure=None):
        from .._grad_mode import enable_grad

        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        if any(p.grad is not None for g in self.param_groups for p in g["params"]):
            raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead (oar has no "
                               "sparse tensors: nn.Embedding(sparse=True) gives a dense gradient, which Adam or "
                               "AdamW update)")
        return loss

    def state_dict(self):
        return {"state": {}, "param_groups": [{k: v for k, v in g.items() if k != "params"}
                                              for g in self.param_groups]}

    def load_state_dict(self, state_dict):
        for g, saved in zip(self.param_groups, state_dict["param_groups"]):
            g.update({k: v for k, v in saved.items() if k != "params"})
