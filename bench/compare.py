#!/usr/bin/env python3
"""oar eager, oar static and PyTorch eager on the reference workloads, interleaved in one run.

For each workload and thread count, every repetition runs oar eager, oar static and PyTorch
back to back (so machine noise hits all three alike); the figure of each is the median over
repetitions of each run's median step time, with the spread (min-max over repetitions).
PyTorch's 2-thread figure is the best of its three 2-thread configurations
(../shared/bench/README.md explains why). resnet20 inference is compared against PyTorch's
best inference variant (torch.jit.optimize_for_inference, or frozen/eager if faster).

--cap avx2|generic holds oar, OpenBLAS, oneDNN and PyTorch to that instruction set alike
(CAPS below), so an AVX-512 machine can stand in for an AVX2-only one; the rows say the cap,
the level oar reported running at, PyTorch's ATen capability and the CPU. A capped run on a
CPU with AVX-512 is a proxy only: caches, memory and clocks are still that CPU's.

Prints one JSON object per line on stdout and a Markdown table on stderr.
Usage: bench/compare.py [--build build] [--shared ../shared] [--reps 3] [--threads 1 2]
                        [--workloads tiny mlp ...] [--cap avx2|generic]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile


# GEMM/conv/attention FLOP per training step, as in ../shared/bench/make_results.py (tiny: 3x fwd).
STEP_FLOP = {"tiny": 1.70e6, "mlp": 410.8e6, "lenet": 144.9e6, "resnet20": 7807.8e6,
             "gpt-mini": 21340.8e6, "lstm-lm": 11088e6}
INFER_FLOP_PER_IMAGE = 2 * 40.81e6  # resnet20 forward
TORCH_NAME = {"gpt-mini": "gpt", "lstm-lm": "lstm"}
TRAIN = ["tiny", "mlp", "lenet", "resnet20", "gpt-mini", "lstm-lm"]
INFER = ["resnet20-infer-bs1", "resnet20-infer-bs32"]
# What each library reads to stay at or below a level (docs/cpu-isa.md): oar's switch, the
# OpenBLAS core picked when the library loads (oar and PyTorch load the same OpenBLAS), oneDNN's
# max ISA (oar's and PyTorch's builds both read it) and ATen's vectorized kernels.
CAPS = {"avx2": {"OAR_CPU_ISA": "avx2", "OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2",
                 "ATEN_CPU_CAPABILITY": "avx2"},
        "generic": {"OAR_CPU_ISA": "generic", "OPENBLAS_CORETYPE": "Nehalem", "ONEDNN_MAX_CPU_ISA": "SSE41",
                    "ATEN_CPU_CAPABILITY": "default"}}
CAP_NEEDS = {"avx2": {"avx2", "fma"}, "generic": set()}
OAR_ISA = {"avx2": "avx2", "generic": "portable"}  # the "isa" oar bench reports at each cap


def cpu_facts():
    """(model name, set of flags) from /proc/cpuinfo; (platform name, empty set) elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        model = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
        flags = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
        return (model.group(1).strip() if model else "unknown"), set(flags.group(1).split() if flags else [])
    except OSError:
        import platform
        return platform.processor() or "unknown", set()


def torch_capability():
    """The vectorized ATen kernels PyTorch uses under the current environment (its build summary)."""
    r = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__config__.show())"],
                       capture_output=True, text=True)
    m = re.search(r"CPU capability usage: (\S+)", r.stdout)
    return m.group(1) if m else None


OAR_RAN_AT = set()  # the "isa" of every oar bench record of the run


def oar_ms(build, workload, mode, threads):
    cmd = [os.path.join(build, "oar"), "bench", "--mode", mode, "--threads", str(threads), "--json"]
    if workload.startswith("resnet20-infer"):
        cmd += ["--workload", "resnet20-infer", "--batch", workload.rsplit("bs", 1)[1]]
    else:
        cmd += ["--workload", workload]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(f"compare: {' '.join(cmd)} failed: {r.stderr.strip()}\n")
        return None
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    OAR_RAN_AT.add(rec.get("isa"))
    return rec["median_ms"]


def torch_run(shared, workload, extra):
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
        out = f.name
    try:
        cmd = ["/usr/bin/python3", os.path.join(shared, "bench", "torch_workloads.py"),
               "--workload", workload, "--out", out] + extra
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(f"compare: {' '.join(cmd)} failed: {r.stderr.strip()[-300:]}\n")
            return None
        with open(out) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    finally:
        os.unlink(out)


