#!/usr/bin/env python3
"""F.ctc_loss of oar (the ctc_loss op and its backward kernel) against torch 1.13's CPU kernel, in one
process: log_softmax of [T, N, C] logits fed to ctc_loss with padded targets, reduction 'mean';
forward alone, and forward + backward to the logits.

Both libraries run at the same thread count (1 by default). Every repetition times `--steps` calls
of oar, then of torch, back to back (interleaved, so machine noise hits both alike); a figure is the
median over repetitions of each repetition's median call (wall ms), with the spread, and the
process CPU ms per call. The load average is read before and after. Prints one JSON object per
case on stdout.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/ctc_vs_torch.py [--T 200] [--N 8] [--C 30]
           [--S 40] [--threads 1] [--reps 7] [--steps 10]
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_name, timed_medians as timed  # noqa: E402


def make(lib, logits, targets, in_len, tg_len, backward):
    z = lib.tensor(logits, requires_grad=backward)
    tg, il, tl = lib.tensor(targets), lib.tensor(in_len), lib.tensor(tg_len)
    F = lib.nn.functional

    def call():
        loss = F.ctc_loss(F.log_softmax(z, -1), tg, il, tl, blank=0, reduction="mean")
        if backward:
            z.grad = None
            loss.backward()
        return loss
    return call



def main():
    ap = argparse.ArgumentParser()
    for name, v in (("T", 200), ("N", 8), ("C", 30), ("S", 40), ("threads", 1), ("reps", 7), ("steps", 10)):
        ap.add_argument(f"--{name}", type=int, default=v)
    a = ap.parse_args()
    import torch
    import oar
    import oar.nn.functional  # noqa: F401

    R = np.random.RandomState(0)
    logits = R.randn(a.T, a.N, a.C).astype(np.float32)
    targets = R.randint(1, a.C, size=(a.N, a.S)).astype(np.int64)
    in_len = np.full(a.N, a.T, dtype=np.int64)
    tg_len = np.full(a.N, a.S, dtype=np.int64)
    oar.set_num_threads(a.threads)
    torch.set_num_threads(a.threads)
    # the two libraries agree before they are timed
    lo = make(oar, logits, targets, in_len, tg_len, False)().item()
    lt = make(torch, logits, targets, in_len, tg_len, False)().item()
    assert abs(lo - lt) <= 1e-4 * abs(lt), (lo, lt)
    for backward in (False, True):
        calls = {lib.__name__: make(lib, logits, targets, in_len, tg_len, backward) for lib in (oar, torch)}
        load0 = os.getloadavg()[0]
        per = {k: ([], []) for k in calls}
        for _ in range(a.reps):
            for k, call in calls.items():
                w, c = timed(call, a.steps)
                per[k][0].append(w)
                per[k][1].append(c)
        row = {"case": "ctc_loss " + ("forward+backward" if backward else "forward"),
               "shape": {"T": a.T, "N": a.N, "C": a.C, "S": a.S}, "threads": a.threads, "reps": a.reps,
               "steps": a.steps, "cpu": cpu_name(), "load_before": load0, "load_after": os.getloadavg()[0]}
        for k, (w, c) in per.items():
            row[k] = {"wall_ms": statistics.median(w), "wall_min": min(w), "wall_max": max(w),
                      "cpu_ms": statistics.median(c)}
        row["ratio_wall"] = row["oar"]["wall_ms"] / row["torch"]["wall_ms"]
        row["ratio_cpu"] = row["oar"]["cpu_ms"] / row["torch"]["cpu_ms"]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
