#!/usr/bin/env python3
"""Golden values from PyTorch for oar's optimizers and learning-rate schedules.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_optim.py
It writes tests/golden/optim.txt, which tests/test_golden_optim.c reads (the test does not
need torch).

Optimizer cases run torch.optim (foreach=False, its default in 1.13) for 5 steps on two small
parameters with fixed synthetic gradients. LAMB, which torch lacks, runs the reference below
(torch f32 ops, the formulas of oar.h). A case is:
    optim <label> | <oar_optim_opts fields as key=value>
    param <i> <tensor>                  initial value of parameter i
    grad <step> <i> <tensor> | none     .grad of parameter i before step <step> (none: no grad)
    after <step> <i> <tensor>           parameter i after step <step>
    state <name> <tensor>               the optimizer state after the last step, oar's names
    end
Schedule cases drive a torch SGD optimizer with two groups (lr 0.1 and 0.05) and record every
group's lr after construction and after each of 12 scheduler steps:
    sched <label> | <oar_sched_opts fields as key=value>
    metrics | m1 ... m12                ReduceLROnPlateau only
    lrs <group> | lr(t=0) ... lr(t=12)
    end
Tensors: "<dtype> <ndim> <dims...> | <values>" (values of f32 tensors are exact).
"""
import math
import os

import torch

torch.manual_seed(7)
STEPS = 5
SCHED_STEPS = 12
KINDS = {"sgd": 0, "adam": 1, "adamw": 2, "rmsprop": 3, "adagrad": 4, "lamb": 5, "adadelta": 6, "adamax": 7,
         "nadam": 8, "radam": 9, "asgd": 10, "rprop": 11}
SCHED_KINDS = {"step": 0, "multistep": 1, "exponential": 2, "cosine": 3, "warmup_cosine": 4, "one_cycle": 5,
               "plateau": 6}


def fmt(t):
    name = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64"}[t.dtype]
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) if t.dtype.is_floating_point else str(int(v)) for v in t.reshape(-1).tolist())
    return f"{name} {t.dim()} {dims} | {vals}"


def opts_text(fields):
    def value(v):
        if isinstance(v, bool):
            return str(int(v))
        if isinstance(v, list):
            return ",".join(str(x) for x in v)
        return repr(v)
    return " ".join(f"{k}={value(v)}" for k, v in fields.items())


class Lamb:
    """LAMB (You et al. 2019, Algorithm 2, identity scaling) in torch f32 ops:
    m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    u = (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd p;
    p -= lr * r * u with r = ||p|| / ||u||, or 1 when either norm is 0."""

    def __init__(self, params, lr, betas, eps, weight_decay):
        self.params, self.lr, self.betas, self.eps, self.wd = params, lr, betas, eps, weight_decay
        self.state = {}

    @torch.no_grad()
    def step(self):
        b1, b2 = self.betas
        for p in self.params:
            if p.grad is None:
                continue
            st = self.state.setdefault(p, {"step": 0, "exp_avg": torch.zeros_like(p),
                                           "exp_avg_sq": torch.zeros_like(p)})
            st["step"] += 1
            t = st["step"]
            m, v, g = st["exp_avg"], st["exp_avg_sq"], p.grad
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            u = (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + self.eps) + self.wd * p
            pn, un = float(p.double().norm()), float(u.double().norm())
            trust = pn / un if pn > 0 and un > 0 else 1.0
            p.add_(u, alpha=-self.lr * trust)


def make_torch(kind, params, o):
    """The torch optimizer for oar options o (explicit ones, or torch defaults when o is empty)."""
    g = lambda k, d: o.get(k, d)  # noqa: E731
    if kind == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=g("momentum", 0.0), dampening=g("dampening", 0.0),
                               nesterov=g("nesterov", False), weight_decay=g("weight_decay", 0.0))
    if kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        kw = {k: o[k] for k in ("lr", "eps", "weight_decay", "amsgrad") if k in o}
        if "beta1" in o:
            kw["betas"] = (o["beta1"], o["beta2"])
        return cls(params, **kw)
    if kind == "rmsprop":
        kw = {k: o[k] for k in ("lr", "alpha", "eps", "weight_decay", "momentum", "centered") if k in o}
        return torch.optim.RMSprop(params, **kw)
    if kind == "adagrad":
        kw = {k: o[k] for k in ("lr", "lr_decay", "weight_decay", "eps") if k in o}
        if "initial_accumulator" in o:
            kw["initial_accumulator_value"] = o["initial_accumulator"]
        return torch.optim.Adagrad(params, **kw)
    if kind == "lamb":
        return Lamb(params, o["lr"], (o["beta1"], o["beta2"]), o["eps"], o["weight_decay"])
    if kind in ("adadelta", "adamax", "nadam", "radam", "asgd", "rprop"):
        cls = {"adadelta": torch.optim.Adadelta, "adamax": torch.optim.Adamax, "nadam": torch.optim.NAdam,
               "radam": torch.optim.RAdam, "asgd": torch.optim.ASGD, "rprop": torch.optim.Rprop}[kind]
        kw = {k: o[k] for k in ("lr", "rho", "eps", "weight_decay", "momentum_decay", "lambd", "alpha", "t0",
                                "maximize") if k in o}
        if "beta1" in o:
            kw["betas"] = (o["beta1"], o["beta2"])
        if "etaminus" in o:
            kw["etas"] = (o["etaminus"], o["etaplus"])
        if "step_size_min" in o:
            kw["step_sizes"] = (o["step_size_min"], o["step_size_max"])
        return cls(params, **kw)
    raise ValueError(kind)