def torch_configs(threads):
    if threads == 1:
        return [["--threads", "1"]]
    return [["--threads", "2"], ["--threads", "1", "--blas-threads", "2"],
            ["--threads", "2", "--omp-wait", "passive"]]


def torch_ms(shared, workload, threads):
    """Best configuration's median; for inference, the best variant at the batch asked."""
    best = None
    for cfg in torch_configs(threads):
        if workload.startswith("resnet20-infer"):
            rec = torch_run(shared, "resnet20_infer", cfg)
            bs = workload.rsplit("bs", 1)[1]
            ms = min((v for k, v in (rec or {}).items() if k.endswith(f"_bs{bs}_ms")), default=None)
        else:
            rec = torch_run(shared, TORCH_NAME.get(workload, workload), cfg)
            ms = rec["median_ms"] if rec else None
        if ms is not None and (best is None or ms < best[0]):
            best = (ms, " ".join(cfg))
    return best


def measured_peak(build, threads, tries=3):
    """This machine's fp32 FMA peak at `threads` threads, measured by `oar bench --workload peak`
    (the figures in ../shared/bench are for another CPU). A peak is a maximum, and a neighbour
    on a shared machine can only lower a reading, so the best of `tries` readings counts."""
    best = None
    for _ in range(tries):
        r = subprocess.run([os.path.join(build, "oar"), "bench", "--workload", "peak", "--threads", str(threads)],
                           capture_output=True, text=True)
        if r.returncode != 0:  # the probe needs AVX2: a generic cap has no peak to quote
            return best
        rec = json.loads(r.stdout.strip().splitlines()[-1])
        g = rec["gflops_1t"] if threads == 1 else rec["gflops_all"]
        if best is None or g > best[0]:
            best = (g, rec["isa"])
    return best


def flop(workload):
    if workload.startswith("resnet20-infer"):
        return INFER_FLOP_PER_IMAGE * int(workload.rsplit("bs", 1)[1])
    return STEP_FLOP[workload]


def f(x, fmt):
    return "-" if x is None else format(x, fmt)


