#!/usr/bin/env python3
"""The 3-d ops of the video models (conv3d & co., issue 14) against torch 1.13 and against oar's
earlier composition of 2-d ops, at one thread: torchvision's mc3_18 forward+backward on a clip
(train mode, sum of the logits), and one 3x3x3 conv3d forward+backward (mc3_18's layer1 shape).

Each library runs in its own interpreter (`import torch` resolves to oar there, oar.mock_torch);
every repetition runs oar, the composition and torch one after the other, so machine noise hits
them alike. A child builds its model, warms up once, then times --steps calls; a figure is the
median over repetitions of each child's median call (wall ms, and process CPU ms per call). The
composition is the base revision's python/oar/nn/functional.py (--composed-rev, read with
`git show`), loaded beside the package and put in place of the 3-d functions: the same library
and 2-d kernels, the 3-d layers composed as they were. Prints one JSON object per case on stdout
and a Markdown table on stderr; the load average before and after each case.

Usage: PYTHONPATH=build/python /usr/bin/python3 bench/video3d_vs_torch.py [--reps 5] [--steps 3]
           [--cases mc3_18 conv3d] [--clip 1 3 8 56 56] [--composed-rev b8aa3d3]
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import cpu_name  # noqa: E402

COMPOSED = ("conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d")


def child(args):
    """Runs one library on one case; prints {"ms": [...], "cpu_ms": ...}."""
    import numpy as np

    if args.lib != "torch":
        import oar

        oar.mock_torch()
        if args.lib == "composed":  # the earlier 3-d functions in place of the ops
            import oar.nn.functional as NF

            spec = importlib.util.spec_from_file_location("oar.nn._functional_composed", args.composed_file)
            old = importlib.util.module_from_spec(spec)
            old.__package__ = "oar.nn"
            spec.loader.exec_module(old)
            for name in COMPOSED:
                setattr(NF, name, getattr(old, name))
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    R = np.random.RandomState(0)
    if args.case == "mc3_18":
        import torchvision

        model = torchvision.models.video.mc3_18().train()
        x = torch.from_numpy(R.randn(*args.clip).astype(np.float32))

        def step():
            model.zero_grad()
            model(x).sum().backward()
    else:
        x = torch.from_numpy(R.randn(1, 64, 8, 28, 28).astype(np.float32)).requires_grad_()
        w = torch.from_numpy((R.randn(64, 64, 3, 3, 3) * 0.05).astype(np.float32)).requires_grad_()

        def step():
            x.grad = w.grad = None
            torch.nn.functional.conv3d(x, w, None, 1, 1).sum().backward()
    step()  # warm-up (primitives, caches)
    ts = []
    c0 = time.process_time()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"ms": ts, "cpu_ms": (time.process_time() - c0) * 1e3 / args.steps}))


def run_child(lib, case, args, composed_file):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--lib", lib, "--case", case, "--steps",
           str(args.steps), "--clip", *map(str, args.clip)]
    if composed_file:
        cmd += ["--composed-file", composed_file]
    env = dict(os.environ, OMP_NUM_THREADS="1", OAR_NUM_THREADS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return statistics.median(r["ms"]), r["cpu_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--lib", default="oar")
    ap.add_argument("--case", default="mc3_18")
    ap.add_argument("--cases", nargs="+", default=["mc3_18", "conv3d"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--clip", type=int, nargs=5, default=[1, 3, 8, 56, 56])
    ap.add_argument("--composed-rev", default="b8aa3d3")
    ap.add_argument("--composed-file")
    args = ap.parse_args()
    if args.child:
        return child(args)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = subprocess.run(["git", "-C", root, "show", f"{args.composed_rev}:python/oar/nn/functional.py"], check=True,
                         capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(src)
        composed_file = f.name
    libs = ("oar", "composed", "torch")
    rows = []
    for case in args.cases:
        load0 = os.getloadavg()[0]
        got = {lib: [] for lib in libs}
        for _ in range(args.reps):
            for lib in libs:
                got[lib].append(run_child(lib, case, args, composed_file if lib == "composed" else None))
        med = {lib: statistics.median(v[0] for v in got[lib]) for lib in libs}
        cpu = {lib: statistics.median(v[1] for v in got[lib]) for lib in libs}
        row = {"case": case, "clip": args.clip if case == "mc3_18" else [1, 64, 8, 28, 28], "threads": 1,
               "reps": args.reps, "steps": args.steps, "cpu": cpu_name(),
               "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
               "ms": {k: round(v, 2) for k, v in med.items()}, "cpu_ms": {k: round(v, 2) for k, v in cpu.items()},
               "spread_ms": {k: [round(min(v[0] for v in got[k]), 2), round(max(v[0] for v in got[k]), 2)]
                             for k in libs},
               "oar_over_torch": round(med["oar"] / med["torch"], 3),
               "composed_over_oar": round(med["composed"] / med["oar"], 3),
               "composed_rev": args.composed_rev}
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.unlink(composed_file)
    print("| case | oar ms | composed ms | torch ms | oar/torch | composed/oar | load |", file=sys.stderr)
    print("|---|---|---|---|---|---|---|", file=sys.stderr)
    for r in rows:
        print(f"| {r['case']} | {r['ms']['oar']} | {r['ms']['composed']} | {r['ms']['torch']} | {r['oar_over_torch']} "
              f"| {r['composed_over_oar']} | {r['load_before']}-{r['load_after']} |", file=sys.stderr)


if __name__ == "__main__":
    main()
