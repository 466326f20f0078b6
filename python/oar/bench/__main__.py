"""python -m oar.bench [--repeats N] [--iters N] [--compiled]: per-op eager overhead from Python.

`y = x + 1` on 64 floats (the op is tiny, so the time is the framework's: argument handling,
dispatch, allocation, autograd recording), with and without grad, for oar and for PyTorch in
the same process, one thread each. Prints JSON: the median time per op over the repeats with
its spread (min and max), and oar / torch ratios (below 1: oar is faster).

--compiled: a training step compiled from Python (oar.jit.to_static: the zoo's mlp, 784-512-512-10,
batch 128, SGD with momentum) against the same step compiled from C (`oar bench --workload mlp
--mode static`, the oar command from $OAR_CLI or PATH), alternating, one thread: medians of the
per-step medians, and python / C (the front end's cost on a compiled step).

--zoo [WORKLOAD...]: resnet20, gpt-mini and lstm-lm written as plain PyTorch code
(oar/examples/zoo_torch.py) trained by PyTorch, by oar eagerly and by oar compiled, in the same
run (bench/zoo.py)."""
import argparse
import json
import os
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


def python_compiled_mlp(steps):
    """Median ms per step of the zoo mlp's training step compiled from Python."""
    import oar
    import oar.nn as nn
    import oar.nn.functional as F

    oar.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = oar.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = oar.randn(128, 784), oar.randint(0, 10, (128,))

    @oar.jit.to_static
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(3):
        step(x, y)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step(x, y)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def c_compiled_mlp(cli, steps):
    import subprocess

    r = subprocess.run([cli, "bench", "--workload", "mlp", "--mode", "static", "--threads", "1", "--steps",
                        str(steps), "--json"], check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def compiled(repeats, steps):
    import os
    import shutil

    import oar

    cli = os.environ.get("OAR_CLI") or shutil.which("oar")
    if not cli:
        raise SystemExit("python -m oar.bench --compiled: the oar command is needed (set OAR_CLI or put it on PATH)")
    oar.set_num_threads(1)
    py, c = [], []
    for _ in range(repeats):
        py.append(python_compiled_mlp(steps))
        c.append(c_compiled_mlp(cli, steps))
    out = {"benchmark": "compiled_step_python_vs_c", "workload": "mlp", "batch": 128, "cpu": cpu_model(), "threads": 1,
           "python_ms": {"median": statistics.median(py), "min": min(py), "max": max(py)},
           "c_ms": {"median": statistics.median(c), "min": min(c), "max": max(c)},
           "ratio_python_over_c": round(statistics.median(py) / statistics.median(c), 3), "repeats": repeats}
    print(json.dumps(out, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m oar.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--compiled", action="store_true", help="a compiled training step, Python vs C")
    ap.add_argument("--zoo", nargs="*", metavar="WORKLOAD",
                    help="the zoo's resnet20, gpt-mini, lstm-lm as PyTorch code: torch vs oar eager vs oar compiled")
    ap.add_argument("--steps", type=int, default=10, help="--zoo: steps timed per repeat")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="--zoo: threads for both")
    a = ap.parse_args(argv)
    if a.compiled:
        return compiled(a.repeats, 50)
    if a.zoo is not None:
        from . import zoo

        return zoo.main(a.zoo or zoo.load(False).WORKLOADS, a.steps, a.repeats, a.threads, cpu_model())
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