def away_from_zero(*shape):
    x = torch.rand(*shape) + 0.5
    return x * torch.where(torch.rand(*shape) < 0.5, -1.0, 1.0)


def optim_case(label, kind, o, explicit=True, dtype=torch.float32, skip=False, zero_param=False, steps=STEPS):
    """skip: parameter 1 has no gradient at step 2; zero_param: parameter 1 starts at zero."""
    init = [away_from_zero(2, 3).to(dtype), away_from_zero(4).to(dtype)]
    if zero_param:
        init[1].zero_()
    grads = [[torch.randn(2, 3).to(dtype), torch.randn(4).to(dtype)] for _ in range(steps)]
    if skip:
        grads[2][1] = None
    params = [p.clone().requires_grad_(True) for p in init]
    opt = make_torch(kind, params, o)
    fields = {"kind": KINDS[kind], "explicit_values": explicit, **o}
    lines = [f"optim {label} | {opts_text(fields)}"]
    lines += [f"param {i} {fmt(p)}" for i, p in enumerate(init)]
    for s in range(steps):
        for i, p in enumerate(params):
            p.grad = None if grads[s][i] is None else grads[s][i].clone()
            lines.append(f"grad {s} {i} " + ("none" if grads[s][i] is None else fmt(grads[s][i])))
        opt.step()
        lines += [f"after {s} {i} {fmt(p.detach())}" for i, p in enumerate(params)]
    for i, p in enumerate(params):
        for name, v in opt.state[p].items():
            if v is None:  # torch's SGD keeps momentum_buffer = None without momentum
                continue
            v = torch.tensor(int(v), dtype=torch.int64) if name == "step" else v
            lines.append(f"state {i}.{name} {fmt(v)}")
    return lines + ["end"]


def sched_case(label, kind, so, make, metrics=None):
    params = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
    opt = torch.optim.SGD([{"params": [params[0]], "lr": 0.1}, {"params": [params[1]], "lr": 0.05}], lr=0.1)
    sched = make(opt)
    lrs = [[g["lr"]] for g in opt.param_groups]
    for t in range(SCHED_STEPS):
        opt.step()
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[t])
        for k, g in enumerate(opt.param_groups):
            lrs[k].append(g["lr"])
    fields = {"kind": SCHED_KINDS[kind], "explicit_values": True, **so}
    lines = [f"sched {label} | {opts_text(fields)}"]
    if metrics is not None:
        lines.append("metrics | " + " ".join(repr(m) for m in metrics))
    lines += [f"lrs {k} | " + " ".join(repr(float(v)) for v in lr) for k, lr in enumerate(lrs)]
    return lines + ["end"]


def warmup_cosine(warmup, t_max, eta_min, base):
    """oar's WARMUP_COSINE as a LambdaLR factor of base (see oar.h)."""
    def f(t):
        if t < warmup:
            return t / warmup
        if t > t_max:
            return eta_min / base
        return (eta_min + (base - eta_min) * (1 + math.cos(math.pi * (t - warmup) / (t_max - warmup))) / 2) / base
    return f


