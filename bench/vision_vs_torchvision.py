#!/usr/bin/env python3
"""oar's sampling and detection kernels against torch 1.13 / torchvision 0.14's CPU kernels, in
one process: grid_sample (bilinear, bicubic, 5-d trilinear; forward and forward+backward),
roi_align (forward, forward+backward) and nms.

For each case and thread count (both libraries set to it), every repetition times `--steps`
calls of oar, then of torch, back to back, so machine noise hits both alike; a figure is the
median over repetitions of each repetition's median call, with the spread (min-max over
repetitions), in wall ms and in process CPU ms per call (time.process_time: all threads). The
load average is read before and after each case. Prints one JSON object per line on stdout and
a Markdown table on stderr.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/vision_vs_torchvision.py
           [--threads 1 2] [--reps 5] [--steps 5] [--cases grid roi nms ...]
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_name, timed_medians as timed  # noqa: E402


def cases(R):
    """name -> (description, make(lib) -> zero-argument call)"""
    x4 = R.randn(2, 64, 50, 50).astype(np.float32)
    g4 = R.uniform(-1.1, 1.1, size=(2, 50, 50, 2)).astype(np.float32)
    x5 = R.randn(1, 16, 16, 32, 32).astype(np.float32)
    g5 = R.uniform(-1.1, 1.1, size=(1, 16, 32, 32, 3)).astype(np.float32)
    k = 256
    x1, y1 = R.uniform(-4, 90, k), R.uniform(-4, 90, k)
    boxes = np.stack([R.randint(0, 2, k), x1, y1, x1 + R.uniform(4, 40, k), y1 + R.uniform(4, 40, k)], 1)
    boxes = boxes.astype(np.float32)
    xr = R.randn(2, 64, 50, 50).astype(np.float32)
    n = 2000
    c = R.uniform(0, 300, (n, 2))
    nb = np.concatenate([c, c + R.uniform(5, 60, (n, 2))], 1).astype(np.float32)
    ns = R.rand(n).astype(np.float32)

    def gs(mode, x, g, backward):
        def make(lib):
            F = lib.nn.functional
            xi, gi = lib.tensor(x, requires_grad=backward), lib.tensor(g, requires_grad=backward)

            def call():
                y = F.grid_sample(xi, gi, mode=mode, padding_mode="zeros", align_corners=False)
                if backward:
                    y.sum().backward()
            return call
        return make

    def roi(backward):
        def make(lib):
            ops = lib._tv.ops
            xi, bi = lib.tensor(xr, requires_grad=backward), lib.tensor(boxes)

            def call():
                y = ops.roi_align(xi, bi, (7, 7), 0.5, 2, True)
                if backward:
                    y.sum().backward()
            return call
        return make

    def nms(lib):
        b, s = lib.tensor(nb), lib.tensor(ns)
        return lambda: lib._tv.ops.nms(b, s, 0.5)

    return {
        "grid_bilinear": ("grid_sample bilinear, 2x64x50x50 at 2x50x50 points", gs("bilinear", x4, g4, False)),
        "grid_bilinear_bwd": ("grid_sample bilinear forward+backward (input and grid)", gs("bilinear", x4, g4, True)),
        "grid_bicubic": ("grid_sample bicubic, 2x64x50x50 at 2x50x50 points", gs("bicubic", x4, g4, False)),
        "grid_bicubic_bwd": ("grid_sample bicubic forward+backward", gs("bicubic", x4, g4, True)),
        "grid_3d": ("grid_sample trilinear, 1x16x16x32x32 at 16x32x32 points", gs("bilinear", x5, g5, False)),
        "grid_3d_bwd": ("grid_sample trilinear forward+backward", gs("bilinear", x5, g5, True)),
        "roi": ("roi_align, 256 boxes over 2x64x50x50, 7x7, scale 0.5, ratio 2, aligned", roi(False)),
        "roi_bwd": ("roi_align forward+backward (input)", roi(True)),
        "nms": ("nms, 2000 boxes, IoU 0.5", nms),
    }



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--cases", nargs="+", default=None)
    args = ap.parse_args()
    import torch
    import torchvision
    import oar
    import oar.nn.functional  # noqa: F401
    torch._tv, oar._tv = torchvision, oar  # torchvision.ops' names; oar.ops holds roi_align / nms
    table = cases(np.random.RandomState(0))
    rows = []
    for name, (what, make) in table.items():
        if args.cases and not any(name.startswith(c) for c in args.cases):
            continue
        calls = {"oar": make(oar), "torch": make(torch)}
        for nt in args.threads:
            oar.set_num_threads(nt)
            torch.set_num_threads(nt)
            load0 = os.getloadavg()[0]
            per = {lib: ([], []) for lib in calls}
            for _ in range(args.reps):
                for lib, call in calls.items():
                    w, c = timed(call, args.steps)
                    per[lib][0].append(w)
                    per[lib][1].append(c)
            row = {"case": name, "what": what, "threads": nt, "load_before": load0, "load_after": os.getloadavg()[0],
                   "cpu": cpu_name(), "reps": args.reps, "steps": args.steps}
            for lib, (w, c) in per.items():
                row[lib] = {"wall_ms": statistics.median(w), "wall_min": min(w), "wall_max": max(w),
                            "cpu_ms": statistics.median(c), "cpu_min": min(c), "cpu_max": max(c)}
            row["ratio_wall"] = row["oar"]["wall_ms"] / row["torch"]["wall_ms"]
            row["ratio_cpu"] = row["oar"]["cpu_ms"] / row["torch"]["cpu_ms"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(f"\n{rows[0]['cpu'] if rows else ''}; median [min, max] of {args.reps} repetitions of {args.steps} calls, "
          "ms per call", file=sys.stderr)
    print("| case | threads | oar wall | torch wall | oar/torch wall | oar/torch CPU | load |", file=sys.stderr)
    print("| --- | --- | --- | --- | --- | --- | --- |", file=sys.stderr)
    for r in rows:
        o, t = r["oar"], r["torch"]
        print(f"| {r['what']} | {r['threads']} | {o['wall_ms']:.2f} [{o['wall_min']:.2f}, {o['wall_max']:.2f}] | "
              f"{t['wall_ms']:.2f} [{t['wall_min']:.2f}, {t['wall_max']:.2f}] | {r['ratio_wall']:.2f} | "
              f"{r['ratio_cpu']:.2f} | {r['load_before']:.1f}-{r['load_after']:.1f} |", file=sys.stderr)


if __name__ == "__main__":
    main()
