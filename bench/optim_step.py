"""One optimizer step on a large f32 parameter, oar against torch 1.13 in the same process: the
median time of repeated steps for each optimizer, and oar's time over torch's. Prints JSON.

    PYTHONPATH=build/python /usr/bin/python3 bench/optim_step.py [--numel N] [--reps R] [--threads T]
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

import oar

KINDS = [("Adam", {}), ("Adadelta", {}), ("Adamax", {}), ("NAdam", {}), ("RAdam", {}), ("ASGD", {}),
         ("Rprop", {})]


def median_step(make_opt, param, grad, reps):
    opt = make_opt([param])
    param.grad = grad
    for _ in range(3):  # the state is made at the first step
        opt.step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numel", type=int, default=1 << 20)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    oar.set_num_threads(a.threads)
    rng = np.random.RandomState(0)
    p0, g0 = rng.randn(a.numel).astype(np.float32), rng.randn(a.numel).astype(np.float32)
    rows = []
    for kind, opts in KINDS:
        tp, op = torch.tensor(p0.copy(), requires_grad=True), oar.tensor(p0.copy(), requires_grad=True)
        t = median_step(lambda ps: getattr(torch.optim, kind)(ps, foreach=False, **opts), tp, torch.tensor(g0), a.reps)
        o = median_step(lambda ps: getattr(oar.optim, kind)(ps, **opts), op, oar.tensor(g0), a.reps)
        rows.append({"optimizer": kind, "oar_ms": round(o * 1e3, 3), "torch_ms": round(t * 1e3, 3),
                     "oar_over_torch": round(o / t, 3)})
    print(json.dumps({"bench": "optim_step", "numel": a.numel, "dtype": "f32", "threads": a.threads,
                      "reps": a.reps, "load_average": os.getloadavg()[0], "torch": torch.__version__,
                      "results": rows}, indent=1))


if __name__ == "__main__":
    main()
