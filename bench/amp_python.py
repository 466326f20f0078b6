#!/usr/bin/env python3
"""Mixed precision from Python (docs/amp.md, "From Python"), oar beside torch 1.13 in one process at
one thread each: (1) the cost of entering and leaving an autocast region (`with autocast("cpu"):
pass`), (2) a training step of an MLP (width x 3 Linear, batch B) in f32, under CPU bf16 autocast,
and (oar) under f16 autocast with the GradScaler, eager and compiled (oar.jit.to_static), and
(oar) O2 with Paddle's API (oar.amp.decorate: bf16/f16 parameters with f32 masters, auto_cast
level O2; f16 with the GradScaler). Repetitions interleave every configuration so machine noise
hits them alike; a figure is the median over repetitions of each repetition's median call: wall
time, and process CPU time per call (the steadier one on a loaded machine). One JSON object per
line.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/amp_python.py [--width 512] [--batch 64]
           [--reps 5] [--steps 20]
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_name  # noqa: E402


def per_call(fn, steps):
    fn()
    walls = []
    c0 = time.process_time()
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls) * 1e3, (time.process_time() - c0) / steps * 1e3


def mlp_step_o2(oar, width, batch, dtype, compiled):
    """oar's O2 step: parameters in dtype, the SGD update on f32 masters, f16 with loss scaling."""
    nn, F = oar.nn, oar.nn.functional
    oar.manual_seed(0)
    m = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = oar.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    m, opt = oar.amp.decorate(m, opt, level="O2", dtype=dtype)
    x, y = oar.randn(batch, width), oar.randint(0, 10, (batch,))
    sc = oar.amp.GradScaler(enable=dtype == "float16")

    def step(a, b):
        opt.zero_grad()
        with oar.amp.auto_cast(level="O2", dtype=dtype):
            loss = F.cross_entropy(m(a), b)
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        return loss

    f = oar.jit.to_static(step) if compiled else step
    return lambda: f(x, y)


def mlp_step(lib, width, batch, dtype, scaler, compiled):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    m = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    opt = lib.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x, y = lib.randn(batch, width), lib.randint(0, 10, (batch,))
    sc = lib.cuda.amp.GradScaler() if scaler else None

    def step(a, b):
        opt.zero_grad()
        with lib.autocast("cpu", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(m(a), b)
        if sc is None:
            loss.backward()
            opt.step()
        else:
            sc.scale(loss).backward()
            sc.step(opt)
            sc.update()
        return loss

    f = lib.jit.to_static(step) if compiled else step
    return lambda: f(x, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    import oar
    import torch

    oar.set_num_threads(1)
    torch.set_num_threads(1)

    def region(lib):
        def f():
            for _ in range(100):
                with lib.autocast("cpu"):
                    pass
        return f

    cases = {("region_x100", "oar"): region(oar), ("region_x100", "torch"): region(torch)}
    for name, dt in (("f32", None), ("bf16", "bfloat16"), ("f16_scaler", "float16")):
        for lib, libname in ((oar, "oar"), (torch, "torch")):
            if libname == "torch" and dt == "float16":
                continue  # torch 1.13's CPU autocast refuses f16 and its scaler needs CUDA
            d = getattr(lib, dt) if dt else None
            for compiled in ((False, True) if libname == "oar" else (False,)):
                key = (f"mlp_step_{name}", libname + (" compiled" if compiled else ""))
                cases[key] = mlp_step(lib, a.width, a.batch, d, dt == "float16", compiled)
    for name, dt in (("o2_bf16", "bfloat16"), ("o2_f16_scaler", "float16")):
        for compiled in (False, True):
            cases[(f"mlp_step_{name}", "oar" + (" compiled" if compiled else ""))] = \
                mlp_step_o2(oar, a.width, a.batch, dt, compiled)
    res = {k: [] for k in cases}
    for _ in range(a.reps):
        for k, fn in cases.items():
            res[k].append(per_call(fn, a.steps))
    load = os.getloadavg()[0]
    for (case, who), v in res.items():
        print(json.dumps({"case": case, "who": who, "wall_ms": round(statistics.median(w for w, _ in v), 4),
                          "cpu_ms": round(statistics.median(c for _, c in v), 4),
                          "wall_ms_min_max": [round(min(w for w, _ in v), 4), round(max(w for w, _ in v), 4)],
                          "width": a.width, "batch": a.batch, "threads": 1, "reps": a.reps, "steps": a.steps,
                          "cpu": cpu_name(), "load1": load}))


if __name__ == "__main__":
    main()
