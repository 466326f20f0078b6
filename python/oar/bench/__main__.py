"""python -m oar.bench [--repeats N] [--iters N]: per-op eager overhead from Python.

`y = x + 1` on 64 floats (the op is tiny, so the time is the framework's: argument handling,
dispatch, allocation, autograd recording), with and without grad, for oar and for PyTorch in
the same process, one thread each. Prints JSON: the median time per op over the repeats with
its spread (min and max), and oar / torch ratios (below 1: oar is faster)."""
import argparse
import json
import platform
import statistics
import time


def time_per_op(fn, iters, repeats):
    fn()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        runs.append((time.perf_counter() - t0) / iters * 1e9)
    return {"median_ns": statistics.median(runs), "min_ns": min(runs), "max_ns": max(runs), "repeats": repeats,
            "iters": iters}


def cases(lib):
    x = lib.rand(64)
    xg = lib.rand(64).requires_grad_(True)
    return {
        "add_scalar_no_grad": lambda: x + 1,
        "add_scalar_grad": lambda: xg + 1,
        "add_tensor_no_grad": lambda: x + x,
        "mul_relu_no_grad": lambda: (x * x).relu(),
    }


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m oar.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20000)
    a = ap.parse_args(argv)
    import oar

    oar.set_num_threads(1)
    libs = {"oar": oar}
    try:
        import torch

        torch.set_num_threads(1)
        libs["torch"] = torch
    except ImportError:
        pass
    out = {"benchmark": "python_per_op_overhead", "cpu": cpu_model(), "threads": 1,
           "versions": {n: getattr(m, "__version__", "?") for n, m in libs.items()}, "results": {}}
    for name, lib in libs.items():
        for case, fn in cases(lib).items():
            out["results"].setdefault(case, {})[name] = time_per_op(fn, a.iters, a.repeats)
    if "torch" in libs:
        for case, r in out["results"].items():
            r["ratio_oar_over_torch"] = round(r["oar"]["median_ns"] / r["torch"]["median_ns"], 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