def thread_scaling(rows):
    """Per workload measured at 1 thread and at more: how many times faster the step gets."""
    by = {(r["workload"], r["threads"]): r for r in rows}
    out = []
    for (w, t), r in by.items():
        one = by.get((w, 1))
        if t == 1 or not one:
            continue
        ratio = lambda k: one[k] / r[k] if one[k] and r[k] else None
        out.append({"workload": w, "scaling_threads": [1, t], "oar_static_speedup": ratio("oar_static_ms"),
                    "oar_eager_speedup": ratio("oar_eager_ms"), "torch_speedup": ratio("torch_ms")})
    return out


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, None
    return statistics.median(xs), min(xs), max(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--shared", default=os.environ.get("OAR_SHARED_DIR", "../shared"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--workloads", nargs="+", default=TRAIN + INFER, choices=TRAIN + INFER)
    ap.add_argument("--cap", choices=sorted(CAPS), help="hold oar and PyTorch to this instruction set")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.shared, "bench", "torch_workloads.py")):
        sys.exit(f"compare: {a.shared}/bench/torch_workloads.py not found; pass --shared DIR")
    cpu, flags = cpu_facts()
    if a.cap:
        missing = CAP_NEEDS[a.cap] - flags
        if missing:  # forcing OpenBLAS's Haswell core on such a CPU would crash, not cap
            sys.exit(f"compare: --cap {a.cap} needs {', '.join(sorted(missing))}, which this CPU ({cpu}) lacks")
        os.environ.update(CAPS[a.cap])  # every oar and PyTorch process below inherits it
    else:
        for k in CAPS["avx2"]:
            if k in os.environ:
                sys.stderr.write(f"compare: note: {k}={os.environ[k]} is set and applies to this run\n")
    setting = {"cap": a.cap or "native", "cpu": cpu, "torch_cpu_capability": torch_capability()}

    peaks = {t: measured_peak(a.build, t) or (None, None) for t in a.threads}
    rows = []
    for w in a.workloads:
        for t in a.threads:
            eager, static, torch, cfgs = [], [], [], []
            for rep in range(a.reps):
                sys.stderr.write(f"\r{w} threads {t}: repetition {rep + 1}/{a.reps} ")
                sys.stderr.flush()
                eager.append(oar_ms(a.build, w, "eager", t))
                static.append(oar_ms(a.build, w, "static", t))
                tb = torch_ms(a.shared, w, t)
                torch.append(tb[0] if tb else None)
                cfgs.append(tb[1] if tb else None)
            sys.stderr.write("\r" + " " * 60 + "\r")
            e, s, p = summary(eager), summary(static), summary(torch)
            row = {"workload": w, "threads": t, "reps": a.reps, **setting,
                   "oar_eager_ms": e[0], "oar_eager_spread": [e[1], e[2]],
                   "oar_static_ms": s[0], "oar_static_spread": [s[1], s[2]],
                   "torch_ms": p[0], "torch_spread": [p[1], p[2]],
                   "torch_config": max(set(c for c in cfgs if c), key=cfgs.count, default=None),
                   "ratio_torch_over_eager": p[0] / e[0] if p[0] and e[0] else None,
                   "ratio_torch_over_static": p[0] / s[0] if p[0] and s[0] else None,
                   "static_gflops": flop(w) / (s[0] * 1e6) if s[0] else None}
            rows.append(row)
            sys.stderr.write(f"{w} threads {t}: oar static {f(s[0], '.3g')} ms, torch {f(p[0], '.3g')} ms\n")

    # measured again at the end: the fractions use the best reading of the whole run
    for t in a.threads:
        g, isa = measured_peak(a.build, t) or (None, None)
        if g is not None and (peaks[t][0] is None or g > peaks[t][0]):
            peaks[t] = (g, isa)
        print(json.dumps({"workload": "peak", "threads": t, "isa": peaks[t][1], "gflops": peaks[t][0], **setting}),
              flush=True)
    oar_isa = sorted(i for i in OAR_RAN_AT if i)
    if a.cap and oar_isa != [OAR_ISA[a.cap]]:
        sys.exit(f"compare: --cap {a.cap}: oar reported running at {oar_isa}, not {OAR_ISA[a.cap]}")
    for row in rows:
        peak, w = peaks[row["threads"]][0], row["workload"]
        row["oar_isa"] = ",".join(oar_isa) or None
        row["static_peak_fraction"] = row["static_gflops"] / peak if row["static_gflops"] and peak else None
        row["torch_peak_fraction"] = flop(w) / (row["torch_ms"] * 1e6) / peak if row["torch_ms"] and peak else None
        print(json.dumps(row), flush=True)
    scaling = thread_scaling(rows)
    for r in scaling:
        print(json.dumps(r), flush=True)

    sys.stderr.write(f"\nCPU: {cpu}; cap: {setting['cap']} (oar ran at {', '.join(oar_isa) or '?'}, "
                     f"PyTorch ATen at {setting['torch_cpu_capability']})")
    sys.stderr.write("\nmeasured fp32 peak: " + ", ".join(f"{f(g, '.0f')} GFLOP/s at {t} thread(s) ({isa})"
                                                         for t, (g, isa) in peaks.items()))
    sys.stderr.write("\n| workload | thr | oar eager ms | oar static ms | torch ms | torch/eager | "
                     "torch/static | static GFLOP/s (% peak) | torch % peak |\n|---|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        sp = lambda k: f"[{f(r[k][0], '.3g')}–{f(r[k][1], '.3g')}]"
        sys.stderr.write(
            f"| {r['workload']} | {r['threads']} | {f(r['oar_eager_ms'], '.3g')} {sp('oar_eager_spread')} | "
            f"{f(r['oar_static_ms'], '.3g')} {sp('oar_static_spread')} | {f(r['torch_ms'], '.3g')} {sp('torch_spread')} | "
            f"{f(r['ratio_torch_over_eager'], '.2f')} | {f(r['ratio_torch_over_static'], '.2f')} | "
            f"{f(r['static_gflops'], '.1f')} ({f(r['static_peak_fraction'] and 100 * r['static_peak_fraction'], '.0f')}%) | "
            f"{f(r['torch_peak_fraction'] and 100 * r['torch_peak_fraction'], '.0f')}% |\n")
    if scaling:
        sys.stderr.write("\n| workload | threads | oar static speed-up | oar eager speed-up | torch speed-up |\n"
                         "|---|---|---|---|---|\n")
        for r in scaling:
            sys.stderr.write(f"| {r['workload']} | 1 → {r['scaling_threads'][1]} | {f(r['oar_static_speedup'], '.2f')} | "
                             f"{f(r['oar_eager_speedup'], '.2f')} | {f(r['torch_speedup'], '.2f')} |\n")


if __name__ == "__main__":
    main()