def main():
    lr = torch.optim.lr_scheduler
    cases = []
    # ---- SGD
    cases.append(optim_case("sgd", "sgd", {"lr": 0.1}))
    cases.append(optim_case("sgd_wd", "sgd", {"lr": 0.1, "weight_decay": 0.1}, skip=True))
    cases.append(optim_case("sgd_momentum", "sgd", {"lr": 0.1, "momentum": 0.9}, skip=True))
    cases.append(optim_case("sgd_dampening_wd", "sgd", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3,
                                                          "weight_decay": 0.05}))
    cases.append(optim_case("sgd_nesterov", "sgd", {"lr": 0.1, "momentum": 0.9, "nesterov": True,
                                                      "weight_decay": 0.01}))
    cases.append(optim_case("sgd_nesterov_f64", "sgd", {"lr": 0.1, "momentum": 0.9, "nesterov": True},
                            dtype=torch.float64))
    # ---- Adam, AdamW (the *_defaults cases leave every field to the torch default)
    cases.append(optim_case("adam_defaults", "adam", {}, explicit=False))
    cases.append(optim_case("adam", "adam", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}, skip=True))
    cases.append(optim_case("adam_wd", "adam", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                                  "weight_decay": 0.1}))
    cases.append(optim_case("adam_amsgrad", "adam", {"lr": 0.05, "beta1": 0.8, "beta2": 0.99, "eps": 1e-8,
                                                       "amsgrad": True}, skip=True))
    cases.append(optim_case("adam_amsgrad_wd_f64", "adam", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                                              "amsgrad": True, "weight_decay": 0.1},
                            dtype=torch.float64))
    cases.append(optim_case("adamw_defaults", "adamw", {}, explicit=False))
    cases.append(optim_case("adamw", "adamw", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                                 "weight_decay": 0.1}, skip=True))
    cases.append(optim_case("adamw_amsgrad", "adamw", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                                         "weight_decay": 0.1, "amsgrad": True}))
    cases.append(optim_case("adamw_no_wd", "adamw", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                                       "weight_decay": 0.0}))
    # ---- RMSprop
    cases.append(optim_case("rmsprop_defaults", "rmsprop", {}, explicit=False))
    cases.append(optim_case("rmsprop", "rmsprop", {"lr": 0.01, "alpha": 0.99, "eps": 1e-8}, skip=True))
    cases.append(optim_case("rmsprop_centered_wd", "rmsprop", {"lr": 0.01, "alpha": 0.99, "eps": 1e-8,
                                                                 "centered": True, "weight_decay": 0.1}))
    cases.append(optim_case("rmsprop_momentum", "rmsprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-8,
                                                              "momentum": 0.9}))
    cases.append(optim_case("rmsprop_centered_momentum", "rmsprop", {"lr": 0.01, "alpha": 0.9, "eps": 1e-8,
                                                                       "momentum": 0.5, "centered": True},
                            skip=True))
    # ---- Adagrad
    cases.append(optim_case("adagrad_defaults", "adagrad", {}, explicit=False))
    cases.append(optim_case("adagrad_decay", "adagrad", {"lr": 0.1, "eps": 1e-10, "lr_decay": 0.1,
                                                           "initial_accumulator": 0.5, "weight_decay": 0.1},
                            skip=True))
    # ---- LAMB
    cases.append(optim_case("lamb", "lamb", {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6,
                                               "weight_decay": 0.01}, skip=True))
    cases.append(optim_case("lamb_zero_param", "lamb", {"lr": 0.05, "beta1": 0.8, "beta2": 0.99, "eps": 1e-6,
                                                          "weight_decay": 0.0}, zero_param=True))
    # ---- Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop (appended: the cases above keep their values)
    for k in ("adadelta", "adamax", "nadam", "radam", "asgd", "rprop"):
        cases.append(optim_case(f"{k}_defaults", k, {}, explicit=False, skip=True))
    cases.append(optim_case("adadelta_wd_max", "adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1,
                                                              "maximize": True}))
    cases.append(optim_case("adadelta_f64", "adadelta", {"lr": 1.0, "rho": 0.9, "eps": 1e-6}, dtype=torch.float64))
    cases.append(optim_case("adamax_wd_max", "adamax", {"lr": 0.05, "beta1": 0.8, "beta2": 0.99, "eps": 1e-8,
                                                          "weight_decay": 0.1, "maximize": True}, skip=True))
    cases.append(optim_case("adamax_f64", "adamax", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8},
                            dtype=torch.float64))
    cases.append(optim_case("nadam_wd", "nadam", {"lr": 0.05, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                                                    "weight_decay": 0.1, "momentum_decay": 0.01}))
    cases.append(optim_case("nadam_f64", "nadam", {"lr": 0.05, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                                     "momentum_decay": 4e-3}, dtype=torch.float64))
    # beta2 0.9: rho_t passes 5 at step 6 of 8, so both of RAdam's branches run
    cases.append(optim_case("radam_rectified_wd", "radam", {"lr": 0.05, "beta1": 0.9, "beta2": 0.9, "eps": 1e-8,
                                                              "weight_decay": 0.1}, skip=True, steps=8))
    cases.append(optim_case("radam_rectified_f64", "radam", {"lr": 0.05, "beta1": 0.8, "beta2": 0.9, "eps": 1e-8},
                            dtype=torch.float64, steps=8))
    # t0 2: the average starts moving (mu < 1) from step 3
    cases.append(optim_case("asgd_averaging_wd_max", "asgd", {"lr": 0.1, "lambd": 0.01, "alpha": 0.75, "t0": 2.0,
                                                                "weight_decay": 0.1, "maximize": True}, skip=True))
    cases.append(optim_case("asgd_averaging_f64", "asgd", {"lr": 0.1, "lambd": 0.001, "alpha": 0.5, "t0": 1.0},
                            dtype=torch.float64))
    cases.append(optim_case("rprop_bounds_max", "rprop", {"lr": 0.1, "etaminus": 0.3, "etaplus": 1.5,
                                                            "step_size_min": 0.05, "step_size_max": 0.2,
                                                            "maximize": True}))
    cases.append(optim_case("rprop_f64", "rprop", {"lr": 0.01, "etaminus": 0.5, "etaplus": 1.2,
                                                     "step_size_min": 1e-6, "step_size_max": 50.0},
                            dtype=torch.float64))
    # ---- schedules
    cases.append(sched_case("step", "step", {"step_size": 3, "gamma": 0.5}, lambda o: lr.StepLR(o, 3, gamma=0.5)))
    cases.append(sched_case("multistep", "multistep", {"milestones": [9, 2, 5, 5], "n_milestones": 4, "gamma": 0.1},
                            lambda o: lr.MultiStepLR(o, [9, 2, 5, 5], gamma=0.1)))
    cases.append(sched_case("exponential", "exponential", {"gamma": 0.8}, lambda o: lr.ExponentialLR(o, 0.8)))
    cases.append(sched_case("cosine", "cosine", {"t_max": 8, "eta_min": 0.001},
                            lambda o: lr.CosineAnnealingLR(o, 8, eta_min=0.001)))
    cases.append(sched_case("warmup_cosine", "warmup_cosine", {"warmup": 3, "t_max": 10, "eta_min": 0.001},
                            lambda o: lr.LambdaLR(o, [warmup_cosine(3, 10, 0.001, 0.1),
                                                      warmup_cosine(3, 10, 0.001, 0.05)])))
    cases.append(sched_case("one_cycle", "one_cycle", {"t_max": 12, "max_lr": 1.0, "pct_start": 0.3,
                                                       "div_factor": 25.0, "final_div_factor": 1e4},
                            lambda o: lr.OneCycleLR(o, 1.0, total_steps=12, anneal_strategy="cos",
                                                    cycle_momentum=False)))
    cases.append(sched_case("one_cycle_group_max", "one_cycle", {"t_max": 12, "max_lr": 0.0, "pct_start": 0.25,
                                                                 "div_factor": 10.0, "final_div_factor": 100.0},
                            lambda o: lr.OneCycleLR(o, [0.1, 0.05], total_steps=12, pct_start=0.25,
                                                    div_factor=10.0, final_div_factor=100.0,
                                                    anneal_strategy="cos", cycle_momentum=False)))
    metrics_min = [1.0, 0.9, 0.95, 0.95, 0.899, 0.8, 0.85, 0.85, 0.85, 0.85, 0.7, 0.7]
    cases.append(sched_case("plateau_min", "plateau", {"gamma": 0.5, "patience": 2, "threshold": 0.01},
                            lambda o: lr.ReduceLROnPlateau(o, "min", factor=0.5, patience=2, threshold=0.01),
                            metrics=metrics_min))
    metrics_max = [0.1, 0.2, 0.2, 0.25, 0.2, 0.2, 0.2, 0.2, 0.3, 0.3, 0.3, 0.3]
    cases.append(sched_case("plateau_max", "plateau", {"gamma": 0.1, "patience": 1, "threshold": 1e-4,
                                                       "mode_max": True, "eta_min": 0.0009},
                            lambda o: lr.ReduceLROnPlateau(o, "max", factor=0.1, patience=1, threshold=1e-4,
                                                           min_lr=0.0009),
                            metrics=metrics_max))
    cases.append(sched_case("plateau_patience0", "plateau", {"gamma": 0.5, "patience": 0, "threshold": 0.0},
                            lambda o: lr.ReduceLROnPlateau(o, "min", factor=0.5, patience=0, threshold=0.0),
                            metrics=[3.0, 2.0, 2.0, 1.0, 1.5, 1.0, 0.5, 0.5, 0.5, 0.4, 0.4, 0.3]))

    out = [f"# oar golden values for optimizers and lr schedules from torch {torch.__version__}; "
           "regenerate with gen_optim.py"]
    for c in cases:
        out += c
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.txt")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {len(cases)} cases to {path}")


if __name__ == "__main__":
    main()
